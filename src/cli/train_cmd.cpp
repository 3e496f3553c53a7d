// nj train: loads a dataset, builds the model and trains it full-batch, one line per epoch.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/commands.hpp"
#include "nj/comm/communicator.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/io/dataset_file.hpp"
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
  ExecutorArguments executor;
  std::string metrics_out;
  std::string save_checkpoint;
  std::string load_checkpoint;
};

// Shows elapsed time on stderr while an epoch runs longer than a couple of seconds, when stderr is a terminal.
class EpochProgress {
 public:
  EpochProgress() : enabled_(isatty(STDERR_FILENO) != 0) {
    if (enabled_) worker_ = std::thread([this] { run(); });
  }
  EpochProgress(const EpochProgress&) = delete;
  EpochProgress& operator=(const EpochProgress&) = delete;
  ~EpochProgress() {
    if (!enabled_) return;
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }
  void start(std::uint32_t epoch, std::uint32_t total) {
    const std::lock_guard lock(mutex_);
    epoch_ = epoch;
    total_ = total;
    started_ = std::chrono::steady_clock::now();
    running_ = true;
  }
  void finish() {
    const std::lock_guard lock(mutex_);
    running_ = false;
    if (shown_) std::fputs("\r\033[K", stderr);
    shown_ = false;
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(500));
      if (!running_) continue;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
      if (elapsed < 2.0) continue;
      std::fprintf(stderr, "\r\033[Kepoch %u/%u running, %.1f s", epoch_ + 1, total_, elapsed);
      std::fflush(stderr);
      shown_ = true;
    }
  }

  bool enabled_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool running_ = false;
  bool shown_ = false;
  std::uint32_t epoch_ = 0;
  std::uint32_t total_ = 0;
  std::chrono::steady_clock::time_point started_;
};

std::string format_accuracy(double value) { return std::isnan(value) ? "  -   " : fmt::format("{:.4f}", value); }

void run_train(TrainArguments& args) {
  NJ_REQUIRE(!args.dataset.empty(), "no dataset given (a positional argument, --dataset, or 'dataset' in --config)");
  const ModelConfig config = args.model.resolve();
  const ExecutorChoice choice = parse_executor_choice(args.executor);
  args.options.decay_scope = parse_weight_decay_scope(args.decay_scope);
  NJ_REQUIRE(args.options.epochs >= 1, "--epochs must be at least 1");
  NJ_REQUIRE(args.options.adam.lr > 0.0F, "--lr must be positive");

  auto load_start = std::chrono::steady_clock::now();
  Dataset dataset = read_dataset(args.dataset);
  if (args.feature_norm == "row") row_normalize(dataset.features);
  spdlog::info("dataset {}: {} vertices, {} edges, {} features, {} classes, split {}/{}/{} (loaded in {:.2f} s)",
               dataset.name.empty() ? args.dataset : dataset.name, dataset.num_vertices(), dataset.graph.num_edges(),
               dataset.features.cols(), dataset.num_classes, count(dataset.train_mask), count(dataset.val_mask),
               count(dataset.test_mask),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());

  auto backend = make_cpu_backend(args.threads);
  auto comm = make_single_process_communicator();
  Model model(config, dataset.features.cols(), dataset.num_classes);
  std::unique_ptr<Device> device;
  std::unique_ptr<Executor> executor;
  if (choice.in_memory) {
    executor = std::make_unique<InMemoryExecutor>(*backend, model, dataset.graph, dataset.features.view());
  } else {
    device = make_cpu_device(choice.options.device_budget);
    auto subgraph_executor = std::make_unique<SubgraphExecutor>(*backend, *device, model, dataset.graph,
                                                                dataset.features.view(), choice.options);
    log_plan(subgraph_executor->plan());
    executor = std::move(subgraph_executor);
  }
  Trainer trainer(model, *executor, *backend, *comm, dataset, args.options);
  spdlog::info("model {}: {} layers, hidden {}, {} parameters, backend {}", to_string(config.kind), config.layers,
               config.hidden, model.num_parameters(), backend->name());

  std::uint32_t first_epoch = 0;
  if (!args.load_checkpoint.empty()) {
    first_epoch = load_checkpoint(args.load_checkpoint, model, trainer.optimizer());
    spdlog::info("resumed from {} at epoch {}", args.load_checkpoint, first_epoch);
  }

  MetricsLog log = args.metrics_out.empty() ? MetricsLog() : MetricsLog(args.metrics_out);
  EpochProgress progress;
  progress.start(first_epoch, args.options.epochs);
  const TrainSummary summary = trainer.fit(first_epoch, [&](const EpochMetrics& m) {
    progress.finish();
    spdlog::info("epoch {:4d} | loss {:.4f} | train {} val {} test {} | {:.3f} s{}", m.epoch + 1, m.loss,
                 format_accuracy(m.accuracy.train), format_accuracy(m.accuracy.val), format_accuracy(m.accuracy.test),
                 m.train_seconds(), choice.in_memory ? std::string() : format_execution(m.execution));
    log.write(to_json(m));
    progress.start(m.epoch + 1, args.options.epochs);
  });
  progress.finish();

  if (!args.save_checkpoint.empty()) {
    save_checkpoint(args.save_checkpoint, model, trainer.optimizer(), args.options.epochs);
    spdlog::info("checkpoint written to {}", args.save_checkpoint);
  }
  auto record = to_json(summary);
  record["dataset"] = {{"name", dataset.name},
                       {"vertices", dataset.num_vertices()},
                       {"edges", dataset.graph.num_edges()},
                       {"features", dataset.features.cols()},
                       {"classes", dataset.num_classes}};
  record["model"] = {{"kind", to_string(config.kind)},
                     {"layers", config.layers},
                     {"hidden", config.hidden},
                     {"parameters", model.num_parameters()}};
  log.write(record);
  spdlog::info("done: final test {} | best val {} at epoch {} (test {}) | median epoch {:.4f} s",
               format_accuracy(summary.final_accuracy.test), format_accuracy(summary.best_val_accuracy.val),
               summary.best_val_epoch + 1, format_accuracy(summary.best_val_accuracy.test),
               summary.median_epoch_seconds);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArguments>();
  CLI::App* cmd = app.add_subcommand("train", "Full-graph training of a GCN or GAT on a dataset file");
  cmd->add_option("--config", args->config_file,
                  "Read options from a TOML file (keys are the long option names; flags given here win)")
      ->check(CLI::ExistingFile);
  cmd->add_option("dataset,--dataset", args->dataset, "Dataset file (HDF5, see docs/dataset-format.md)")
      ->check(CLI::ExistingFile);
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
  cmd->add_option("--eval-every", args->options.eval_every, "Evaluate every k epochs (0: only after the last)")
      ->capture_default_str();
  add_executor_options(*cmd, args->executor, true);
  cmd->add_option("--metrics-out", args->metrics_out, "Write one JSON object per epoch and a summary to this file");
  cmd->add_option("--save-checkpoint", args->save_checkpoint, "Write weights and optimizer state here at the end");
  cmd->add_option("--load-checkpoint", args->load_checkpoint, "Resume from this checkpoint")->check(CLI::ExistingFile);
  cmd->callback([args, cmd] {
    if (!args->config_file.empty()) apply_config_file(*cmd, args->config_file);
    run_train(*args);
  });
}

}  // namespace nj::cli
