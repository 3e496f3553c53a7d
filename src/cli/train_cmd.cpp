// nj train: loads a dataset, builds the model and trains it full-batch, one line per epoch.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>

#include "cli/commands.hpp"
#include "cli/fault_injection.hpp"
#include "cli/progress.hpp"
#include "nj/comm/communicator.hpp"
#include "nj/comm/device_communicator.hpp"
#include "nj/runtime/rank_communicator.hpp"
#include "nj/core/bytes.hpp"
#include "nj/core/host_memory.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/runtime/resources.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/kernels/blas_kernels.hpp"
#include "nj/partition/partition.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/train/checkpoint.hpp"
#include "nj/train/metrics_log.hpp"
#include "nj/train/trainer.hpp"

namespace nj::cli {
namespace {

struct TrainArguments {
  std::string config_file;
  std::string dataset;
  ModelArguments model;
  TrainOptions options;
  std::string decay_scope = "all";
  TrainArguments() { options.adam.weight_decay = 5e-4F; }
  std::string feature_norm = "none";
  int threads = 0;
  std::string device = "auto";
  bool deterministic = false;
  ExecutorArguments executor;
  std::string metrics_out;
  std::string save_checkpoint;
  std::string load_checkpoint;
  std::string checkpoint_dir;
  std::uint32_t checkpoint_every = 0;  // epochs; 0: only after the last
  bool resume = false;
  std::string partitions;
  std::string partition_method = "metis";
  std::string host_memory;     // --host-memory; empty: what the machine has available
  std::string inject_failure;  // "RANK:EPOCH[:HOW]", for tests of failure handling
};

// " | exchange 1.2M (wait 0.003 s)": bytes all ranks sent this epoch, and the waits for the exchanges, each
// the slowest rank's, added up.
std::string format_exchange(const EpochMetrics& m) {
  std::int64_t bytes = 0;
  double wait = 0.0;
  for (const auto& layer : m.exchange) {
    for (const ExchangeSummary& d : layer) {
      bytes += d.bytes_sent;
      wait += d.wait_seconds.max;
    }
  }
  return fmt::format(" | exchange {} (wait {:.3f} s)", format_bytes(bytes), wait);
}

nlohmann::json partition_json(const Shard& shard, int ranks) {
  const PartitionInfo& p = shard.partition;
  nlohmann::json mirror_fraction = nlohmann::json::array();
  for (int part = 0; part < p.parts; ++part) mirror_fraction.push_back(p.mirror_fraction(part));
  return {{"method", p.method},
          {"parts", p.parts},
          {"ranks", ranks},
          {"edge_cut", p.edge_cut},
          {"cut_fraction", p.cut_fraction()},
          {"mirror_fraction", mirror_fraction},
          {"vertex_imbalance", p.vertex_imbalance()},
          {"train_imbalance", p.train_imbalance()}};
}

std::string format_accuracy(double value) { return std::isnan(value) ? "  -   " : fmt::format("{:.4f}", value); }

// What a rank holds once it is set up to train.
struct RankTraining {
  ModelConfig config;
  ExecutorChoice choice;
  DeviceChoice device;
  FailurePoint failure;
  Shard shard;
  Resources resources;
  // With several ranks: the communicator that sends from device memory (NCCL on CUDA), over the job's.
  std::unique_ptr<Communicator> device_comm;
  std::unique_ptr<Model> model;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<Executor> failing;  // wraps executor on the rank that --inject-failure names
  std::unique_ptr<Trainer> trainer;
  RunIdentity identity;                         // what a checkpoint of this run records
  std::optional<CheckpointFolder> checkpoints;  // --checkpoint-dir, on rank 0
  TrainingProgress resumed;                     // rank 0's, from a checkpoint; epoch 0 otherwise
  MetricsLog log;                               // rank 0's
};

void require_file(const std::string& path, const char* what) {
  NJ_REQUIRE(std::filesystem::is_regular_file(path), "{} {}: no such file", what, path);
}

// --load-checkpoint FILE, or --resume from the newest checkpoint of --checkpoint-dir (starting afresh where it
// has none, so that a job that is requeued runs the same command as the first time).
void resume_on_leader(const TrainArguments& args, RankTraining& rank) {
  Adam& optimizer = rank.trainer->optimizer();
  if (!args.checkpoint_dir.empty()) rank.checkpoints.emplace(args.checkpoint_dir);
  std::string from;
  if (!args.load_checkpoint.empty()) {
    require_file(args.load_checkpoint, "--load-checkpoint");
    rank.resumed = load_checkpoint(args.load_checkpoint, rank.identity, optimizer);
    from = args.load_checkpoint;
  } else if (args.resume) {
    auto resumed = rank.checkpoints->resume(rank.identity, optimizer);
    if (!resumed) {
      spdlog::info("resume: no checkpoint in {}: starting at epoch 1", args.checkpoint_dir);
      return;
    }
    rank.resumed = resumed->progress;
    from = resumed->path;
  } else {
    return;
  }
  spdlog::info("resumed from {}: {} epochs done, continuing at epoch {}", from, rank.resumed.next_epoch,
               rank.resumed.next_epoch + 1);
}

// Reads the configuration file, checks the arguments, chooses the device and loads and orders this rank's shard:
// what a rank does alone before the ranks meet.
void set_up_data(TrainArguments& args, CLI::App& command, Communicator& comm, RankTraining& rank) {
  if (!args.config_file.empty()) {
    require_file(args.config_file, "--config");
    apply_config_file(command, args.config_file);
  }
  NJ_REQUIRE(args.dataset.empty() != args.partitions.empty(),
             "give either a dataset or --partitions (a folder written by nj partition), not {}",
             args.dataset.empty() ? "neither" : "both");
  rank.config = args.model.resolve();
  rank.choice = parse_executor_choice(args.executor);
  args.options.decay_scope = parse_weight_decay_scope(args.decay_scope);
  NJ_REQUIRE(args.options.epochs >= 1, "--epochs must be at least 1");
  NJ_REQUIRE(args.options.adam.lr > 0.0F, "--lr must be positive");
  NJ_REQUIRE(rank.choice.in_memory || rank.choice.options.mode == ExecutionMode::kReuse || comm.size() == 1,
             "--execution recompute runs on one rank only (its closures cross ranks); this job has {} ranks",
             comm.size());
  if (!args.inject_failure.empty()) rank.failure = parse_failure_point(args.inject_failure);
  NJ_REQUIRE(!args.resume || !args.checkpoint_dir.empty(), "--resume needs --checkpoint-dir (where to resume from)");
  NJ_REQUIRE(args.checkpoint_every == 0 || !args.checkpoint_dir.empty(),
             "--checkpoint-every needs --checkpoint-dir (where to write)");
  NJ_REQUIRE(!args.resume || args.load_checkpoint.empty(),
             "give --resume (the newest checkpoint of --checkpoint-dir) or --load-checkpoint FILE, not both");
  // Before the dataset loads: a missing GPU is a one-line error at once.
  rank.device = choose_device(parse_device_kind(args.device));

  if (!args.dataset.empty()) require_file(args.dataset, "dataset");
  NJ_REQUIRE(args.partitions.empty() || std::filesystem::is_directory(args.partitions),
             "--partitions {}: no such folder", args.partitions);
  // Before loading: a run that cannot fit in host memory is an error now, not the operating system's kill later.
  RunLayout layout = run_layout(rank.choice, rank.device.kind == DeviceKind::kCpu);
  layout.threads = args.threads;
  const HostFootprint footprint =
      predict_host_footprint(rank.config, rank_shape(args.dataset, args.partitions, comm.rank(), comm.size()), layout);
  const HostMemoryLimit limit = host_memory_limit(args.host_memory);
  require_host_memory(footprint, limit.bytes, comm.size() > 1 ? "this rank" : "this run", limit.source);
  spdlog::info("host memory: at least {} ({}) of {} {}", format_bytes(footprint.total()), footprint.describe(),
               limit.bytes < 0 ? "an unknown amount" : format_bytes(limit.bytes), limit.source);
  rank.shard = load_rank_shard({.dataset = args.dataset,
                                 .partitions = args.partitions,
                                 .partition_method = parse_partition_method(args.partition_method),
                                 .normalize_rows = args.feature_norm == "row"},
                                rank.choice.vertex_order, comm);
}

// The device and its communicator. Counting the ranks on each card and connecting the device communicator are
// collectives: every rank reaches them here, in this order, once the data is set up on every rank (a rank that
// failed before would leave the others waiting in them). Making the device may fail on one rank alone: agreed.
void set_up_device(const TrainArguments& args, Communicator& comm, RankTraining& rank) {
  rank.device.ranks_per_gpu = count_ranks_sharing_gpu(comm, rank.device);
  agree_on_failure(comm, [&] {
    spdlog::info("device: {}{}", rank.device.reason,
                 rank.device.ranks_per_gpu > 1 ? fmt::format(", shared by {} ranks", rank.device.ranks_per_gpu) : "");
    // In-memory execution has the device to itself, without a budget.
    rank.resources = make_resources(
        rank.device, {.budget_bytes = rank.choice.in_memory ? kUnlimited : rank.choice.options.device_budget,
                      .threads = args.threads,
                      .deterministic = args.deterministic});
  });
  // A rank that fails to connect leaves the others inside the connection: its error ends the job (main).
  rank.device_comm = make_rank_communicator(comm, rank.resources);
  if (comm.size() > 1 && !rank.device_comm) {
    spdlog::info("exchange: over MPI from host memory ({} ranks share a GPU; NCCL needs one GPU per rank)",
                 rank.resources.ranks_per_device);
  }
}

// The model, its executor (planned), the trainer, a checkpoint to resume from and the metrics log.
void set_up_training(const TrainArguments& args, Communicator& comm, RankTraining& rank) {
  const Shard& shard = rank.shard;
  Communicator& training_comm = rank.device_comm ? *rank.device_comm : comm;
  rank.model = std::make_unique<Model>(rank.config, shard.features.cols(), shard.num_classes);
  rank.executor = make_executor(rank.choice, rank.resources, *rank.model, rank.shard, training_comm);
  if (rank.failure.in_step(comm.rank())) rank.failing = make_failing_executor(*rank.executor, rank.failure);
  rank.trainer = std::make_unique<Trainer>(*rank.model, rank.failing ? *rank.failing : *rank.executor, training_comm,
                                           targets_of(shard), args.options);
  rank.identity = identify_run(rank.config, shard, args.feature_norm, args.options);
  // Rank 0 alone reads and writes checkpoints; the others get the state from it (broadcast_training_state).
  if (comm.rank() == 0) resume_on_leader(args, rank);
  if (!args.metrics_out.empty() && comm.rank() == 0) {
    rank.log = MetricsLog(args.metrics_out, rank.resumed.next_epoch > 0 ? MetricsLog::kAppend : MetricsLog::kCreate);
  }
}

// Every rank must hold a shard of the same partition of the same dataset; mixed folders would exchange rows
// that do not match, silently. Compares what every shard records about the whole.
void check_same_partition(Communicator& comm, const Shard& shard) {
  const PartitionInfo& p = shard.partition;
  std::vector<double> lowest = {static_cast<double>(shard.global_vertices),
                                static_cast<double>(shard.global_edges),
                                static_cast<double>(shard.global_train),
                                static_cast<double>(p.parts),
                                static_cast<double>(p.seed),
                                static_cast<double>(p.edge_cut)};
  std::vector<double> highest = lowest;
  for (double& value : lowest) value = -value;
  comm.all_reduce_max(lowest);
  comm.all_reduce_max(highest);
  for (std::size_t i = 0; i < highest.size(); ++i) {
    NJ_REQUIRE(-lowest[i] == highest[i],
               "the ranks hold shards of different partitions or datasets (their vertex, edge or training counts, "
               "part counts, seeds or edge cuts differ)");
  }
}

void run_train(TrainArguments& args, CLI::App& command, Communicator& comm) {
  const bool leader = comm.rank() == 0;
  // Only rank 0 reports; the others say only what goes wrong.
  if (!leader) spdlog::set_level(std::max(spdlog::get_level(), spdlog::level::warn));
  const std::int64_t baseline_rss = resident_memory().current;
  RankTraining rank;
  // A bad argument, a missing shard or a budget too small for one rank's graph ends every rank, reported once.
  agree_on_failure(comm, [&] { set_up_data(args, command, comm, rank); });
  if (comm.size() > 1) agree_on_failure(comm, [&] { check_same_partition(comm, rank.shard); });
  set_up_device(args, comm, rank);
  agree_on_failure(comm, [&] { set_up_training(args, comm, rank); });
  if (!args.load_checkpoint.empty() || args.resume) {
    broadcast_training_state(comm, 0, rank.resumed, rank.trainer->optimizer());
    rank.trainer->restore(rank.resumed);
  }
  const ModelConfig& config = rank.config;
  const ExecutorChoice& choice = rank.choice;
  const Shard& shard = rank.shard;
  Model& model = *rank.model;
  Trainer& trainer = *rank.trainer;
  const std::string_view backend = rank.resources.backend->name();
  spdlog::info("model {}: {} layers, hidden {}, {} parameters, backend {}{}", to_string(config.kind), config.layers,
               config.hidden, model.num_parameters(), backend,
               backend == "cpu" ? fmt::format(" (OpenBLAS {} kernels)", openblas_core()) : "");

  MetricsLog& log = rank.log;
  // The kill that --inject-failure ...:kill-in-checkpoint asks for, once the data is on disk and not yet named.
  const std::function<void()> on_checkpoint_written = [&rank] {
    if (rank.failure.how == FailurePoint::How::kKillInCheckpoint &&
        rank.failure.epoch + 1 == rank.trainer->progress().next_epoch) {
      std::raise(SIGKILL);
    }
  };
  // Rank 0 writes; every rank agrees on the outcome, so that a failed write ends every rank, reported once.
  auto agreed_write = [&](const std::function<std::string()>& write) {
    agree_on_failure(comm, [&] {
      if (leader) spdlog::info("checkpoint written to {}", write());
    });
  };
  // A bar over the epochs on a terminal; elsewhere each epoch's line is the progress.
  ProgressDisplay progress("train", leader && isatty(STDERR_FILENO) != 0);
  progress.update("epochs", trainer.progress().next_epoch, args.options.epochs);
  const TrainSummary summary = trainer.fit([&](const EpochMetrics& m) {
    progress.clear();
    spdlog::info("epoch {:4d} | loss {:.4f} | train {} val {} test {} | {:.3f} s{}{}", m.epoch + 1, m.loss,
                 format_accuracy(m.accuracy.train), format_accuracy(m.accuracy.val), format_accuracy(m.accuracy.test),
                 m.train_seconds(), choice.in_memory ? std::string() : format_execution(m.execution),
                 comm.size() > 1 ? format_exchange(m) : std::string());
    log.write(to_json(m));
    const std::uint32_t done = m.epoch + 1;
    if (!args.checkpoint_dir.empty() &&
        (done == args.options.epochs || (args.checkpoint_every > 0 && done % args.checkpoint_every == 0))) {
      agreed_write([&] {
        return rank.checkpoints->save(rank.identity, trainer.progress(), trainer.optimizer(), on_checkpoint_written);
      });
    }
    progress.update("epochs", done, args.options.epochs);
  });
  progress.clear();
  if (!args.save_checkpoint.empty()) {
    agreed_write([&] {
      save_checkpoint(args.save_checkpoint, rank.identity, trainer.progress(), trainer.optimizer());
      return args.save_checkpoint;
    });
  }
  // Host memory each rank took for its data and training, above what it held before loading.
  const OverRanks host_bytes = over_ranks(comm, {static_cast<double>(resident_memory().peak - baseline_rss)}).front();
  auto record = to_json(summary);
  record["dataset"] = {{"name", shard.name},
                       {"vertices", shard.global_vertices},
                       {"edges", shard.global_edges},
                       {"features", shard.features.cols()},
                       {"classes", shard.num_classes}};
  record["model"] = {{"kind", to_string(config.kind)},
                     {"layers", config.layers},
                     {"hidden", config.hidden},
                     {"parameters", model.num_parameters()}};
  record["execution"] = choice.in_memory ? "in-memory" : to_string(choice.options.mode);
  record["device"] = {{"kind", rank.resources.device->name()},
                      {"budget_bytes", rank.resources.device->budget_bytes()},
                      {"exchange_from", rank.device_comm ? "device memory" : "host memory"}};
  record["partition"] = partition_json(shard, comm.size());
  record["host_peak_above_baseline_bytes"] = to_json(host_bytes);
  log.write(record);
  spdlog::info("done: final test {} | best val {} at epoch {} (test {}) | median epoch {:.4f} s",
               format_accuracy(summary.final_accuracy.test), format_accuracy(summary.best_val_accuracy.val),
               summary.best_val_epoch + 1, format_accuracy(summary.best_val_accuracy.test),
               summary.median_epoch_seconds);
}

}  // namespace

void add_train_command(CLI::App& app, Communicator& comm) {
  auto args = std::make_shared<TrainArguments>();
  CLI::App* cmd = app.add_subcommand("train",
                                     "Full-graph training of a GCN or GAT on a dataset file, or on partition shards "
                                     "with one rank per shard (mpirun, srun)");
  // Paths are checked when each rank sets up, not while parsing: ranks on different nodes may see different
  // file systems, and a check that fails on some ranks only must still end every rank (agree_on_failure).
  cmd->add_option("--config", args->config_file,
                  "Read options from a TOML file (keys are the long option names; flags given here win)");
  cmd->add_option("dataset,--dataset", args->dataset, "Dataset file (HDF5, see docs/dataset-format.md)");
  cmd->add_option("--partitions", args->partitions,
                  "Partition folder written by nj partition: each rank reads only its own shard (its part count "
                  "must equal the number of ranks)");
  cmd->add_option("--partition-method", args->partition_method,
                  "How several ranks partition a dataset given without --partitions (in memory, on every rank)")
      ->check(CLI::IsMember({"metis", "random", "contiguous"}))
      ->capture_default_str();
  cmd->add_option("--host-memory", args->host_memory,
                  "Host memory this rank may use, e.g. 16G (default: what the machine has available, shared by the "
                  "ranks on it); a run predicted to need more stops before loading");
  cmd->add_option("--inject-failure", args->inject_failure, "Raise an error on rank R in epoch E (tests)")->group("");
  add_model_options(*cmd, args->model);
  cmd->add_option("--epochs", args->options.epochs, "Epochs (one optimizer step each)")->capture_default_str();
  cmd->add_option("--lr", args->options.adam.lr, "Adam learning rate")->capture_default_str();
  cmd->add_option("--weight-decay", args->options.adam.weight_decay, "L2 weight decay added to the gradient")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--weight-decay-scope", args->decay_scope,
                  "Parameters decayed: all, or first (layer 1 only, as Kipf's GCN)")
      ->check(CLI::IsMember({"all", "first"}))
      ->capture_default_str();
  cmd->add_option("--feature-norm", args->feature_norm, "Feature normalisation: none, or row (divide by the row sum)")
      ->check(CLI::IsMember({"none", "row"}))
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "Threads (0: OpenMP's default)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--device", args->device,
                  "Where to compute: cuda (the GPU of this rank's local rank), cpu (the device emulated in host "
                  "memory), or auto (cuda where a GPU is present)")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  cmd->add_flag("--deterministic", args->deterministic,
                "CUDA: aggregate with the shared row kernels instead of cuSPARSE, so that runs repeat bit for bit "
                "(the CPU backend always does)");
  cmd->add_option("--eval-every", args->options.eval_every, "Evaluate every k epochs (0: only after the last)")
      ->capture_default_str();
  add_executor_options(*cmd, args->executor, true);
  cmd->add_option("--metrics-out", args->metrics_out, "Write one JSON object per epoch and a summary to this file");
  cmd->add_option("--save-checkpoint", args->save_checkpoint,
                  "Write weights, optimizer state and progress to this file at the end");
  cmd->add_option("--load-checkpoint", args->load_checkpoint,
                  "Continue from this checkpoint (it must come from the same model, dataset, partitioning and "
                  "optimizer settings)");
  cmd->add_option("--checkpoint-dir", args->checkpoint_dir,
                  "Write checkpoints into this folder (checkpoint-<epochs done>.h5, the newest two kept), after "
                  "the last epoch and every --checkpoint-every epochs");
  cmd->add_option("--checkpoint-every", args->checkpoint_every, "Epochs between checkpoints (0: after the last only)")
      ->capture_default_str();
  cmd->add_flag("--resume", args->resume,
                "Continue from the newest readable checkpoint of --checkpoint-dir, or start afresh where it has none");
  cmd->callback([args, cmd, &comm] { run_train(*args, *cmd, comm); });
}

}  // namespace nj::cli
