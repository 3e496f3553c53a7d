// Planning an epoch of the subgraph executor: subgraphs sized to the budget, the steps, the access trace and
// the cache plan. The budget is split in two halves: the cache pools, and the buffers of the step that runs
// plus the step being prefetched (a quarter each).
#include <algorithm>
#include <limits>

#include "nj/core/bytes.hpp"
#include "nj/exec/subgraph_executor.hpp"

namespace nj {
namespace {

constexpr std::int64_t kFloat = sizeof(float);

// A budget of at least `bytes`, written so that it parses back to no less: whole KiB, rounded up.
std::string suggested_budget(std::int64_t bytes) { return fmt::format("{}K", (bytes + 1023) / 1024); }

// Reuse keeps two steps' buffers (the running one and the prefetched one) beside the pools; recompute, which
// never prefetches, one closure.
std::int64_t steps_per_budget(ExecutionMode mode) { return mode == ExecutionMode::kReuse ? 4 : 2; }

struct LayerDims {
  std::int64_t in = 0;     // input row width
  std::int64_t width = 0;  // transformed row width (what aggregation reads)
  std::int64_t out = 0;    // output row width
  std::int64_t heads = 0;  // GAT heads, 0 for GCN
  bool attention() const { return heads > 0; }
};

std::vector<LayerDims> layer_dims(const Model& model) {
  std::vector<LayerDims> dims;
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    dims.push_back({layer.in_dim(), layer.row_width(), layer.out_dim(), layer.attention_heads()});
  }
  return dims;
}

// GAT's backward keeps per-edge coefficients and score gradients, and per-destination score gradients.
std::int64_t attention_workspace(const LayerDims& d, std::int64_t destinations, std::int64_t edges) {
  return d.attention() ? (2 * edges + destinations) * d.heads * kFloat : 0;
}

// Device bytes one reuse step of a layer needs besides the pools, for a subgraph of this size: the staging
// buffers of its cache traffic plus the largest of its four step kinds' buffers.
std::int64_t reuse_step_bytes(const LayerDims& d, const ClosureSize& size) {
  const std::int64_t dst = size.vertices[0];
  const std::int64_t src = size.vertices[1];
  const std::int64_t cached_tensors = d.attention() ? 2 : 1;
  const std::int64_t staging = 2 * src * d.width * kFloat * cached_tensors;
  const std::int64_t transform = dst * (d.in + d.width) * kFloat;
  const std::int64_t aggregate = dst * d.out * kFloat;
  const std::int64_t aggregate_backward = dst * d.out * kFloat + (d.attention() ? 2 * src * d.width * kFloat : 0) +
                                          attention_workspace(d, dst, size.edges[0]);
  // Inputs, their dropped copy and their gradient, and the transformed-row gradients.
  const std::int64_t transform_backward = dst * (3 * d.in + d.width) * kFloat;
  return staging + std::max({transform, aggregate, aggregate_backward, transform_backward});
}

// Device bytes of one recompute step: a subgraph's whole closure through every layer (BlockStack's buffers),
// its features gathered from the pool, and the staging of its feature loads.
std::int64_t closure_step_bytes(const std::vector<LayerDims>& dims, const ClosureSize& size) {
  const std::size_t layers = dims.size();
  std::int64_t bytes = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::int64_t sources = size.vertices[layers - l];
    const std::int64_t destinations = size.vertices[layers - 1 - l];
    bytes += (2 * sources * dims[l].width + 2 * destinations * dims[l].out + sources * dims[l].in) * kFloat +
             attention_workspace(dims[l], destinations, size.edges[layers - 1 - l]);
  }
  const std::int64_t features = size.vertices[layers] * dims[0].in * kFloat;
  return bytes + 3 * features;
}

bool unlimited(std::int64_t budget) { return budget <= 0 || budget == kUnlimited; }

std::vector<std::int64_t> out_degrees(const CsrGraph& graph) {
  std::vector<std::int64_t> degree(static_cast<std::size_t>(graph.num_vertices()), 0);
  for (const vid_t s : graph.sources) ++degree[static_cast<std::size_t>(s)];
  return degree;
}

std::vector<RowRef> rows_of(std::uint32_t tensor, std::span<const vid_t> vertices) {
  std::vector<RowRef> rows;
  rows.reserve(vertices.size());
  for (const vid_t v : vertices) rows.push_back({tensor, v});
  return rows;
}

// Reuse: tensor 2l holds layer l's transformed rows Z, tensor 2l+1 their gradient.
std::uint32_t z_tensor(std::size_t l) { return static_cast<std::uint32_t>(2 * l); }
std::uint32_t grad_tensor(std::size_t l) { return static_cast<std::uint32_t>(2 * l + 1); }

std::int64_t slots_for(std::int64_t bytes, std::int64_t row_bytes, std::int64_t vertices) {
  return std::min(vertices, bytes / row_bytes);
}

void plan_reuse(EpochPlan& plan, const Model& model, const CsrGraph& prepared, std::span<const float> weights,
                std::span<const vid_t> order, gid_t first_gid) {
  const auto dims = layer_dims(model);
  const std::size_t layers = dims.size();
  const std::int64_t n = prepared.num_vertices();
  plan.layer_parts.resize(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    const auto describe = [&](std::int64_t minimum) {
      return fmt::format(
          "device memory budget {} cannot hold the smallest subgraph of layer {} ({} bytes for one vertex with all "
          "its in-edges); use --device-memory {} or more",
          format_bytes(plan.options.device_budget), l + 1, minimum,
          suggested_budget(steps_per_budget(ExecutionMode::kReuse) * minimum));
    };
    const auto parts = partition_in_order(
        prepared, order, 1, [&](const ClosureSize& size) { return reuse_step_bytes(dims[l], size); },
        plan.step_limit_bytes, describe);
    for (const auto& dsts : parts) {
      const Subgraph& part = plan.layer_parts[l].emplace_back(make_subgraph(prepared, weights, dsts, first_gid));
      const ClosureSize size{{part.num_dst(), static_cast<std::int64_t>(part.sources.size())},
                             {static_cast<std::int64_t>(part.block.src_index.size())}};
      plan.largest_step_bytes = std::max(plan.largest_step_bytes, reuse_step_bytes(dims[l], size));
    }
  }

  AccessTrace& trace = plan.trace;
  for (std::size_t l = 0; l < layers; ++l) {
    trace.tensors.push_back({fmt::format("z{}", l), dims[l].width * kFloat, false});
    trace.tensors.push_back({fmt::format("grad_z{}", l), dims[l].width * kFloat, false});
  }
  const std::size_t phases = 2 * layers;
  trace.capacity_rows.assign(phases, std::vector<std::int64_t>(trace.tensors.size(), 0));
  auto add_step = [&](StepKind kind, std::size_t l, std::size_t part, std::uint32_t phase, std::vector<RowRef> reads,
                      std::vector<RowRef> writes, std::vector<RowRef> accumulates) {
    plan.steps.push_back({kind, static_cast<std::uint32_t>(l), static_cast<std::uint32_t>(part)});
    trace.steps.push_back({phase, std::move(reads), std::move(writes), std::move(accumulates)});
  };

  for (std::size_t l = 0; l < layers; ++l) {
    const auto phase = static_cast<std::uint32_t>(l);
    const std::int64_t row_bytes = dims[l].width * kFloat;
    trace.capacity_rows[phase][z_tensor(l)] = slots_for(plan.pool_bytes, row_bytes, n);
    const auto& parts = plan.layer_parts[l];
    for (std::size_t k = 0; k < parts.size(); ++k) {
      add_step(StepKind::kTransform, l, k, phase, {}, rows_of(z_tensor(l), parts[k].destinations()), {});
      plan.stream_h2d_bytes += parts[k].num_dst() * dims[l].in * kFloat;
    }
    // Aggregations run in the reverse order, so that the rows transformed last, still resident, are read first.
    for (std::size_t k = parts.size(); k-- > 0;) {
      add_step(StepKind::kAggregate, l, k, phase, rows_of(z_tensor(l), parts[k].sources), {}, {});
      plan.stream_d2h_bytes += parts[k].num_dst() * dims[l].out * kFloat;
    }
  }
  plan.forward_steps = plan.steps.size();
  for (std::size_t l = layers; l-- > 0;) {
    const auto phase = static_cast<std::uint32_t>(layers + (layers - 1 - l));
    const std::int64_t row_bytes = dims[l].width * kFloat;
    const std::int64_t cached_tensors = dims[l].attention() ? 2 : 1;
    trace.capacity_rows[phase][grad_tensor(l)] = slots_for(plan.pool_bytes / cached_tensors, row_bytes, n);
    if (dims[l].attention()) trace.capacity_rows[phase][z_tensor(l)] = trace.capacity_rows[phase][grad_tensor(l)];
    const auto& parts = plan.layer_parts[l];
    for (std::size_t k = 0; k < parts.size(); ++k) {
      add_step(StepKind::kAggregateBackward, l, k, phase,
               dims[l].attention() ? rows_of(z_tensor(l), parts[k].sources) : std::vector<RowRef>{}, {},
               rows_of(grad_tensor(l), parts[k].sources));
      plan.stream_h2d_bytes += static_cast<std::int64_t>(parts[k].num_dst()) * dims[l].out * kFloat;
    }
    for (std::size_t k = parts.size(); k-- > 0;) {
      add_step(StepKind::kTransformBackward, l, k, phase, rows_of(grad_tensor(l), parts[k].destinations()), {}, {});
      plan.stream_h2d_bytes += parts[k].num_dst() * dims[l].in * kFloat;
      if (l > 0) plan.stream_d2h_bytes += parts[k].num_dst() * dims[l].in * kFloat;
    }
  }
  plan.rows_computed = static_cast<std::int64_t>(layers) * n;
}

void plan_recompute(EpochPlan& plan, const Model& model, const CsrGraph& prepared, std::span<const vid_t> order) {
  const auto dims = layer_dims(model);
  const std::size_t layers = dims.size();
  const auto hops = static_cast<int>(layers);
  const auto describe = [&](std::int64_t minimum) {
    return fmt::format(
        "device memory budget {} cannot hold the smallest subgraph with its {}-hop closure ({} bytes for one "
        "vertex); use --device-memory {} or more",
        format_bytes(plan.options.device_budget), layers, minimum,
        suggested_budget(steps_per_budget(ExecutionMode::kRecompute) * minimum));
  };
  plan.closures = partition_in_order(
      prepared, order, hops, [&](const ClosureSize& size) { return closure_step_bytes(dims, size); },
      plan.step_limit_bytes, describe);

  AccessTrace& trace = plan.trace;
  const std::int64_t feature_bytes = dims[0].in * kFloat;
  trace.tensors.push_back({"features", feature_bytes, false});
  trace.capacity_rows.assign(1, {slots_for(plan.pool_bytes, feature_bytes, prepared.num_vertices())});
  std::vector<std::int64_t> level_sizes;
  for (std::size_t k = 0; k < plan.closures.size(); ++k) {
    const auto closure = closure_order(prepared, plan.closures[k], hops, level_sizes);
    ClosureSize size{level_sizes, std::vector<std::int64_t>(layers, 0)};
    for (std::size_t level = 0; level < layers; ++level) {
      for (std::int64_t i = 0; i < level_sizes[level]; ++i) size.edges[level] += prepared.in_degree(closure[i]);
    }
    plan.largest_step_bytes = std::max(plan.largest_step_bytes, closure_step_bytes(dims, size));
    plan.steps.push_back({StepKind::kClosure, 0, static_cast<std::uint32_t>(k)});
    trace.steps.push_back({0, rows_of(0, closure), {}, {}});
    for (std::size_t level = 0; level < layers; ++level) plan.rows_computed += level_sizes[level];
  }
  plan.forward_steps = plan.steps.size();
}

}  // namespace

ExecutionMode parse_execution_mode(const std::string& text) {
  if (text == "reuse") return ExecutionMode::kReuse;
  if (text == "recompute") return ExecutionMode::kRecompute;
  throw InputError(fmt::format("unknown execution mode '{}' (expected reuse or recompute)", text));
}

const char* to_string(ExecutionMode mode) { return mode == ExecutionMode::kReuse ? "reuse" : "recompute"; }

std::int64_t minimum_device_budget(const Model& model, const CsrGraph& graph, ExecutionMode mode) {
  const CsrGraph prepared = model.prepare_graph(graph);
  const std::vector<vid_t> order = locality_order(prepared);
  const auto dims = layer_dims(model);
  std::int64_t largest = 0;
  if (mode == ExecutionMode::kReuse) {
    for (const auto& d : dims) {
      largest = std::max(largest, largest_single_vertex_cost(prepared, order, 1, [&](const ClosureSize& size) {
                           return reuse_step_bytes(d, size);
                         }));
    }
  } else {
    largest = largest_single_vertex_cost(prepared, order, static_cast<int>(dims.size()),
                                         [&](const ClosureSize& size) { return closure_step_bytes(dims, size); });
  }
  return steps_per_budget(mode) * largest;
}

EpochPlan plan_epoch(const Model& model, const CsrGraph& graph, const SubgraphExecutorOptions& options,
                     gid_t first_gid) {
  EpochPlan plan;
  plan.options = options;
  const bool no_budget = unlimited(options.device_budget);
  if (no_budget) plan.options.device_budget = kUnlimited;
  // Quarters of the largest int64 still add up without overflow.
  const std::int64_t budget = no_budget ? std::numeric_limits<std::int64_t>::max() / 4 : options.device_budget;
  plan.pool_bytes = budget / 2;
  plan.step_limit_bytes = budget / steps_per_budget(options.mode);

  const CsrGraph prepared = model.prepare_graph(graph);
  const std::vector<float> weights = model.edge_weights(prepared);
  const std::vector<vid_t> order = locality_order(prepared);
  plan.trace.vertex_degree = out_degrees(prepared);
  plan.trace.release_dead_rows = options.mode == ExecutionMode::kReuse;
  if (options.mode == ExecutionMode::kReuse) {
    plan_reuse(plan, model, prepared, weights, order, first_gid);
  } else {
    plan_recompute(plan, model, prepared, order);
  }
  plan.rows_needed = static_cast<std::int64_t>(model.num_layers()) * prepared.num_vertices();
  plan.cache = plan_cache(plan.trace, options.policy);
  std::int64_t largest_pools = 0;
  for (const auto& phase : plan.trace.capacity_rows) {
    std::int64_t pools = 0;
    for (std::size_t t = 0; t < phase.size(); ++t) pools += phase[t] * plan.trace.tensors[t].row_bytes;
    largest_pools = std::max(largest_pools, pools);
  }
  plan.peak_bytes_bound = largest_pools + (options.mode == ExecutionMode::kReuse ? 2 : 1) * plan.largest_step_bytes;
  return plan;
}

}  // namespace nj
