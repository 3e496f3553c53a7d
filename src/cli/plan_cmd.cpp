// nj plan: plans an epoch of the subgraph executor without training, and compares the cache policies; on a
// partition folder, plans every rank's shard and reports what each rank moves per epoch.
#include <fmt/ranges.h>
#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "nj/core/host_memory.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/exec/exchange_side.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/feature_storage.hpp"
#include "nj/io/path_kind.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/runtime/resources.hpp"

namespace nj::cli {
namespace {

// Training's own options are accepted and ignored, so that nj train's command lines and configuration files plan.
constexpr const char* kIgnoredGroup = "Training (accepted for nj train's command lines, and ignored)";

struct PlanArguments {
  DataArguments data;
  ModelArguments model;
  ExecutorArguments executor;
  TrainingOnlyArguments ignored;
  bool inference = false;
  bool all_policies = false;
  bool list_subgraphs = false;
  bool json = false;
  std::string device = "cpu";
  bool deterministic = false;
  int threads = 0;
};

// The executor options as nj train would run them on --device: a GPU's backend takes its libraries' memory.
ExecutorChoice planned_choice(const PlanArguments& args) {
  ExecutorChoice choice = parse_executor_choice(args.executor);
  NJ_REQUIRE(!args.inference || choice.options.mode == ExecutionMode::kReuse,
             "--inference plans nj infer, which runs reuse (the recompute baseline keeps no layer's outputs)");
  choice.options.forward_only = args.inference;
  const DeviceKind device =
      args.device == "auto" ? choose_device(DeviceKind::kAuto).kind : parse_device_kind(args.device);
  if (device == DeviceKind::kCuda) {
    choice.options.library = cuda_library_memory(args.deterministic);
    choice.options.device_is_gpu = true;
  }
  return choice;
}

// Bytes a rank sends to its peers per epoch and layer: forward, its boundary rows of what the layer aggregates;
// backward, its mirrors' gradients of them, except for a first layer that sums its inputs and in an inference
// plan (what ExchangeStats counts as sent).
struct LayerExchange {
  ExchangeSide side = ExchangeSide::kTransformedRows;
  std::int64_t row_width = 0;  // floats
  std::int64_t forward_bytes = 0;
  std::int64_t backward_bytes = 0;
};
std::vector<LayerExchange> exchange_bytes_sent(const Model& model, const LocalGraph& local, const EpochPlan& plan) {
  std::int64_t forward_rows = 0;
  std::int64_t backward_rows = 0;
  for (const PeerRows& p : local.peers) {
    forward_rows += static_cast<std::int64_t>(p.send.size());
    backward_rows += static_cast<std::int64_t>(p.receive.size());
  }
  const bool sums_inputs = plan.first_layer_sums_inputs();
  std::vector<LayerExchange> layers;
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const std::int64_t width = exchanged_width(model, l, sums_inputs);
    const std::int64_t gradient_width = plan.options.forward_only ? 0 : exchanged_gradient_width(model, l, sums_inputs);
    constexpr auto kFloat = static_cast<std::int64_t>(sizeof(float));
    layers.push_back({exchange_side(model, l, sums_inputs), width, forward_rows * width * kFloat,
                      backward_rows * gradient_width * kFloat});
  }
  return layers;
}

// Plans the epoch, forecasts its device memory, and measures what the plan's structures hold in host memory.
struct MeasuredPlan {
  EpochPlan plan;
  std::int64_t plan_host_bytes = 0;
};
// Of `features`, only the shape is read (the forecast's replay moves no data), unless the first layer takes them as
// sparse rows (`inputs`, on or off): then their entries size its steps, as they do in nj train.
// `train_mask`: the vertices whose logits the training loss reads, as nj train's executor is told.
MeasuredPlan plan_and_measure(Model& model, const LocalGraph& local, ConstRows features, const ExecutorChoice& choice,
                              SparseInputs inputs, std::span<const std::uint8_t> train_mask) {
  const std::optional<SparseRows> sparse = sparse_inputs(inputs, features);
  SubgraphExecutorOptions options = choice.options;
  options.inputs = input_shape(sparse);
  options.loss_reads = train_mask;
  const std::int64_t before = heap_bytes_in_use();
  MeasuredPlan measured{plan_epoch(model, local, options), 0};
  measured.plan_host_bytes = std::max<std::int64_t>(0, heap_bytes_in_use() - before);
  const auto forecast_start = std::chrono::steady_clock::now();
  settle_device_memory(model, local, features, measured.plan, sparse ? &*sparse : nullptr);
  spdlog::debug("plan: device memory forecast in {:.2f} s", seconds_since(forecast_start));
  return measured;
}

// The host memory of one rank running this plan on the CPU device (where the device is emulated in host memory).
HostFootprint rank_footprint(const PlanArguments& args, const LocalGraph& local, std::int64_t features,
                             std::int64_t classes, const MeasuredPlan& measured) {
  const RankShape shape{.owned = local.num_owned,
                        .local = local.num_local(),
                        .in_edges = local.graph.num_edges(),
                        .features = features,
                        .classes = classes};
  const ModelConfig config = args.model.resolve();
  RunLayout layout = run_layout(ExecutorChoice{.options = measured.plan.options}, true);
  layout.threads = args.threads;
  const int threads = layout.threads > 0 ? layout.threads : omp_get_max_threads();
  return planned_host_footprint(config, shape, layout, measured.plan.memory.peak_footprint_bytes,
                                measured.plan_host_bytes,
                                executor_host_bytes(measured.plan, static_cast<std::size_t>(config.layers), threads));
}

// Whether nj train's ranks would take the shards' features as sparse rows (takes_sparse_inputs over all of them),
// from what the shard files record of their features: nj partition stores only non-zero entries.
SparseInputs shards_sparse_inputs(const PartitionManifest& manifest, SparseInputs choice) {
  if (choice != SparseInputs::kAuto) return choice;
  std::int64_t nonzeros = 0;
  std::int64_t entries = 0;
  for (const std::string& shard : manifest.shard_files) {
    const StoredFeatures stored =
        stored_features(hdf5::File::open_read((std::filesystem::path(manifest.directory) / shard).string()));
    if (!stored.sparse) return SparseInputs::kOff;
    nonzeros += stored.nonzeros;
    entries += stored.rows * stored.width;
  }
  return nonzeros * kSparseInputsDensity <= entries ? SparseInputs::kOn : SparseInputs::kOff;
}

// Every rank of a partition folder, planned as `nj train --partitions` would run it with the same options.
void run_partition_plan(const PlanArguments& args, const std::string& folder) {
  const PartitionManifest manifest = read_manifest(folder);
  const ExecutorChoice choice = planned_choice(args);
  const SparseInputs inputs = shards_sparse_inputs(manifest, choice.sparse_inputs);
  nlohmann::json ranks = nlohmann::json::array();
  if (!args.json) {
    std::cout << fmt::format("{} ({} parts by {}), {} at {} per rank; bytes per epoch:\n", manifest.dataset_name,
                             manifest.partition.parts, manifest.partition.method, to_string(choice.options.mode),
                             format_bytes(choice.options.device_budget));
    std::cout << fmt::format("{:>4} {:>10} {:>10} {:>12} {:>12} {:>14} {:>12} {:>12}\n", "rank", "owned", "mirrors",
                             "h2d", "d2h", "exchange sent", "device peak", "host peak");
  }
  std::vector<LayerExchange> layers;  // every rank's layers send the same side
  for (std::size_t part = 0; part < manifest.shard_files.size(); ++part) {
    Shard shard = read_shard((std::filesystem::path(manifest.directory) / manifest.shard_files[part]).string());
    order_vertices(shard, choice.vertex_order);
    Model model(args.model.resolve(), shard.features.cols(), shard.num_classes);
    const MeasuredPlan measured =
        plan_and_measure(model, shard.local, shard.features.view(), choice, inputs, shard.train_mask);
    const EpochPlan& plan = measured.plan;
    const HostFootprint host = rank_footprint(args, shard.local, shard.features.cols(), shard.num_classes, measured);
    layers = exchange_bytes_sent(model, shard.local, plan);
    std::int64_t exchange = 0;
    nlohmann::json per_layer = nlohmann::json::array();
    for (std::size_t l = 0; l < layers.size(); ++l) {
      exchange += layers[l].forward_bytes + layers[l].backward_bytes;
      per_layer.push_back({{"layer", l + 1},
                           {"sends", to_string(layers[l].side)},
                           {"row_width", layers[l].row_width},
                           {"forward_bytes", layers[l].forward_bytes},
                           {"backward_bytes", layers[l].backward_bytes}});
    }
    vid_t reading_mirrors = 0;
    for (vid_t v = 0; v < shard.local.num_owned; ++v) reading_mirrors += shard.local.reads_mirror(v) ? 1 : 0;
    ranks.push_back({{"rank", part},
                     {"owned", shard.local.num_owned},
                     {"mirrors", shard.local.num_mirrors()},
                     {"in_edges", shard.local.graph.num_edges()},
                     {"h2d_bytes", plan.h2d_bytes},
                     {"d2h_bytes", plan.d2h_bytes},
                     {"owned_reading_mirrors", reading_mirrors},
                     {"exchange_bytes_sent", exchange},
                     {"exchange", per_layer},
                     {"device_peak_bytes", plan.memory.peak_footprint_bytes},
                     {"host_peak_bytes", host.total()},
                     {"steps", plan.num_steps}});
    if (!args.json) {
      std::cout << fmt::format("{:>4} {:>10} {:>10} {:>12} {:>12} {:>14} {:>12} {:>12}\n", part, shard.local.num_owned,
                               shard.local.num_mirrors(), format_bytes(plan.h2d_bytes), format_bytes(plan.d2h_bytes),
                               format_bytes(exchange), format_bytes(plan.memory.peak_footprint_bytes),
                               format_bytes(host.total()));
    }
  }
  if (!args.json) {
    std::vector<std::string> sides;
    for (std::size_t l = 0; l < layers.size(); ++l) {
      sides.push_back(
          fmt::format("layer {} its {} ({} floats a row)", l + 1, to_string(layers[l].side), layers[l].row_width));
    }
    std::cout << fmt::format("exchange sends: {}\n", fmt::join(sides, ", "));
  }
  if (args.json) {
    std::cout << nlohmann::json{{"dataset", manifest.dataset_name},
                                {"parts", manifest.partition.parts},
                                {"execution", to_string(choice.options.mode)},
                                {"device_budget_bytes", choice.options.device_budget},
                                {"ranks", ranks}}
                     .dump()
              << "\n";
  }
}

// Applies --config, and settles what to plan: a partition folder (given with --partitions or as the dataset) or a
// dataset file.
void read_arguments(PlanArguments& args, CLI::App& command) {
  if (!args.data.config_file.empty()) {
    NJ_REQUIRE(std::filesystem::is_regular_file(args.data.config_file), "--config {}: no such file",
               args.data.config_file);
    apply_config_file(command, args.data.config_file);
  }
  std::vector<std::string> ignored;
  for (const CLI::Option* option : command.get_options()) {
    if (option->get_group() == kIgnoredGroup && option->count() > 0) ignored.push_back(option->get_name());
  }
  if (!ignored.empty()) spdlog::debug("plan: ignoring what only training uses: {}", fmt::join(ignored, " "));
  NJ_REQUIRE(args.executor.execution != "in-memory",
             "--execution in-memory: nj plan forecasts the subgraph executor (reuse or recompute), and in-memory "
             "training has no plan (its device holds the whole graph)");
  if (args.executor.execution == "auto") args.executor.execution = "reuse";
  const std::string dataset = args.data.dataset();
  NJ_REQUIRE(dataset.empty() != args.data.partitions.empty(),
             "give either a dataset or --partitions (a folder written by nj partition), not {}",
             dataset.empty() ? "neither" : "both");
  if (dataset.empty()) return;
  if (path_kind(dataset) == PathKind::kPartitionFolder || dataset.ends_with(kManifestFileName)) {
    args.data.partitions = dataset;
    return;
  }
  require_dataset_file(dataset, PartitionFolders::kNotRead);
}

// What each layer declares, and the tensors the cache plans for it: Z, the rows its aggregation reads (one row per
// vertex), and their gradient.
void print_layers(const Model& model, const EpochPlan& plan) {
  std::cout << fmt::format("layers: {}\n", describe_model(model.config()));
  std::cout << fmt::format("  {:<6} {:>7} {:>8} {:>8} {:<5} {:<34} {:>7}  {}\n", "layer", "input", "Z width", "output",
                           "grad", "aggregation", "dropout", "activation");
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    const AggregationTraits traits = layer.aggregation();
    const bool sums_inputs = l == 0 && plan.first_layer_sums_inputs();
    std::string aggregation = "its own row only";
    if (traits.reads_neighbours) {
      aggregation = traits.spmm ? "in-edges, linear (SpMM)" : (traits.linear ? "in-edges, linear" : "in-edges");
      if (traits.structural_coefficients) aggregation += ", weighted";
      if (traits.backward_reads_rows) aggregation += ", backward reads Z";
    }
    std::cout << fmt::format("  {:<6} {:>7} {:>8} {:>8} {:<5} {:<34} {:>7}  {}\n", l + 1, layer.in_dim(),
                             aggregated_width(model, l, sums_inputs), layer.out_dim(), sums_inputs ? "no" : "yes",
                             aggregation, model.dropout_before(l), to_string(model.activation_after(l)));
  }
}

void run_plan(PlanArguments& args, CLI::App& command) {
  read_arguments(args, command);
  if (!args.data.partitions.empty()) {
    run_partition_plan(args, args.data.partitions);
    return;
  }
  const std::string dataset = args.data.dataset();
  const ExecutorChoice choice = planned_choice(args);
  const auto load_start = std::chrono::steady_clock::now();
  // Planning reads the features' shape only (its replay of an epoch moves no data), unless the first layer may
  // take them as sparse rows (on, or auto where the file stores them sparse): then it loads them, as nj train does.
  const bool stored_sparse = stored_features(hdf5::File::open_read(dataset)).sparse;
  const bool may_take_sparse =
      choice.sparse_inputs == SparseInputs::kOn || (choice.sparse_inputs == SparseInputs::kAuto && stored_sparse);
  Shard whole;
  std::int64_t width = 0;
  std::vector<vid_t> stored_order;
  std::vector<std::uint8_t> file_train_mask;  // in the file's vertex order
  if (!may_take_sparse) {
    DatasetWithoutFeatures read = read_dataset_without_features(dataset);
    width = read.feature_width;
    whole.num_classes = read.dataset.num_classes;
    whole.local = whole_local_graph(std::move(read.dataset.graph));
    stored_order = std::move(read.dataset.community_order);
    file_train_mask = std::move(read.dataset.train_mask);
  } else {
    whole = whole_graph_shard(read_dataset(dataset));
    width = whole.features.cols();
  }
  const std::int32_t classes = whole.num_classes;
  Model model(args.model.resolve(), width, classes);
  LocalGraph& local = whole.local;
  const double load_seconds = seconds_since(load_start);
  const auto order_start = std::chrono::steady_clock::now();
  if (whole.features.rows() > 0) {
    order_vertices(whole, choice.vertex_order);
  } else {
    order_vertices(local, choice.vertex_order, stored_order);
    // A whole graph's global ids are the file's vertex ids.
    whole.train_mask.resize(static_cast<std::size_t>(local.num_owned));
    for (vid_t v = 0; v < local.num_owned; ++v) {
      whole.train_mask[static_cast<std::size_t>(v)] =
          file_train_mask[static_cast<std::size_t>(local.global_id[static_cast<std::size_t>(v)])];
    }
  }
  spdlog::info("loaded in {:.2f} s, {} vertex order in {:.2f} s", load_seconds, to_string(choice.vertex_order),
               seconds_since(order_start));

  const auto start = std::chrono::steady_clock::now();
  const ConstRows features =
      whole.features.rows() > 0 ? whole.features.view() : ConstRows{nullptr, local.num_owned, width};
  const SparseInputs inputs =
      may_take_sparse && takes_sparse_inputs(choice.sparse_inputs, features, stored_sparse, nullptr)
          ? SparseInputs::kOn
          : SparseInputs::kOff;
  const MeasuredPlan measured = plan_and_measure(model, local, features, choice, inputs, whole.train_mask);
  const EpochPlan& plan = measured.plan;
  spdlog::info("planned in {:.2f} s", seconds_since(start));
  log_plan(plan);
  print_layers(model, plan);
  // Each category at the moment the footprint peaked, and at its own highest.
  const std::int64_t workspace = plan.options.library.workspace_bytes;
  std::cout << fmt::format(
      "device memory: peak {} of budget {}{}\n", format_bytes(plan.memory.peak_footprint_bytes),
      format_bytes(plan.options.device_budget),
      workspace > 0 ? fmt::format(" and {} of library workspaces beside it", format_bytes(workspace)) : std::string());
  std::cout << fmt::format("  {:<26} {:>12} {:>14}\n", "category", "at the peak", "most at once");
  for (const auto& [category, most] : plan.memory.category_peaks) {
    const auto at = plan.memory.at_peak.find(category);
    std::cout << fmt::format("  {:<26} {:>12} {:>14}\n", category,
                             format_bytes(at == plan.memory.at_peak.end() ? 0 : at->second), format_bytes(most));
  }
  std::cout << fmt::format("  {:<26} {:>12}\n", "alignment, fragmentation",
                           format_bytes(plan.memory.padding_at_peak()));
  const HostFootprint host = rank_footprint(args, local, width, classes, measured);
  std::cout << fmt::format("host memory (CPU device): peak {} ({})\n", format_bytes(host.total()), host.describe());
  if (const std::int64_t short_by = device_memory_shortfall(plan); short_by > 0) {
    std::cout << fmt::format("the budget {} is {} short\n", format_bytes(plan.options.device_budget),
                             format_bytes(short_by));
  }
  if (args.list_subgraphs) {
    for (const Pass& pass : plan.passes) {
      for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) {
        for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
          const PartSize& s = pass.layer_parts[l][k];
          std::cout << fmt::format("layer {} subgraph {}: {} destinations, {} sources, {} edges\n", l + 1, k,
                                   pass.destinations(l, k).size(), s.num_src, s.num_edges);
        }
      }
    }
    for (std::size_t k = 0; k < plan.closures.size(); ++k) {
      std::cout << fmt::format("subgraph {}: {} destinations\n", k, plan.closures[k].size());
    }
  }

  std::vector<CachePolicy> policies = {choice.options.policy};
  if (args.all_policies) {
    policies = {CachePolicy::kStAware,   CachePolicy::kLru,    CachePolicy::kFifo, CachePolicy::kDegree,
                CachePolicy::kSizeOrder, CachePolicy::kBelady, CachePolicy::kNone};
  }
  std::cout << fmt::format("{:<11} {:>12} {:>12} {:>12} {:>9}\n", "policy", "h2d", "d2h", "total", "hit rate");
  for (const CachePolicy policy : policies) {
    // Each policy's plan as the executor settles it (what stays on the device depends on its peak).
    ExecutorChoice alone = choice;
    alone.options.policy = policy;
    const EpochPlan t = policy == plan.options.policy
                            ? EpochPlan{}
                            : plan_and_measure(model, local, features, alone, inputs, whole.train_mask).plan;
    const EpochPlan& p = policy == plan.options.policy ? plan : t;
    const auto accesses = p.cache_hits + p.cache_misses;
    std::cout << fmt::format(
        "{:<11} {:>12} {:>12} {:>12} {:>8.1f}%\n", to_string(policy), format_bytes(p.h2d_bytes),
        format_bytes(p.d2h_bytes), format_bytes(p.h2d_bytes + p.d2h_bytes),
        accesses > 0 ? 100.0 * static_cast<double>(p.cache_hits) / static_cast<double>(accesses) : 100.0);
  }
  // The blocks that stay are a fixed set; beside what the others move, what the same room would move under LRU and
  // Belady's rule.
  if (args.all_policies && plan.passes.size() == 1 && !plan.passes.front().blocks_stay.empty()) {
    std::cout << fmt::format(
        "graph per epoch, in the room its staying blocks take ({}): kept for the run {}, lru {}, belady {}\n",
        format_bytes(plan.staying_block_bytes), format_bytes(plan.structure_h2d_bytes),
        format_bytes(structure_bytes_in_room(model, plan, CachePolicy::kLru)),
        format_bytes(structure_bytes_in_room(model, plan, CachePolicy::kBelady)));
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArguments>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Plan an epoch of the subgraph executor (subgraphs, device budget, predicted transfers) without training");
  add_data_options(*cmd, args->data,
                   "Dataset file (HDF5), or a partition folder (nj partition): then every rank's shard is planned and "
                   "what each rank moves per epoch is reported");
  add_model_options(*cmd, args->model);
  add_executor_options(*cmd, args->executor, false);
  cmd->add_option("--threads", args->threads,
                  "Threads a training run would use (0: OpenMP's default), for its host "
                  "memory")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_training_only_options(*cmd, args->ignored, kIgnoredGroup);
  cmd->add_flag("--inference", args->inference,
                "Plan nj infer's forward pass (no backward pass, no gradients: smaller steps) instead of a training "
                "epoch");
  cmd->add_flag("--all-policies", args->all_policies,
                "Predict the transfers of every cache policy, and what the graph blocks kept on the device would move "
                "with their room run by LRU and by Belady's rule");
  cmd->add_flag("--list-subgraphs", args->list_subgraphs, "Print every subgraph's size");
  cmd->add_flag("--json", args->json, "A partition folder's per-rank figures as one JSON object");
  cmd->add_option("--device", args->device,
                  "The device to plan for: cpu, cuda (counts what the CUDA backend's libraries take of the "
                  "device; planned on any machine), or auto (cuda where this machine has a GPU, as nj train)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_flag("--deterministic", args->deterministic,
                "With --device cuda: as nj train --deterministic, which runs without cuSPARSE");
  cmd->callback([args, cmd] { run_plan(*args, *cmd); });
}

}  // namespace nj::cli
