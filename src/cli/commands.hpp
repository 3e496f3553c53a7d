#pragma once
// Each `nj` subcommand registers itself on the top-level app; its callback does the work and throws on error.
#include <CLI/CLI.hpp>

#include "nj/comm/communicator.hpp"
#include "nj/exec/host_footprint.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/run/rank_setup.hpp"

namespace nj::cli {

void add_convert_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_info_command(CLI::App& app);
// Training runs on every rank of the job that `comm` spans.
void add_train_command(CLI::App& app, Communicator& comm);
void add_plan_command(CLI::App& app);
void add_partition_command(CLI::App& app);

// --community-order / --no-community-order of the commands that write a dataset file (on by default).
void add_community_order_flag(CLI::App& command, bool& store);
// Stores the dataset's community order with it where `store` says so, logging how long the search took.
void add_community_order(Dataset& dataset, bool store);

// Applies a TOML (or INI) file to a parsed subcommand: each key is a long option name without the dashes, and
// options given on the command line take precedence. CLI11 2.1 reads config files only for the top-level app.
void apply_config_file(CLI::App& command, const std::string& path);

// The model flags shared by `nj train` and `nj plan`.
struct ModelArguments {
  std::string model = "gcn";
  std::string activation;  // empty: relu for GCN, elu for GAT
  ModelConfig config;
  // The configuration the flags describe; throws nj::InputError on bad values.
  ModelConfig resolve() const;
};
void add_model_options(CLI::App& command, ModelArguments& args);

// The executor flags shared by `nj train` and `nj plan`.
struct ExecutorArguments {
  std::string execution = "reuse";
  std::string device_memory = "unlimited";
  std::string cache_policy = "st-aware";
  std::string vertex_order = "community";
  std::string host_blocks = "2G";
};
// With allow_in_memory (nj train) the default execution is auto.
void add_executor_options(CLI::App& command, ExecutorArguments& args, bool allow_in_memory);
ExecutorChoice parse_executor_choice(const ExecutorArguments& args);

// What rank `rank` of `ranks` will load, from a dataset file or a partition folder, read from the files' shapes
// and the manifest without loading them.
RankShape rank_shape(const std::string& dataset, const std::string& partitions, int rank, int ranks);
// The host memory a rank may use: --host-memory where given, else what the machine has available (the least of
// MemAvailable and the cgroup's limit) shared among the ranks on this node; -1 where unknown.
struct HostMemoryLimit {
  std::int64_t bytes = -1;
  std::string source;  // "available on this machine", ...
};
HostMemoryLimit host_memory_limit(const std::string& option);
RunLayout run_layout(const ExecutorChoice& choice, bool device_in_host_memory);
// " | h2d 1.2M d2h 0.3M | hit 93.1% | recompute 1.00 | peak 4.0M" for an epoch's console line.
std::string format_execution(const ExecutionMetrics& metrics);

}  // namespace nj::cli
