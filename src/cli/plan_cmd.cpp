// nj plan: forecasts what nj train (or nj infer) will hold and move, without training: the executor it runs, its
// device's peak, what an epoch copies each way, what it exchanges with other ranks and its host memory, every figure
// what the run measures (rank_setup.hpp, PlannedRun); within a budget also its subgraphs and the cache policies. On
// a partition folder it forecasts every rank's shard.
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "nj/core/host_memory.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/graph/mean_part.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/feature_storage.hpp"
#include "nj/io/path_kind.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/partition/partition_memory.hpp"
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
  std::vector<std::int64_t> shape;  // --shape: VERTICES,EDGES,FEATURES,CLASSES of a graph to project a rank for
  int ranks = 1;                    // --ranks: the ranks it is partitioned over
  double mirrors_per_vertex = -1;   // --mirrors: a part's mirrors per owned vertex (< 0: neighbours at random)
};

// The executor as nj train (or, with --inference, nj infer) would run it on --device: a GPU's backend takes its
// libraries' memory.
ExecutorChoice planned_choice(const PlanArguments& args) {
  ExecutorChoice choice = parse_executor_choice(args.executor);
  NJ_USAGE(!args.inference || choice.in_memory || choice.options.mode == ExecutionMode::kReuse,
           "--inference plans nj infer, which runs in memory or reuse (the recompute baseline keeps no layer's "
           "outputs)");
  choice.options.forward_only = args.inference;
  const DeviceKind device =
      args.device == "auto" ? choose_device(DeviceKind::kAuto).kind : parse_device_kind(args.device);
  if (device == DeviceKind::kCuda) choice.options.library = cuda_library_memory(args.deterministic);
  return choice;
}

// One rank's forecast: its planned run, as the host budget had it planned, and its host memory at the peak.
struct RankForecast {
  PlannedRun run;
  ExecutorChoice choice;             // what `run` was planned as
  std::vector<std::string> lighter;  // what the host budget changed (HostFittedRun::lighter)
  bool fits = true;                  // within the host budget (HostFittedRun::fits)
  HostFootprint host;
  std::int64_t minimum_budget = 0;  // the smallest --device-memory the subgraph executor plans with
};

// Plans a rank's run over `local` as nj train would (`features` hold values only where the first layer takes them as
// sparse rows) within --host-memory where given, and adds up its host memory, the device's forecast peak among it
// where the device is emulated.
RankForecast forecast_rank(const PlanArguments& args, const ExecutorChoice& choice, Model& model,
                           const LocalGraph& local, ConstRows features, bool sparse,
                           std::span<const std::uint8_t> train_mask, const RankShape& shape) {
  // Several ranks exchange from device memory: the CPU device's communicator sends straight from it, and so does NCCL
  // with a GPU for each rank.
  const MemorySpace exchange_space = local.peers.empty() ? MemorySpace::kHost : MemorySpace::kDevice;
  // nj plan's own process has no MPI; a rank of several does.
  const std::int64_t process = resident_at_start() + (local.peers.empty() ? 0 : kMpiInitBytes);
  const HostFootprint loading = loading_host_footprint(shape, process);
  const HostBudget budget{.bytes = args.ignored.host_memory.empty() ? -1 : parse_byte_size(args.ignored.host_memory),
                          .source = "given by --host-memory",
                          .forecast = [&](const ExecutorChoice& planned, const PlannedRun& run) {
                            return host_forecast(model, shape, loading, planned, run, process, !local.peers.empty(),
                                                 args.threads);
                          }};
  HostFittedRun fitted = plan_within_host_memory(choice, budget, [&](const ExecutorChoice& planned) {
    return plan_run(planned, model, local, features, sparse, train_mask, args.threads, exchange_space);
  });
  RankForecast forecast{.run = std::move(fitted.run),
                        .choice = fitted.choice,
                        .lighter = std::move(fitted.lighter),
                        .fits = fitted.fits,
                        .host = std::move(fitted.host)};
  const InputShape inputs = input_shape(forecast.run.sparse_inputs);
  forecast.minimum_budget =
      minimum_device_budget(model, local, choice.options.library, choice.options.forward_only, inputs);
  return forecast;
}

// A rank's forecast in the names the metrics log gives what an epoch measures (metrics_log.hpp).
nlohmann::json rank_json(std::size_t rank, const LocalGraph& local, const RankForecast& f) {
  const MemoryForecast& device = f.run.device;
  nlohmann::json exchange = nlohmann::json::array();
  for (std::size_t l = 0; l < f.run.exchange.size(); ++l) {
    const ExchangeForecast& e = f.run.exchange[l];
    exchange.push_back({{"layer", l + 1},
                        {"sends", to_string(e.side)},
                        {"row_width", e.row_width},
                        {"forward_bytes", e.forward_bytes},
                        {"backward_bytes", e.backward_bytes}});
  }
  nlohmann::json host_parts = nlohmann::json::object();
  for (const HostFootprint::Part& part : f.host.parts) host_parts[part.name] = part.bytes;
  vid_t reading_mirrors = 0;
  for (vid_t v = 0; v < local.num_owned; ++v) reading_mirrors += local.reads_mirror(v) ? 1 : 0;
  return {{"rank", rank},
          {"owned", local.num_owned},
          {"mirrors", local.num_mirrors()},
          {"owned_reading_mirrors", reading_mirrors},
          {"in_edges", local.graph.num_edges()},
          {"steps", f.run.plan ? f.run.plan->num_steps : 0},
          {"minimum_device_budget_bytes", f.minimum_budget},
          {"execution",
           {{"h2d_bytes", device.h2d[Traffic::kRows]},
            {"h2d_structure_bytes", device.h2d[Traffic::kStructure]},
            {"h2d_index_bytes", device.h2d[Traffic::kIndex]},
            {"h2d_parameter_bytes", device.h2d[Traffic::kParameters]},
            {"d2h_bytes", device.d2h[Traffic::kRows]},
            {"d2h_parameter_bytes", device.d2h[Traffic::kParameters]},
            {"peak_device_bytes", device.peak_bytes},
            {"peak_device_footprint_bytes", device.peak_footprint_bytes}}},
          {"exchange_bytes_sent", f.run.exchange_bytes_sent()},
          {"exchange", exchange},
          {"host_peak_bytes", f.host.total()},
          {"host_peak_phase", f.host.phase},
          {"host_memory_choices", f.lighter},
          {"host", host_parts}};
}

const char* execution_name(const ExecutorChoice& choice) {
  return choice.in_memory ? "in-memory" : to_string(choice.options.mode);
}

nlohmann::json plan_json(const std::string& dataset, const ExecutorChoice& choice, nlohmann::json ranks) {
  return {{"dataset", dataset},
          {"parts", ranks.size()},
          {"execution", execution_name(choice)},
          {"device_budget_bytes", choice.in_memory ? kUnlimited : choice.options.device_budget},
          {"ranks", std::move(ranks)}};
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

// What a file of stored features holds that the forecast needs: their entries where it stores them sparse.
std::int64_t stored_nonzeros(const std::string& path) {
  const StoredFeatures stored = stored_features(hdf5::File::open_read(path));
  return stored.sparse ? stored.nonzeros : -1;
}

RankShape shape_of(const LocalGraph& local, std::int64_t features, std::int64_t classes, std::int64_t nonzeros,
                   VertexOrder order) {
  return {.owned = local.num_owned,
          .local = local.num_local(),
          .in_edges = local.graph.num_edges(),
          .features = features,
          .classes = classes,
          .stored_nonzeros = nonzeros,
          .renumbered = renumbers(order)};
}

// Every rank of a partition folder, planned as `nj train --partitions` would run it with the same options.
void run_partition_plan(const PlanArguments& args, const std::string& folder) {
  const PartitionManifest manifest = read_manifest(folder);
  const ExecutorChoice choice = planned_choice(args);
  const bool sparse = shards_sparse_inputs(manifest, choice.sparse_inputs) == SparseInputs::kOn;
  nlohmann::json ranks = nlohmann::json::array();
  if (!args.json) {
    std::cout << fmt::format("{} ({} parts by {}), {} at {} per rank; bytes per epoch:\n", manifest.dataset_name,
                             manifest.partition.parts, manifest.partition.method, execution_name(choice),
                             format_bytes(choice.in_memory ? kUnlimited : choice.options.device_budget));
    std::cout << fmt::format("{:>4} {:>10} {:>10} {:>12} {:>12} {:>14} {:>12} {:>12}\n", "rank", "owned", "mirrors",
                             "h2d", "d2h", "exchange sent", "device peak", "host peak");
  }
  std::vector<std::string> sides;  // every rank's layers send the same side
  for (std::size_t part = 0; part < manifest.shard_files.size(); ++part) {
    const std::string path = (std::filesystem::path(manifest.directory) / manifest.shard_files[part]).string();
    Shard shard = read_shard(path);
    order_vertices(shard, choice.vertex_order);
    Model model(args.model.resolve(), shard.features.cols(), shard.num_classes);
    const RankForecast f = forecast_rank(
        args, choice, model, shard.local, shard.features.view(), sparse, shard.train_mask,
        shape_of(shard.local, shard.features.cols(), shard.num_classes, stored_nonzeros(path), choice.vertex_order));
    sides.clear();
    for (std::size_t l = 0; l < f.run.exchange.size(); ++l) {
      const ExchangeForecast& e = f.run.exchange[l];
      sides.push_back(
          fmt::format("layer {} its {} ({} floats a row)", model.layer_label(l), to_string(e.side), e.row_width));
    }
    ranks.push_back(rank_json(part, shard.local, f));
    if (!args.json) {
      std::cout << fmt::format("{:>4} {:>10} {:>10} {:>12} {:>12} {:>14} {:>12} {:>12}\n", part, shard.local.num_owned,
                               shard.local.num_mirrors(), format_bytes(f.run.device.h2d.total()),
                               format_bytes(f.run.device.d2h.total()), format_bytes(f.run.exchange_bytes_sent()),
                               format_bytes(f.run.device.peak_footprint_bytes), format_bytes(f.host.total()));
    }
  }
  if (args.json) {
    std::cout << plan_json(manifest.dataset_name, choice, std::move(ranks)).dump() << "\n";
    return;
  }
  std::cout << fmt::format("exchange sends: {}\n", fmt::join(sides, ", "));
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
  const std::string dataset = args.data.dataset();
  NJ_USAGE(dataset.empty() != args.data.partitions.empty(),
           "give either a dataset or --partitions (a folder written by nj partition), not {}",
           dataset.empty() ? "neither" : "both");
  if (dataset.empty()) return;
  if (path_kind(dataset) == PathKind::kPartitionFolder || dataset.ends_with(kManifestFileName)) {
    args.data.partitions = dataset;
    return;
  }
  require_dataset_file(dataset, PartitionFolders::kNotRead);
}

// What each layer declares, and the tensors its aggregation reads: Z, one row per vertex, and their gradient.
void print_layers(const Model& model, bool first_layer_sums_inputs) {
  std::cout << fmt::format("layers: {}\n", describe_model(model.config()));
  std::cout << fmt::format("  {:<6} {:>7} {:>8} {:>8} {:<5} {:<34} {:>7}  {}\n", "layer", "input", "Z width", "output",
                           "grad", "aggregation", "dropout", "activation");
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    const AggregationTraits traits = layer.aggregation();
    const bool sums_inputs = l == 0 && first_layer_sums_inputs;
    std::string aggregation = "its own row only";
    if (traits.reads_neighbours) {
      aggregation = traits.spmm ? "in-edges, linear (SpMM)" : (traits.linear ? "in-edges, linear" : "in-edges");
      if (traits.structural_coefficients) aggregation += ", weighted";
      if (traits.backward_reads_rows) aggregation += ", backward reads Z";
    }
    std::cout << fmt::format("  {:<6} {:>7} {:>8} {:>8} {:<5} {:<34} {:>7}  {}\n", model.layer_label(l), layer.in_dim(),
                             aggregated_width(model, l, sums_inputs), layer.out_dim(), sums_inputs ? "no" : "yes",
                             aggregation, model.dropout_before(l), to_string(model.activation_after(l)));
  }
}

// The device's peak by category: at the peak, and each category at its own highest.
void print_device_memory(const ExecutorChoice& choice, const MemoryForecast& memory) {
  const std::int64_t workspace = choice.options.library.workspace_bytes;
  std::cout << fmt::format(
      "device memory: peak {}{}{}\n", format_bytes(memory.peak_footprint_bytes),
      choice.in_memory ? " (in memory: no budget)"
                       : fmt::format(" of budget {}", format_bytes(choice.options.device_budget)),
      workspace > 0 ? fmt::format(" and {} of library workspaces beside it", format_bytes(workspace)) : std::string());
  std::cout << fmt::format("  {:<26} {:>12} {:>14}\n", "category", "at the peak", "most at once");
  for (const auto& [category, most] : memory.category_peaks) {
    const auto at = memory.at_peak.find(category);
    std::cout << fmt::format("  {:<26} {:>12} {:>14}\n", category,
                             format_bytes(at == memory.at_peak.end() ? 0 : at->second), format_bytes(most));
  }
  std::cout << fmt::format("  {:<26} {:>12}\n", "alignment, fragmentation", format_bytes(memory.padding_at_peak()));
}

// What every cache policy would move, each plan settled as the executor settles it (what stays on the device depends
// on its peak); and beside the staying blocks, what their room would move under LRU and Belady's rule.
void print_policies(const PlanArguments& args, const ExecutorChoice& choice, Model& model, const LocalGraph& local,
                    ConstRows features, bool sparse, std::span<const std::uint8_t> train_mask, const EpochPlan& plan) {
  std::vector<CachePolicy> policies = {choice.options.policy};
  if (args.all_policies) {
    policies = {CachePolicy::kStAware,   CachePolicy::kLru,    CachePolicy::kFifo, CachePolicy::kDegree,
                CachePolicy::kSizeOrder, CachePolicy::kBelady, CachePolicy::kNone};
  }
  std::cout << fmt::format("{:<11} {:>12} {:>12} {:>12} {:>9}\n", "policy", "rows h2d", "rows d2h", "all copies",
                           "hit rate");
  for (const CachePolicy policy : policies) {
    ExecutorChoice alone = choice;
    alone.options.policy = policy;
    const std::optional<PlannedRun> other =
        policy == plan.options.policy
            ? std::nullopt
            : std::optional<PlannedRun>(plan_run(alone, model, local, features, sparse, train_mask, args.threads));
    const EpochPlan& p = other ? *other->plan : plan;
    const auto accesses = p.cache_hits + p.cache_misses;
    std::cout << fmt::format(
        "{:<11} {:>12} {:>12} {:>12} {:>8.1f}%\n", to_string(policy), format_bytes(p.memory.h2d[Traffic::kRows]),
        format_bytes(p.memory.d2h[Traffic::kRows]), format_bytes(p.memory.h2d.total() + p.memory.d2h.total()),
        accesses > 0 ? 100.0 * static_cast<double>(p.cache_hits) / static_cast<double>(accesses) : 100.0);
  }
  if (args.all_policies && plan.passes.size() == 1 && !plan.passes.front().blocks_stay.empty()) {
    std::cout << fmt::format(
        "graph per epoch, in the room its staying blocks take ({}): kept for the run {}, lru {}, belady {}\n",
        format_bytes(plan.staying_block_bytes), format_bytes(plan.structure_h2d_bytes),
        format_bytes(structure_bytes_in_room(model, plan, CachePolicy::kLru)),
        format_bytes(structure_bytes_in_room(model, plan, CachePolicy::kBelady)));
  }
}

void print_subgraphs(const Model& model, const EpochPlan& plan) {
  for (const Pass& pass : plan.passes) {
    for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) {
      for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
        const PartSize& s = pass.layer_parts[l][k];
        std::cout << fmt::format("layer {} subgraph {}: {} destinations, {} sources, {} edges\n", model.layer_label(l),
                                 k, pass.destinations(l, k).size(), s.num_src, s.num_edges);
      }
    }
  }
  for (std::size_t k = 0; k < plan.closures.size(); ++k) {
    std::cout << fmt::format("subgraph {}: {} destinations\n", k, plan.closures[k].size());
  }
}

// The dataset as nj train loads it on one rank: the graph and labels, and the features' values only where the first
// layer may take them as sparse rows (the forecast's replay reads no other values); numbered in `order`.
struct LoadedForPlan {
  Shard shard;
  std::int64_t width = 0;
};
LoadedForPlan load_for_plan(const std::string& dataset, VertexOrder order, bool read_features) {
  LoadedForPlan loaded;
  Shard& whole = loaded.shard;
  if (read_features) {
    whole = whole_graph_shard(read_dataset(dataset));
    order_vertices(whole, order);
    loaded.width = whole.features.cols();
    return loaded;
  }
  DatasetWithoutFeatures read = read_dataset_without_features(dataset);
  loaded.width = read.feature_width;
  whole.name = read.dataset.name;
  whole.num_classes = read.dataset.num_classes;
  whole.local = whole_local_graph(std::move(read.dataset.graph));
  order_vertices(whole.local, order, read.dataset.community_order);
  // A whole graph's global ids are the file's vertex ids.
  whole.train_mask.resize(static_cast<std::size_t>(whole.local.num_owned));
  for (vid_t v = 0; v < whole.local.num_owned; ++v) {
    whole.train_mask[static_cast<std::size_t>(v)] =
        read.dataset.train_mask[static_cast<std::size_t>(whole.local.global_id[static_cast<std::size_t>(v)])];
  }
  return loaded;
}

void print_forecast(const PlanArguments& args, const ExecutorChoice& choice, Model& model, const LoadedForPlan& loaded,
                    ConstRows features, bool sparse, const RankForecast& f) {
  const LocalGraph& local = loaded.shard.local;
  if (f.run.plan) log_plan(model, *f.run.plan);
  std::cout << fmt::format("execution: {}{}\n", execution_name(choice),
                           choice.in_memory ? " (the whole graph on the device; --device-memory plans a budget)" : "");
  print_layers(model, f.run.first_layer_sums_inputs);
  print_device_memory(choice, f.run.device);
  ExecutionMetrics moved;
  moved.h2d_bytes = f.run.device.h2d[Traffic::kRows];
  moved.d2h_bytes = f.run.device.d2h[Traffic::kRows];
  moved.h2d_other = f.run.device.h2d;
  moved.h2d_other[Traffic::kRows] = 0;
  moved.d2h_other = f.run.device.d2h;
  moved.d2h_other[Traffic::kRows] = 0;
  std::cout << fmt::format("per {}: {}\n", args.inference ? "inference" : "epoch", format_copies(moved));
  std::cout << fmt::format("host memory: peak {} while {} ({})\n", format_bytes(f.host.total()), f.host.phase,
                           f.host.describe());
  if (!f.lighter.empty()) {
    std::cout << fmt::format("host memory: {} --host-memory {} by {}{}\n", f.fits ? "within" : "over",
                             args.ignored.host_memory, fmt::join(f.lighter, "; "),
                             f.fits ? "" : ", the lightest plan: nj train would refuse it");
  }
  if (!f.run.plan) return;
  const EpochPlan& plan = *f.run.plan;
  if (args.list_subgraphs) print_subgraphs(model, plan);
  print_policies(args, choice, model, local, features, sparse, loaded.shard.train_mask, plan);
}

// The mean part of the graph --shape gives, on --ranks ranks: its counts as nj partition --forecast takes them, the
// graph made up to them (mean_part.hpp).
PartShape mean_part_shape(const PlanArguments& args) {
  NJ_USAGE(args.shape.size() == 4, "--shape takes four numbers, VERTICES,EDGES,FEATURES,CLASSES, not {}",
           args.shape.size());
  const std::int64_t vertices = args.shape[0];
  const std::int64_t edges = args.shape[1];
  NJ_USAGE(vertices >= args.ranks && edges >= 0 && args.shape[2] > 0 && args.shape[3] > 0 &&
               args.mirrors_per_vertex <= static_cast<double>(vertices),
           "--shape {},{},{},{} on {} ranks: each rank needs a vertex, the features and classes at least one, and a "
           "part at most the graph's vertices as mirrors of each of its own",
           vertices, edges, args.shape[2], args.shape[3], args.ranks);
  const PartitionRankCounts counts =
      mean_partition_counts(vertices, edges, args.shape[2], args.ranks, args.ranks, args.mirrors_per_vertex);
  NJ_USAGE(counts.mirrors <= vertices - counts.rows_in,
           "--mirrors {}: a part of {} vertices cannot mirror {}, more than the {} vertices the other parts own",
           args.mirrors_per_vertex, counts.rows_in, counts.mirrors, vertices - counts.rows_in);
  return {.owned = counts.rows_in,
          .mirrors = args.ranks > 1 ? std::min(counts.mirrors, counts.edges_in) : 0,
          .in_edges = counts.edges_in,
          .peers = args.ranks - 1};
}

// A training rank of a graph that is not at hand, planned over the mean part (one vertex in ten training): what
// docs/multi-rank.md projects. `nj plan` of a like graph's shards forecasts what their ranks measure.
void run_shape_plan(const PlanArguments& args) {
  const PartShape part = mean_part_shape(args);
  const ExecutorChoice choice = planned_choice(args);
  const LocalGraph local = mean_part_graph(part, 1);
  std::vector<std::uint8_t> train_mask(static_cast<std::size_t>(part.owned), 0);
  for (std::size_t v = 0; v < train_mask.size(); v += 10) train_mask[v] = 1;
  const std::int64_t features = args.shape[2];
  const auto classes = static_cast<std::int32_t>(args.shape[3]);
  Model model(args.model.resolve(), features, classes);
  const RankForecast f = forecast_rank(args, choice, model, local, ConstRows{nullptr, part.owned, features}, false,
                                       train_mask, shape_of(local, features, classes, -1, choice.vertex_order));
  std::cout << fmt::format("each of {} ranks: {} owned, {} mirrors, {} in-edges; {}\n", args.ranks, part.owned,
                           part.mirrors, part.in_edges, execution_name(f.choice));
  std::cout << fmt::format("device memory: peak {}\n", format_bytes(f.run.device.peak_footprint_bytes));
  std::cout << fmt::format("host memory: peak {} while {} ({})\n", format_bytes(f.host.total()), f.host.phase,
                           f.host.describe());
}

void run_plan(PlanArguments& args, CLI::App& command) {
  if (!args.shape.empty()) {
    NJ_USAGE(args.data.dataset().empty() && args.data.partitions.empty(),
             "--shape describes a graph in place of a dataset or --partitions: give one of them");
    NJ_USAGE(!args.json, "--shape prints its forecast as text; --json is for a dataset or --partitions");
    run_shape_plan(args);
    return;
  }
  NJ_USAGE(args.ranks == 1 && args.mirrors_per_vertex < 0, "--ranks and --mirrors describe a graph for --shape only");
  read_arguments(args, command);
  const ExecutorChoice choice = planned_choice(args);
  const int ranks = args.data.partitions.empty() ? 1 : read_manifest(args.data.partitions).partition.parts;
  warn_unused_options(
      command, args.model.resolve(), choice,
      {.ranks = ranks, .partitions_given = ranks > 1, .on_gpu = choice.options.library.memory_apart_from_host});
  if (!args.data.partitions.empty()) {
    run_partition_plan(args, args.data.partitions);
    return;
  }
  const std::string dataset = args.data.dataset();
  const auto load_start = std::chrono::steady_clock::now();
  // Planning reads the features' shape only, unless the first layer may take them as sparse rows (on, or auto where
  // the file stores them sparse): then it loads them, as nj train does.
  const std::int64_t nonzeros = stored_nonzeros(dataset);
  const bool may_take_sparse =
      choice.sparse_inputs == SparseInputs::kOn || (choice.sparse_inputs == SparseInputs::kAuto && nonzeros >= 0);
  const LoadedForPlan loaded = load_for_plan(dataset, choice.vertex_order, may_take_sparse);
  const LocalGraph& local = loaded.shard.local;
  spdlog::info("loaded and ordered in {:.2f} s", seconds_since(load_start));

  const ConstRows features = loaded.shard.features.rows() > 0 ? loaded.shard.features.view()
                                                              : ConstRows{nullptr, local.num_owned, loaded.width};
  const bool sparse = may_take_sparse && takes_sparse_inputs(choice.sparse_inputs, features, nonzeros >= 0, nullptr);
  Model model(args.model.resolve(), loaded.width, loaded.shard.num_classes);
  const auto start = std::chrono::steady_clock::now();
  const RankForecast f =
      forecast_rank(args, choice, model, local, features, sparse, loaded.shard.train_mask,
                    shape_of(local, loaded.width, loaded.shard.num_classes, nonzeros, choice.vertex_order));
  spdlog::info("planned in {:.2f} s", seconds_since(start));
  if (args.json) {
    std::cout << plan_json(loaded.shard.name, choice, nlohmann::json::array({rank_json(0, local, f)})).dump() << "\n";
    return;
  }
  print_forecast(args, f.choice, model, loaded, features, sparse, f);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArguments>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Forecast what nj train (or nj infer) will hold and move: the device's peak, the bytes an epoch copies and "
      "exchanges, host memory, and within a budget the subgraphs and cache policies; without training");
  add_data_options(*cmd, args->data,
                   "Dataset file (HDF5), or a partition folder (nj partition): then every rank's shard is planned and "
                   "what each rank moves per epoch is reported");
  add_model_options(*cmd, args->model);
  add_executor_options(*cmd, args->executor);
  cmd->add_option("--threads", args->threads,
                  "Threads a training run would use (0: OpenMP's default), for its host "
                  "memory")
      ->check(at_least(0))
      ->capture_default_str();
  add_training_only_options(*cmd, args->ignored, kIgnoredGroup);
  // The host budget is planning's too: nj plan forecasts the plan nj train would choose within it.
  cmd->get_option("--host-memory")
      ->group(cmd->get_option("--device-memory")->get_group())
      ->description(
          "Host memory a training rank may use, e.g. 16G (default: none, whatever this machine has): plans what nj "
          "train would within it, keeping fewer tensors in host memory where the fastest plan needs more");
  cmd->add_flag("--inference", args->inference,
                "Plan nj infer's forward pass (no backward pass, no gradients: smaller steps) instead of a training "
                "epoch");
  cmd->add_flag("--all-policies", args->all_policies,
                "Within a budget: predict the transfers of every cache policy, and what the graph blocks kept on the "
                "device would move with their room run by LRU and by Belady's rule");
  cmd->add_flag("--list-subgraphs", args->list_subgraphs, "Within a budget: print every subgraph's size");
  cmd->add_flag("--json", args->json,
                "Print the forecast as one JSON object (per rank: the epoch's copies under the names the metrics "
                "log gives them, the exchange, the device and host peaks) instead of tables");
  cmd->add_option("--device", args->device,
                  "The device to plan for: cpu, cuda (counts what the CUDA backend's libraries take of the "
                  "device; planned on any machine), or auto (cuda where this machine has a GPU, as nj train)")
      ->check(one_of({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--shape", args->shape,
                  "In place of a dataset: the VERTICES,EDGES,FEATURES,CLASSES of a graph (edges as stored) whose "
                  "training rank to forecast, over the mean part of --ranks")
      ->delimiter(',')
      ->type_name("V,E,F,C");
  cmd->add_option("--ranks", args->ranks, "With --shape: the ranks the graph is partitioned over")
      ->check(at_least(1))
      ->capture_default_str();
  cmd->add_option(
         "--mirrors", args->mirrors_per_vertex,
         "With --shape: a part's mirrors per vertex it owns, as a partition of a like graph measured (default: "
         "a random partition's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--deterministic", args->deterministic,
                "With --device cuda: as nj train --deterministic, which runs without cuSPARSE");
  cmd->callback([args, cmd] { run_plan(*args, *cmd); });
}

}  // namespace nj::cli
