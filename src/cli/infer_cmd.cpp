// nj infer: the weights of a training checkpoint over a whole dataset, in one forward pass without dropout, under a
// device budget and on any number of ranks; every vertex's logits, class probabilities, predicted class and the
// chosen layers' outputs go to one HDF5 file, in the dataset's own vertex ids.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>

#include "cli/commands.hpp"
#include "cli/logging.hpp"
#include "nj/comm/gather.hpp"
#include "nj/core/bytes.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/io/inference_file.hpp"
#include "nj/train/checkpoint.hpp"

namespace nj::cli {
namespace {

struct InferArguments {
  std::string checkpoint;
  DataArguments data;
  std::string output;
  std::vector<std::string> embeddings;
  ExecutorArguments executor;
  // nj train's own options, so that its command lines and configuration files infer: the model comes from the
  // checkpoint and training's options do nothing here, but --partition-method (several ranks over a dataset file)
  // and --allow-other-graph.
  ModelArguments ignored_model;
  TrainingOnlyArguments training;
  int threads = 0;
  std::string device = "auto";
  bool deterministic = false;
};

// What rank 0 reads of the checkpoint and hands to every rank.
struct CheckpointModel {
  ModelConfig config{};
  bool row_normalised = false;
  std::uint32_t epochs = 0;
};

// The checkpoint's summary, where it is one that nj infer can use.
CheckpointSummary read_inferable_checkpoint(const std::string& path) {
  NJ_REQUIRE(std::filesystem::is_regular_file(path), "checkpoint {}: no such file", path);
  NJ_REQUIRE(is_checkpoint_file(path), "{}: not a checkpoint written by nj train", path);
  CheckpointSummary summary = read_checkpoint_summary(path);
  NJ_REQUIRE(summary.model.has_value(),
             "{}: records no model options (a format 1 checkpoint not written by nj train); train again to infer",
             path);
  return summary;
}

// The model layers (Model::num_model_layers) whose outputs are written, counted from 0: "all", or numbers from 1.
std::vector<std::size_t> embedding_layers(const std::vector<std::string>& asked, std::size_t layers) {
  std::vector<std::size_t> chosen;
  for (const std::string& item : asked) {
    if (item == "all") {
      chosen.clear();
      for (std::size_t l = 0; l < layers; ++l) chosen.push_back(l);
      return chosen;
    }
    std::size_t parsed = 0;
    std::size_t layer = 0;
    try {
      layer = std::stoul(item, &parsed);
    } catch (const std::exception&) {
      parsed = 0;
    }
    NJ_USAGE(parsed == item.size() && layer >= 1 && layer <= layers,
             "--embeddings {}: give layer numbers from 1 to {} (this model's layers), or all", item, layers);
    chosen.push_back(layer - 1);
  }
  std::ranges::sort(chosen);
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  return chosen;
}

// The first `width` columns of every row.
Matrix leading_columns(ConstRows rows, std::int64_t width) {
  Matrix out(rows.rows, width);
  for (std::int64_t r = 0; r < rows.rows; ++r) std::copy(rows.row(r), rows.row(r) + width, out.view().row(r));
  return out;
}

void run_infer(InferArguments& args, CLI::App& command, Communicator& comm) {
  const bool leader = comm.rank() == 0;
  if (!leader) spdlog::set_level(std::max(spdlog::get_level(), spdlog::level::warn));
  std::string dataset;
  ExecutorChoice choice;
  CheckpointModel checkpoint;
  std::optional<GraphIdentity> trained_on;  // rank 0's
  agree_on_failure(comm, [&] {
    if (!args.data.config_file.empty()) {
      NJ_REQUIRE(std::filesystem::is_regular_file(args.data.config_file), "--config {}: no such file",
                 args.data.config_file);
      apply_config_file(command, args.data.config_file);
    }
    dataset = args.data.dataset();
    NJ_USAGE(dataset.empty() != args.data.partitions.empty(),
             "give either a dataset or --partitions (a folder written by nj partition), not {}",
             dataset.empty() ? "neither" : "both");
    if (!dataset.empty()) require_dataset_file(dataset, PartitionFolders::kByOption);
    choice = parse_executor_choice(args.executor);
    NJ_USAGE(choice.in_memory || choice.options.mode == ExecutionMode::kReuse,
             "nj infer runs in memory or with --execution reuse (the recompute baseline keeps no layer's outputs)");
    choice.options.forward_only = true;
    if (!leader) return;
    const CheckpointSummary summary = read_inferable_checkpoint(args.checkpoint);
    checkpoint = {*summary.model, feature_norm_of(summary.run) == "row", summary.progress.next_epoch};
    trained_on = summary.run.graph;
  });
  static_assert(std::is_trivially_copyable_v<CheckpointModel>);
  comm.broadcast(std::as_writable_bytes(std::span(&checkpoint, 1)), 0);

  RankDevice hardware;
  Shard shard;
  std::unique_ptr<Model> model;
  std::vector<std::size_t> layers;
  agree_on_failure(comm, [&] {
    // Before loading: the layer count does not depend on the data's widths.
    layers = embedding_layers(args.embeddings, Model(checkpoint.config, 1, 1).num_model_layers());
    hardware.device = choose_device(parse_device_kind(args.device));
    shard = load_rank_shard({.dataset = dataset,
                             .partitions = args.data.partitions,
                             .partition_method = parse_partition_method(args.training.partition_method),
                             .normalize_rows = checkpoint.row_normalised},
                            choice.vertex_order, comm);
    model = std::make_unique<Model>(checkpoint.config, shard.features.cols(), shard.num_classes);
  });
  if (comm.size() > 1) agree_on_failure(comm, [&] { check_same_partition(comm, shard); });
  const GraphIdentity graph = identify_graph(shard, comm);
  agree_on_failure(comm, [&] {
    if (!leader) return;
    // The graph before the weights' shapes: another graph is the cause where they do not fit either.
    check_graph(args.checkpoint, trained_on, graph,
                args.training.allow_other_graph ? OtherGraph::kAllowed : OtherGraph::kRefused);
    load_weights(args.checkpoint, *model);
  });
  broadcast_weights(comm, 0, *model);
  set_up_rank_device(hardware, choice, args.threads, args.deterministic, comm);
  std::unique_ptr<Executor> executor;
  agree_on_failure(
      comm, [&] { executor = make_executor(choice, hardware.resources, *model, shard, hardware.exchange_comm(comm)); });
  spdlog::info("model {} from {} ({} epochs trained)", describe_model(checkpoint.config), args.checkpoint,
               checkpoint.epochs);

  const auto start = std::chrono::steady_clock::now();
  const ConstRows logits = executor->evaluate(*model);
  const Accuracy accuracy = accuracy_of(logits, targets_of(shard), comm);
  const double seconds = seconds_since(start);
  const ExecutionMetrics metrics = executor->take_metrics();
  spdlog::info("forward pass in {:.3f} s{}", seconds, choice.in_memory ? std::string() : format_execution(metrics));

  // Owned rows are in local ids; the file has them in order of global id (for a dataset file, its vertex ids).
  const std::span<const gid_t> ids(shard.local.global_id.data(), static_cast<std::size_t>(shard.num_owned()));
  InferenceOutput output;
  GatheredRows logits_of_all = gather_rows(comm, ids, logits, shard.global_vertices);
  output.vertex_ids = std::move(logits_of_all.ids);
  output.logits = std::move(logits_of_all.rows);
  for (const std::size_t m : layers) {
    const std::size_t l = model->output_of_model_layer(m);
    const Matrix own = leading_columns(executor->layer_outputs(l), model->layer(l).embedding_width());
    output.embeddings.push_back(
        {model->model_layer_name(m), gather_rows(comm, ids, own.view(), shard.global_vertices).rows});
  }
  agree_on_failure(comm, [&] {
    if (!leader) return;
    output.checkpoint = args.checkpoint;
    output.dataset = shard.name;
    output.model = describe_model(checkpoint.config);
    output.epochs = checkpoint.epochs;
    output.train_accuracy = accuracy.train;
    output.val_accuracy = accuracy.val;
    output.test_accuracy = accuracy.test;
    write_inference(args.output, output);
  });
  if (leader) {
    const auto shown = [](double value) { return std::isnan(value) ? std::string("-") : fmt::format("{:.4f}", value); };
    print_result(fmt::format("done: {} vertices to {} | train {} val {} test {}", shard.global_vertices, args.output,
                             shown(accuracy.train), shown(accuracy.val), shown(accuracy.test)));
  }
}

}  // namespace

void add_infer_command(CLI::App& app, Communicator& comm) {
  auto args = std::make_shared<InferArguments>();
  CLI::App* cmd = app.add_subcommand(
      "infer",
      "Predictions and embeddings of a trained model for every vertex: one forward pass of a checkpoint's weights "
      "over a dataset file or partition shards, within a device budget and on any number of ranks");
  cmd->add_option("checkpoint", args->checkpoint, "A checkpoint written by nj train")->type_name(kPathType)->required();
  add_data_options(*cmd, args->data, "Dataset file (HDF5) with the training data's features and classes");
  cmd->add_option("--output,-o", args->output, "Where to write the predictions (HDF5; docs/dataset-format.md)")
      ->type_name(kPathType)
      ->required();
  cmd->add_option("--embeddings", args->embeddings,
                  "Also write these layers' outputs, or all: layers of the model numbered from 1 (a GIN layer with "
                  "its MLP; APPNP's MLP layers, then its propagation)")
      ->expected(1, -1);
  add_executor_options(*cmd, args->executor);
  // nj train's options, accepted so that its command lines and --config files infer: in a group of their own.
  constexpr const char* kTrainingGroup =
      "Training (accepted from nj train's command lines and configuration files; the model comes from the checkpoint "
      "and only --partition-method and --allow-other-graph act here)";
  const std::size_t before = cmd->get_options().size();
  add_model_options(*cmd, args->ignored_model);
  for (std::size_t i = before; i < cmd->get_options().size(); ++i) cmd->get_options()[i]->group(kTrainingGroup);
  add_training_only_options(*cmd, args->training, kTrainingGroup);
  cmd->add_option("--threads", args->threads, "Threads (0: OpenMP's default)")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--device", args->device,
                  "Where to compute: cuda (the GPU of this rank's local rank), cpu, or auto (cuda where a GPU is "
                  "present)")
      ->check(one_of({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  cmd->add_flag("--deterministic", args->deterministic,
                "CUDA: aggregate with the shared row kernels instead of cuSPARSE, so that runs repeat bit for bit");
  cmd->callback([args, cmd, &comm] { run_infer(*args, *cmd, comm); });
}

}  // namespace nj::cli
