// nj train: loads a dataset, builds the model and trains it full-batch, one line per epoch.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>

#include "cli/commands.hpp"
#include "cli/fault_injection.hpp"
#include "cli/interruption.hpp"
#include "cli/logging.hpp"
#include "cli/progress.hpp"
#include "nj/comm/communicator.hpp"
#include "nj/comm/device_communicator.hpp"
#include "nj/core/bytes.hpp"
#include "nj/core/host_memory.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/kernels/blas_kernels.hpp"
#include "nj/partition/partition.hpp"
#include "nj/runtime/rank_communicator.hpp"
#include "nj/runtime/resources.hpp"
#include "nj/train/checkpoint.hpp"
#include "nj/train/metrics_log.hpp"
#include "nj/train/trainer.hpp"

namespace nj::cli {
namespace {

struct TrainArguments {
  DataArguments data;
  ModelArguments model;
  TrainingOnlyArguments training;
  int threads = 0;
  std::string device = "auto";
  bool deterministic = false;
  ExecutorArguments executor;
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
  std::string dataset;  // the dataset file, however it was given; empty with --partitions
  // The model options of the checkpoint to continue from (rank 0 reads it and hands them to the others).
  std::optional<ModelConfig> checkpoint_model;
  ModelConfig config;
  ExecutorChoice choice;
  HostMemoryLimit memory_limit;           // what the rank may use
  HostFootprint loading;                  // its forecast peak while it loads its data
  std::vector<std::string> host_choices;  // what planning within the host memory changed (HostFittedRun::lighter)
  FailurePoint failure;
  Shard shard;
  RankDevice hardware;
  std::unique_ptr<Model> model;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<Executor> failing;  // wraps executor on the rank that --inject-failure names
  std::unique_ptr<Trainer> trainer;
  GraphIdentity graph;                          // the whole graph's, alike on every rank
  RunIdentity identity;                         // what a checkpoint of this run records
  std::optional<CheckpointFolder> checkpoints;  // --checkpoint-dir, on rank 0
  TrainingProgress resumed;                     // rank 0's, from a checkpoint; epoch 0 otherwise
  std::string resumed_from;                     // rank 0's: the checkpoint's path, if any
  MetricsLog log;                               // rank 0's
};

void log_resident_memory(const char* stage) {
  const ResidentMemory memory = resident_memory();
  spdlog::debug("host memory {}: {} resident, {} at most so far", stage, format_bytes(memory.current),
                format_bytes(memory.peak));
}

void require_file(const std::string& path, const char* what) {
  NJ_REQUIRE(std::filesystem::is_regular_file(path), "{} {}: no such file", what, path);
}

bool continues(const TrainingOnlyArguments& args) { return !args.load_checkpoint.empty() || args.resume; }

// --load-checkpoint FILE, or --resume from the newest checkpoint of --checkpoint-dir (starting afresh where it
// has none, so that a job that is requeued runs the same command as the first time).
void resume_on_leader(const TrainingOnlyArguments& args, RankTraining& rank) {
  Adam& optimizer = rank.trainer->optimizer();
  if (!args.checkpoint_dir.empty()) rank.checkpoints.emplace(args.checkpoint_dir);
  if (!args.load_checkpoint.empty()) {
    rank.resumed = load_checkpoint(args.load_checkpoint, rank.identity, optimizer,
                                   args.allow_other_graph ? OtherGraph::kAllowed : OtherGraph::kRefused);
    rank.resumed_from = args.load_checkpoint;
  } else if (args.resume) {
    auto resumed = rank.checkpoints->resume(rank.identity, optimizer);
    if (!resumed) {
      spdlog::info("resume: no checkpoint in {}: starting at epoch 1", args.checkpoint_dir);
      return;
    }
    rank.resumed = resumed->progress;
    rank.resumed_from = resumed->path;
  }
}

// Reads the configuration file and checks the arguments; rank 0 reads the model options of the checkpoint to
// continue from. What a rank does alone before the ranks meet.
void read_arguments(TrainArguments& args, CLI::App& command, Communicator& comm, RankTraining& rank) {
  if (!args.data.config_file.empty()) {
    require_file(args.data.config_file, "--config");
    apply_config_file(command, args.data.config_file);
  }
  rank.dataset = args.data.dataset();
  const std::string& partitions = args.data.partitions;
  NJ_USAGE(rank.dataset.empty() != partitions.empty(),
           "give either a dataset or --partitions (a folder written by nj partition), not {}",
           rank.dataset.empty() ? "neither" : "both");
  TrainingOnlyArguments& training = args.training;
  training.options.decay_scope = parse_weight_decay_scope(training.decay_scope);
  NJ_USAGE(training.options.epochs >= 1, "--epochs must be at least 1");
  NJ_USAGE(training.options.adam.lr > 0.0F, "--lr must be positive");
  if (!args.inject_failure.empty()) rank.failure = parse_failure_point(args.inject_failure);
  NJ_USAGE(!training.resume || !training.checkpoint_dir.empty(),
           "--resume needs --checkpoint-dir (where to resume from)");
  NJ_USAGE(training.checkpoint_every == 0 || !training.checkpoint_dir.empty(),
           "--checkpoint-every needs --checkpoint-dir (where to write)");
  NJ_USAGE(!training.keep_best || !training.checkpoint_dir.empty(),
           "--keep-best needs --checkpoint-dir (where to keep the best checkpoint)");
  NJ_USAGE(training.options.early_stop_patience == 0 || training.options.eval_every > 0,
           "--early-stop counts evaluations: it needs --eval-every above 0");
  NJ_USAGE(!training.resume || training.load_checkpoint.empty(),
           "give --resume (the newest checkpoint of --checkpoint-dir) or --load-checkpoint FILE, not both");
  if (!rank.dataset.empty()) require_dataset_file(rank.dataset, PartitionFolders::kByOption);
  NJ_REQUIRE(partitions.empty() || std::filesystem::is_directory(partitions), "--partitions {}: {}", partitions,
             std::filesystem::exists(partitions) ? "a file, not a folder written by nj partition (a dataset file is "
                                                   "given as the dataset)"
                                                 : "no such folder");
  if (comm.rank() != 0) return;
  if (!training.load_checkpoint.empty()) {
    require_file(training.load_checkpoint, "--load-checkpoint");
    rank.checkpoint_model = read_checkpoint_summary(training.load_checkpoint).model;
  } else if (training.resume) {
    const std::optional<CheckpointSummary> newest = CheckpointFolder(training.checkpoint_dir).newest_summary();
    if (newest) rank.checkpoint_model = newest->model;
  }
}

// Chooses the model, the executor and the device, and loads and orders this rank's shard.
void set_up_data(TrainArguments& args, Communicator& comm, RankTraining& rank) {
  if (rank.checkpoint_model && args.model.default_to(*rank.checkpoint_model)) {
    spdlog::info("model: the options not given are the checkpoint's: {}", describe_model(args.model.resolve()));
  }
  rank.config = args.model.resolve();
  rank.choice = parse_executor_choice(args.executor);
  rank.memory_limit = host_memory_limit(args.training.host_memory);
  NJ_USAGE(rank.choice.in_memory || rank.choice.options.mode == ExecutionMode::kReuse || comm.size() == 1,
           "--execution recompute runs on one rank only (its closures cross ranks); this job has {} ranks",
           comm.size());
  // Before the dataset loads: a missing GPU is a one-line error at once.
  rank.hardware.device = choose_device(parse_device_kind(args.device));

  // Before loading: data that cannot be loaded within the host memory is an error now, not the operating system's
  // kill later. The rest of the run is checked once it is planned (set_up_training).
  const PartitionMethod partition_method = parse_partition_method(args.training.partition_method);
  RankShape shape = rank_shape(rank.dataset, args.data.partitions, comm.rank(), comm.size(), partition_method);
  shape.renumbered = renumbers(rank.choice.vertex_order);
  rank.loading = loading_host_footprint(shape, resident_at_start());
  require_host_memory(rank.loading, rank.memory_limit.bytes, comm.size() > 1 ? "this rank" : "this run",
                      rank.memory_limit.source);
  rank.shard = load_rank_shard({.dataset = rank.dataset,
                                .partitions = args.data.partitions,
                                .partition_method = partition_method,
                                .normalize_rows = args.training.feature_norm == "row"},
                               rank.choice.vertex_order, comm);
  spdlog::info("host memory: loading peaked at {}, forecast {} ({})", format_bytes(resident_memory().peak),
               format_bytes(rank.loading.total()), rank.loading.describe());
}

// The model, its executor (planned), the trainer, a checkpoint to resume from and the metrics log.
void set_up_training(const TrainArguments& args, Communicator& comm, RankTraining& rank) {
  const Shard& shard = rank.shard;
  const TrainingOnlyArguments& training = args.training;
  Communicator& training_comm = rank.hardware.exchange_comm(comm);
  rank.model = std::make_unique<Model>(rank.config, shard.features.cols(), shard.num_classes);
  // The forecast nj plan prints, met before the executor allocates anything.
  const RankShape shape{.owned = shard.num_owned(),
                        .local = shard.local.num_local(),
                        .in_edges = shard.local.graph.num_edges(),
                        .features = shard.features.cols(),
                        .classes = shard.num_classes};
  const std::int64_t process = resident_at_start();  // MPI_Init's part in it, where there are ranks
  const HostBudget budget{.bytes = rank.memory_limit.bytes,
                          .source = rank.memory_limit.source,
                          .forecast = [&](const ExecutorChoice& choice, const PlannedRun& run) {
                            return host_forecast(*rank.model, shape, rank.loading, choice, run, process,
                                                 comm.size() > 1, args.threads);
                          }};
  HostFittedRun fitted =
      plan_rank_run(rank.choice, rank.hardware.resources, *rank.model, rank.shard, training_comm, args.threads, budget);
  const HostFootprint& host = fitted.host;
  require_host_memory(host, rank.memory_limit.bytes, comm.size() > 1 ? "this rank" : "this run",
                      rank.memory_limit.source);
  spdlog::info("host memory: forecast peak {} while {} ({}) of {} {}", format_bytes(host.total()), host.phase,
               host.describe(),
               rank.memory_limit.bytes < 0 ? "an unknown amount" : format_bytes(rank.memory_limit.bytes),
               rank.memory_limit.source);
  rank.choice = fitted.choice;
  rank.host_choices = std::move(fitted.lighter);
  PlannedRun planned = std::move(fitted.run);
  rank.executor = make_executor(std::move(planned), rank.hardware.resources, *rank.model, rank.shard, training_comm);
  log_resident_memory("executor set up");
  if (rank.failure.in_step(comm.rank())) rank.failing = make_failing_executor(*rank.executor, rank.failure);
  rank.trainer = std::make_unique<Trainer>(*rank.model, rank.failing ? *rank.failing : *rank.executor, training_comm,
                                           targets_of(shard), training.options);
  rank.identity = identify_run(rank.config, shard, rank.graph, training.feature_norm, training.options);
  // Rank 0 alone reads and writes checkpoints; the others get the state from it (broadcast_training_state).
  if (comm.rank() == 0) resume_on_leader(training, rank);
  const bool done = rank.resumed.next_epoch >= training.options.epochs;
  if (!training.metrics_out.empty() && comm.rank() == 0 && !done) {
    rank.log =
        MetricsLog(training.metrics_out, rank.resumed.next_epoch > 0 ? MetricsLog::kAppend : MetricsLog::kCreate);
  }
}

// Hands rank 0's reading of the checkpoint's model options to every rank.
void share_checkpoint_model(Communicator& comm, std::optional<ModelConfig>& model) {
  static_assert(std::is_trivially_copyable_v<std::optional<ModelConfig>>);
  comm.broadcast(std::as_writable_bytes(std::span(&model, 1)), 0);
}

// Where a run goes on from a checkpoint, rank 0 says from where, or that nothing is left to train (then the run
// ends, successfully: a requeued job whose work is done has nothing to do). Returns whether anything is left.
bool report_continuation(const TrainingOnlyArguments& training, const RankTraining& rank, bool leader) {
  const std::uint32_t done = rank.trainer->progress().next_epoch;
  const std::uint32_t epochs = training.options.epochs;
  if (done < epochs) {
    if (leader && !rank.resumed_from.empty()) {
      spdlog::info("resumed from {}: {} epochs done, continuing at epoch {}", rank.resumed_from, done, done + 1);
    }
    return true;
  }
  if (leader) {
    print_result(
        fmt::format("nothing to train: {} has {} epochs done, and --epochs asks for {} (give more to train "
                    "on)",
                    rank.resumed_from, done, epochs));
  }
  return false;
}

// Trains the epochs left, one line each, writing the checkpoints asked for. Where SIGINT or SIGTERM stops
// training at the end of an epoch, writes the checkpoints that let a rerun go on from there and throws Interrupted.
TrainSummary train_epochs(const TrainArguments& args, Communicator& comm, RankTraining& rank) {
  const bool leader = comm.rank() == 0;
  const TrainingOnlyArguments& training = args.training;
  const std::uint32_t epochs = training.options.epochs;
  Trainer& trainer = *rank.trainer;
  // The kill that --inject-failure ...:kill-in-checkpoint asks for, once the data is on disk and not yet named.
  const std::function<void()> on_checkpoint_written = [&rank] {
    if (rank.failure.how == FailurePoint::How::kKillInCheckpoint &&
        rank.failure.epoch + 1 == rank.trainer->progress().next_epoch) {
      std::raise(SIGKILL);
    }
  };
  // Rank 0 writes; every rank agrees on the outcome, so that a failed write ends every rank, reported once.
  const auto agreed_write = [&](const std::function<std::string()>& write) {
    agree_on_failure(comm, [&] {
      if (leader) spdlog::info("checkpoint written to {}", write());
    });
  };
  // Epochs done at the newest checkpoint of --checkpoint-dir: where --resume took it from, else none yet.
  std::uint32_t in_folder = training.resume ? trainer.progress().next_epoch : 0;
  const auto save_to_folder = [&] {
    agreed_write([&] {
      return rank.checkpoints->save(rank.identity, trainer.progress(), trainer.optimizer(), on_checkpoint_written);
    });
    in_folder = trainer.progress().next_epoch;
  };
  const auto save_to_file = [&] {
    agreed_write([&] {
      save_checkpoint(training.save_checkpoint, rank.identity, trainer.progress(), trainer.optimizer());
      return training.save_checkpoint;
    });
  };

  // A bar over the epochs on a terminal; elsewhere each epoch's line is the progress.
  ProgressDisplay progress("train", leader && isatty(STDERR_FILENO) != 0);
  progress.update("epochs", trainer.progress().next_epoch, epochs);
  const InterruptionWatch interruption(leader);
  int signal = 0;
  const TrainSummary summary = trainer.fit(
      [&](const EpochMetrics& m) {
        progress.clear();
        spdlog::info("epoch {:4d} | loss {:.4f} | train {} val {} test {} | {:.3f} s{}{}", m.epoch + 1, m.loss,
                     format_accuracy(m.accuracy.train), format_accuracy(m.accuracy.val),
                     format_accuracy(m.accuracy.test), m.train_seconds(),
                     rank.choice.in_memory ? std::string() : format_execution(m.execution),
                     comm.size() > 1 ? format_exchange(m) : std::string());
        rank.log.write(to_json(m));
        const std::uint32_t done = m.epoch + 1;
        if (training.keep_best && m.accuracy.valid() && trainer.progress().best_val_epoch == m.epoch) {
          agreed_write(
              [&] { return rank.checkpoints->save_best(rank.identity, trainer.progress(), trainer.optimizer()); });
        }
        if (!training.checkpoint_dir.empty() &&
            (done == epochs || (training.checkpoint_every > 0 && done % training.checkpoint_every == 0))) {
          save_to_folder();
        }
        progress.update("epochs", done, epochs);
      },
      [&] {
        // Asked only while epochs are left: a signal in the last one lets the run end as it would have.
        if (trainer.progress().next_epoch >= epochs) return false;
        signal = interruption.agreed_signal(comm);
        return signal != 0;
      });
  progress.clear();
  if (!training.save_checkpoint.empty()) save_to_file();
  // Stopped early: the folder's newest checkpoint is where training stopped.
  if (summary.stopped_early && !training.checkpoint_dir.empty() && in_folder != trainer.progress().next_epoch) {
    save_to_folder();
  }
  if (signal == 0) return summary;

  const std::uint32_t done = trainer.progress().next_epoch;
  std::string rerun = "nothing was saved (with --checkpoint-dir, a rerun with --resume would go on from here)";
  if (!training.save_checkpoint.empty()) rerun = "rerun with --load-checkpoint " + training.save_checkpoint;
  if (!training.checkpoint_dir.empty()) {
    if (in_folder != done) save_to_folder();
    rerun = "rerun with --resume";
  }
  throw Interrupted(fmt::format("interrupted at epoch {}; {}", done, rerun), signal, leader);
}

void run_train(TrainArguments& args, CLI::App& command, Communicator& comm) {
  const bool leader = comm.rank() == 0;
  // Only rank 0 reports; the others say only what goes wrong.
  if (!leader) spdlog::set_level(std::max(spdlog::get_level(), spdlog::level::warn));
  const std::int64_t baseline_rss = resident_memory().current;
  RankTraining rank;
  // A bad argument, a missing shard or a budget too small for one rank's graph ends every rank, reported once.
  agree_on_failure(comm, [&] { read_arguments(args, command, comm, rank); });
  share_checkpoint_model(comm, rank.checkpoint_model);
  agree_on_failure(comm, [&] { set_up_data(args, comm, rank); });
  if (leader) {
    warn_unused_options(command, rank.config, rank.choice,
                        {.ranks = comm.size(),
                         .partitions_given = !args.data.partitions.empty(),
                         .on_gpu = rank.hardware.device.kind == DeviceKind::kCuda});
  }
  if (comm.size() > 1) agree_on_failure(comm, [&] { check_same_partition(comm, rank.shard); });
  // Before the executor drops the shard's in-edges.
  rank.graph = identify_graph(rank.shard, comm);
  set_up_rank_device(rank.hardware, rank.choice, args.threads, args.deterministic, comm);
  agree_on_failure(comm, [&] { set_up_training(args, comm, rank); });
  if (continues(args.training)) {
    broadcast_training_state(comm, 0, rank.resumed, rank.trainer->optimizer());
    rank.trainer->restore(rank.resumed);
    if (!report_continuation(args.training, rank, leader)) return;
  }
  const ModelConfig& config = rank.config;
  const ExecutorChoice& choice = rank.choice;
  const Shard& shard = rank.shard;
  Model& model = *rank.model;
  const std::string_view backend = rank.hardware.resources.backend->name();
  spdlog::info("model {}: {} layers, hidden {}, {} parameters, backend {}{}", to_string(config.kind), config.layers,
               config.hidden, model.num_parameters(), backend,
               backend == "cpu" ? fmt::format(" (OpenBLAS {} kernels)", openblas_core()) : "");

  const TrainSummary summary = train_epochs(args, comm, rank);
  log_resident_memory("trained");
  spdlog::info("{}peak resident memory {}", comm.size() > 1 ? fmt::format("rank {}: ", comm.rank()) : "",
               format_bytes(resident_memory().peak));
  // Host memory each rank took for its data and training, above what it held before loading.
  const OverRanks host_bytes = over_ranks(comm, {static_cast<double>(resident_memory().peak - baseline_rss)}).front();
  auto record = to_json(summary);
  record["dataset"] = {{"name", shard.name},
                       {"vertices", shard.global_vertices},
                       {"edges", shard.global_edges},
                       {"features", shard.features.cols()},
                       {"classes", shard.num_classes}};
  record["model"] = {{"kind", to_string(config.kind)},
                     {"description", describe_model(config)},
                     {"layers", config.layers},
                     {"hidden", config.hidden},
                     {"parameters", model.num_parameters()}};
  record["execution"] = choice.in_memory ? "in-memory" : to_string(choice.options.mode);
  record["device"] = {{"kind", rank.hardware.resources.device->name()},
                      {"budget_bytes", rank.hardware.resources.device->budget_bytes()},
                      {"planned_budget_bytes", choice.in_memory ? kUnlimited : choice.options.device_budget},
                      {"exchange_from", rank.hardware.device_comm ? "device memory" : "host memory"}};
  record["partition"] = partition_json(shard, comm.size());
  record["host_peak_above_baseline_bytes"] = to_json(host_bytes);
  record["host_memory_choices"] = rank.host_choices;
  if (args.training.keep_best && summary.best_val_accuracy.valid()) {
    record["kept"] = {{"epoch", summary.best_val_epoch + 1},
                      {"checkpoint", CheckpointFolder(args.training.checkpoint_dir).best_file()}};
  }
  rank.log.write(record);
  if (leader) {
    std::string stopped;
    if (summary.stopped_early) {
      stopped = fmt::format(" | stopped early after epoch {}: no better val in {} evaluations", summary.epochs_done,
                            args.training.options.early_stop_patience);
    }
    print_result(
        fmt::format("done: final test {} | best val {} at epoch {} (test {}){}{} | median epoch {:.4f} s",
                    format_accuracy(summary.final_accuracy.test), format_accuracy(summary.best_val_accuracy.val),
                    summary.best_val_epoch + 1, format_accuracy(summary.best_val_accuracy.test),
                    args.training.keep_best ? ", kept as best.h5" : "", stopped, summary.median_epoch_seconds));
  }
}

}  // namespace

void add_train_command(CLI::App& app, Communicator& comm) {
  auto args = std::make_shared<TrainArguments>();
  CLI::App* cmd =
      app.add_subcommand("train",
                         "Full-graph training of a GNN (GCN, GAT, GraphSAGE, GIN, APPNP) on a dataset file, "
                         "or on partition shards with one rank per shard (mpirun, srun)");
  // Paths are checked when each rank sets up, not while parsing: ranks on different nodes may see different
  // file systems, and a check that fails on some ranks only must still end every rank (agree_on_failure).
  add_data_options(*cmd, args->data, "Dataset file (HDF5, see docs/dataset-format.md)");
  cmd->add_option("--inject-failure", args->inject_failure, "Raise an error on rank R in epoch E (tests)")->group("");
  add_model_options(*cmd, args->model);
  add_training_only_options(*cmd, args->training, "Options");
  cmd->add_option("--threads", args->threads, "Threads (0: OpenMP's default)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--device", args->device,
                  "Where to compute: cuda (the GPU of this rank's local rank), cpu (the device emulated in host "
                  "memory), or auto (cuda where a GPU is present)")
      ->check(one_of({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  cmd->add_flag("--deterministic", args->deterministic,
                "CUDA: aggregate with the shared row kernels instead of cuSPARSE, so that runs repeat bit for bit "
                "(the CPU backend always does)");
  add_executor_options(*cmd, args->executor);
  cmd->callback([args, cmd, &comm] { run_train(*args, *cmd, comm); });
}

}  // namespace nj::cli
