#pragma once
// Each `nj` subcommand registers itself on the top-level app; its callback does the work and throws on error.
#include <CLI/CLI.hpp>

#include "cli/validators.hpp"
#include "nj/comm/communicator.hpp"
#include "nj/exec/host_footprint.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/partition/partition.hpp"
#include "nj/run/rank_setup.hpp"
#include "nj/train/trainer.hpp"

namespace nj::cli {

void add_convert_command(CLI::App& app);
void add_generate_command(CLI::App& app, Communicator& comm);
void add_info_command(CLI::App& app);
// Training runs on every rank of the job that `comm` spans.
void add_train_command(CLI::App& app, Communicator& comm);
// Inference too: each rank infers its own rows, and rank 0 writes them all.
void add_infer_command(CLI::App& app, Communicator& comm);
void add_plan_command(CLI::App& app);
// Partitioning runs in one process, or on every rank of the job that `comm` spans.
void add_partition_command(CLI::App& app, Communicator& comm);

// What the commands that write a dataset file decide about it: --community-order / --no-community-order (on by
// default) and --feature-storage.
struct DatasetOutputArguments {
  bool community_order = true;
  std::string feature_storage = "auto";
};
void add_dataset_output_options(CLI::App& command, DatasetOutputArguments& args);
// Stores the dataset's community order with it where asked (logging how long the search took) and writes it.
void write_dataset_output(Dataset& dataset, const std::string& path, const DatasetOutputArguments& args);

// The type name of options that take a file or folder: a relative path in a configuration file is relative to the
// file's folder.
inline constexpr const char* kPathType = "PATH";

// Applies a TOML file to a parsed subcommand: each key is a long option name without the dashes (or the name of a
// positional argument), and options given on the command line take precedence. Every error names the file, and
// the line where there is one.
void apply_config_file(CLI::App& command, const std::string& path);

// Where nj train and nj plan read their data: a dataset file, as the argument or --dataset, or a partition
// folder; and --config.
struct DataArguments {
  std::string config_file;
  std::string positional_dataset;
  std::string dataset_option;
  std::string partitions;
  // The dataset file, however it was given; throws nj::InputError where it was given both ways.
  std::string dataset() const;
};
void add_data_options(CLI::App& command, DataArguments& args, const std::string& dataset_help);

// The options only training uses; nj plan accepts them too (in its help's `group`) and ignores them.
struct TrainingOnlyArguments {
  TrainOptions options;
  std::string decay_scope = "all";
  std::string feature_norm = "none";
  std::string metrics_out;
  std::string save_checkpoint;
  std::string load_checkpoint;
  std::string checkpoint_dir;
  std::uint32_t checkpoint_every = 0;  // epochs; 0: only after the last
  bool resume = false;
  bool allow_other_graph = false;  // --load-checkpoint (and nj infer) from a checkpoint trained on another graph
  bool keep_best = false;          // also keep the checkpoint of the best validation accuracy in checkpoint_dir
  std::string partition_method = "scotch";
  std::string host_memory;  // --host-memory; empty: what the machine has available
  TrainingOnlyArguments() { options.adam.weight_decay = 5e-4F; }
};
void add_training_only_options(CLI::App& command, TrainingOnlyArguments& args, const std::string& group);

// How a command that reads a dataset file takes a partition folder in its place: nj train with --partitions;
// nj partition not at all.
enum class PartitionFolders { kByOption, kNotRead };
// Throws nj::InputError unless `path` is a file; where it is a folder, the message says what the folder holds and
// what to run instead.
void require_dataset_file(const std::string& path, PartitionFolders partition_folders);
// Throws nj::InputError where nj convert's input is a folder of another format than `format`, or of none.
void require_convert_input(const std::string& format, const std::string& path);

// The model flags shared by `nj train` and `nj plan`.
struct ModelArguments {
  std::string model = "gcn";
  std::string activation;  // empty: relu for GCN, elu for GAT
  ModelConfig config;
  CLI::App* command = nullptr;  // where the options are, set by add_model_options
  // The configuration the flags describe; throws nj::InputError on bad values.
  ModelConfig resolve() const;
  // Gives each option not given (on the command line or in a configuration file) `checkpoint`'s value; returns
  // whether any was not given.
  bool default_to(const ModelConfig& checkpoint);
};
void add_model_options(CLI::App& command, ModelArguments& args);

// The executor flags shared by `nj train` and `nj plan`.
struct ExecutorArguments {
  std::string execution = "auto";
  std::string device_memory = "unlimited";
  std::string cache_policy = "st-aware";
  std::string vertex_order = "community";
  std::string host_blocks = "2G";
  std::string sparse_inputs = "auto";
  std::string recompute_outputs = "auto";
};
void add_executor_options(CLI::App& command, ExecutorArguments& args);
ExecutorChoice parse_executor_choice(const ExecutorArguments& args);

// What decides whether an option applies, beyond the model and the executor: the job's ranks, whether they read a
// partition folder, and whether they compute on a GPU.
struct RunContext {
  int ranks = 1;
  bool partitions_given = false;
  bool on_gpu = false;
};
// "--heads is ignored: it applies to --model gat only, and this run's model is sage": a line for each option given (on
// the command line or in a configuration file) that the run does not use.
std::vector<std::string> unused_option_warnings(const CLI::App& command, const ModelConfig& model,
                                                const ExecutorChoice& choice, const RunContext& context);
// Logs them as warnings.
void warn_unused_options(const CLI::App& command, const ModelConfig& model, const ExecutorChoice& choice,
                         const RunContext& context);

// What rank `rank` of `ranks` will load, from a dataset file (partitioned by `method` on several ranks) or a partition
// folder, read from the files' shapes and the manifest without loading them.
RankShape rank_shape(const std::string& dataset, const std::string& partitions, int rank, int ranks,
                     PartitionMethod method);
// The host memory a rank may use: --host-memory where given, else what the machine has available (the least of
// MemAvailable and the cgroup's limit) shared among the ranks on this node; -1 where unknown.
struct HostMemoryLimit {
  std::int64_t bytes = -1;
  std::string source;  // "available on this machine", ...
};
HostMemoryLimit host_memory_limit(const std::string& option);
// A rank's host memory at its peak for `run`, planned as `choice` on a device it completed (its library memory): the
// larger of `loading` and the run's (its process holding `process_bytes`, and MPI's exchange buffers where it has
// peers). The forecast nj plan prints and nj train meets (HostBudget).
HostFootprint host_forecast(const Model& model, const RankShape& shape, const HostFootprint& loading,
                            const ExecutorChoice& choice, const PlannedRun& run, std::int64_t process_bytes,
                            bool has_peers, int threads);
// "h2d 1.2M (+ graph 0.1M) d2h 0.3M (+ parameters 0.1M)": what moved each way, rows first, the rest by what it carried.
std::string format_copies(const ExecutionMetrics& metrics);
// " | h2d ... | hit 93.1% | rows computed 1.00x | peak 4.0M | wait 0.001 s" for an epoch's console line.
std::string format_execution(const ExecutionMetrics& metrics);

}  // namespace nj::cli
