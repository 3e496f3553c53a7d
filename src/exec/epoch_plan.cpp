// Planning an epoch of the subgraph executor: subgraphs sized to the budget, the steps, the access trace and
// the cache plan. The budget is split in two halves: the cache pools, and the buffers of the step that runs
// plus the step being prefetched (a quarter each).
#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

#include "nj/core/bytes.hpp"
#include "nj/core/enum_names.hpp"
#include "nj/core/side_by_side.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/device/arena.hpp"
#include "nj/exec/exchange_side.hpp"
#include "nj/exec/executor.hpp"
#include "nj/exec/host_footprint.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/kernels/device_block.hpp"

namespace nj {
namespace {

constexpr std::int64_t kFloat = sizeof(float);

// A budget of at least `bytes`, written so that it parses back to no less: whole KiB, rounded up.
std::string suggested_budget(std::int64_t bytes) { return fmt::format("{}K", (bytes + 1023) / 1024); }

// Pools take half the budget; the running step and the prefetched one a quarter each.
constexpr std::int64_t kStepsPerBudget = 4;

constexpr std::int64_t kSlot = sizeof(vid_t);
constexpr std::int64_t kId = sizeof(gid_t);

struct LayerDims {
  const Layer* layer = nullptr;
  std::int64_t in = 0;       // input row width
  std::int64_t width = 0;    // what aggregation reads: the transformed rows, or the inputs where sums_inputs
  std::int64_t out = 0;      // output row width
  bool sums_inputs = false;  // aggregates its inputs, then transforms the sums (Pass::first_layer_sums_inputs)
  std::int64_t sums = 0;     // the width of those sums (Layer::input_sums_width), where it does
  // Its aggregations may narrow their block's offsets into a buffer of their own (LibraryMemory).
  bool narrows_offsets = false;
  // Its blocks carry edge weights: every layer's are cut from the one prepared graph, read or not.
  bool weighted_blocks = false;
  bool forward_only = false;  // an inference plan: no backward steps
  // The first layer's inputs as sparse rows (sparse_inputs.hpp), at most this many entries a row; their SpMMs may
  // narrow offsets whatever the layer's aggregation is.
  bool sparse_inputs = false;
  std::int64_t max_row_nonzeros = 0;
  bool inputs_narrow_offsets = false;
  std::int64_t narrow_source_limit = kNarrowSourceLimit;  // of its packed blocks (PackedBlock)
  // The second layer, where the first sums its inputs: the width of those sums, which its transform backward may
  // upload to take the first layer's backward too (Pass::first_layer_backward_fused).
  std::int64_t first_layer_sums = 0;
  // Per destination, what the next layer's transform backward adds to this layer's aggregation backward where that
  // may take it (Pass::takes_next_transform_backward): the outputs computed again, their dropped copy and gradient,
  // the next layer's transformed-row gradients, and their id and slot.
  std::int64_t next_transform_backward = 0;
  // The last layer in training: its aggregations pack the logits the loss reads, and their gradients, beside their
  // outputs (Pass::loss_positions), each with its position.
  bool packs_loss_rows = false;
  // The backend reads a packed block as it lies: a step expands nothing (LibraryMemory).
  bool reads_packed_blocks = true;
};

// Whether chained layers' outputs are computed again, from a first layer's sums or by aggregating again
// (RecomputeOutputs): by default only on a GPU, where the copies they spare cross PCIe; on the CPU device a copy is a
// memcpy, cheaper than the GEMM or the aggregation, and the dropout drawn again, that replace it.
bool computes_outputs_again(const SubgraphExecutorOptions& options) {
  return options.recompute_outputs == RecomputeOutputs::kOn ||
         (options.recompute_outputs == RecomputeOutputs::kAuto && options.library.memory_apart_from_host);
}

// Whether the aggregation backward of layer l may take layer l+1's transform backward (Pass::chained, with its
// outputs computed again from the transformed rows it reads): where the plan may chain them.
bool may_take_next_transform_backward(const Model& model, std::size_t l, bool may_chain, bool first_layer_sums_inputs) {
  return may_chain && l + 1 < model.num_layers() && model.layer(l).aggregation().backward_reads_rows &&
         !(l == 0 && first_layer_sums_inputs);
}

// may_chain: a budgeted training plan of one rank's reuse pass, whose layers may be chained (chain_layers).
std::vector<LayerDims> layer_dims(const Model& model, const LibraryMemory& library, const PreparedGraph& graph,
                                  bool forward_only, const InputShape& inputs, bool first_layer_sums_inputs = false,
                                  std::int64_t narrow_source_limit = kNarrowSourceLimit, bool may_chain = false) {
  std::vector<LayerDims> dims;
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    const bool sums_inputs = l == 0 && first_layer_sums_inputs;
    const bool sparse = l == 0 && inputs.sparse;
    dims.push_back({&layer, layer.in_dim(), aggregated_width(model, l, first_layer_sums_inputs), layer.out_dim(),
                    sums_inputs, sums_inputs ? layer.input_sums_width() : 0,
                    library.narrows_offsets && layer.aggregation().spmm, graph.weighted(), forward_only, sparse,
                    sparse ? inputs.max_row_nonzeros : 0, sparse && library.narrows_offsets, narrow_source_limit,
                    l == 1 && first_layer_sums_inputs && !forward_only ? model.layer(0).input_sums_width() : 0});
    dims.back().packs_loss_rows = l + 1 == model.num_layers() && !forward_only;
    dims.back().reads_packed_blocks = library.reads_packed_blocks;
    if (may_take_next_transform_backward(model, l, may_chain && !forward_only, first_layer_sums_inputs)) {
      dims.back().next_transform_backward =
          (3 * layer.out_dim() + model.layer(l + 1).row_width()) * kFloat + kId + kSlot;
    }
  }
  return dims;
}

// What the layer's aggregation backward keeps in its workspace for a block of this size.
std::int64_t backward_workspace(const LayerDims& d, std::int64_t destinations, std::int64_t edges) {
  return d.layer->aggregate_backward_workspace(static_cast<vid_t>(destinations), static_cast<eid_t>(edges)) * kFloat;
}

// The offsets an aggregation over `rows` CSR rows narrows for the sparse library, in an allocation of their own.
std::int64_t narrowed_offsets(const LayerDims& d, std::int64_t rows) {
  return d.narrows_offsets ? arena_block_bytes((rows + 1) * static_cast<std::int64_t>(sizeof(std::int32_t))) : 0;
}

// Every device allocation is placed in whole arena units; a step makes at most this many, and each may waste
// up to one unit.
constexpr std::int64_t kAllocationsPerStep = 12;
constexpr std::int64_t kStepPadding = kAllocationsPerStep * kArenaAlignment;

// Device bytes of a transform step's inputs for `rows` rows, with `copies` dense copies of them (the rows; backward,
// their dropout and their gradient too). Sparse inputs take their block (no global ids) and their dropped weights,
// and on a library that narrows offsets the narrowed ones: the rows' forward, the columns' backward.
std::int64_t transform_input_bytes(const LayerDims& d, std::int64_t rows, std::int64_t copies) {
  if (!d.sparse_inputs) return rows * copies * d.in * kFloat;
  const std::int64_t entries = rows * d.max_row_nonzeros;
  const std::int64_t narrowed =
      d.inputs_narrow_offsets ? (std::max(rows, d.in) + 1) * static_cast<std::int64_t>(sizeof(std::int32_t)) : 0;
  return DeviceBlock::bytes_for(rows, d.in, entries, true, false) + entries * kFloat + narrowed;
}
// Input bytes a transform step moves as rows: sparse inputs move as a block.
std::int64_t streamed_input_bytes(const LayerDims& d, std::int64_t rows) {
  return d.sparse_inputs ? 0 : rows * d.in * kFloat;
}

// Whether the backward of layer `d` reads its transformed rows beside their gradients: then both are cached.
bool caches_rows_backward(const LayerDims& d) { return !d.forward_only && d.layer->aggregation().backward_reads_rows; }

// Device bytes one step of a layer needs besides the pools, for a subgraph of this size: the staging of its
// cache traffic (packed rows and their slots) plus the largest of its step kinds' buffers (two forward, and two
// backward but in an inference plan), each with its block, slot and id arrays, and the padding of its allocations.
std::int64_t step_bytes(const LayerDims& d, const ClosureSize& size) {
  const std::int64_t dst = size.vertices[0];
  const std::int64_t src = size.vertices[1];
  const std::int64_t edges = size.edges[0];
  const std::int64_t cached_tensors = caches_rows_backward(d) ? 2 : 1;
  const std::int64_t staging = 2 * src * (d.width * kFloat + kSlot) * cached_tensors;
  // A step's block travels packed and, unless the backend reads it as it lies, is expanded on the device: its
  // in-edges forward, its out-edges too backward.
  const BlockShape shape{.destinations = dst,
                         .sources = src,
                         .edges = edges,
                         .weights = d.weighted_blocks ? PackedWeights::kBothFactors : PackedWeights::kNone,
                         .source_ids = d.layer->aggregation().reads_source_ids,
                         .narrow_limit = d.narrow_source_limit};
  const auto expanded = [&](bool out_edges) {
    return d.reads_packed_blocks ? 0 : ExpandedBlock::bytes_for(shape, out_edges);
  };
  const std::int64_t block = PackedBlock::bytes_for(shape) + expanded(false);
  const std::int64_t block_backward = PackedBlock::bytes_for(shape) + expanded(true);
  const std::int64_t transform = transform_input_bytes(d, dst, 1) + dst * (d.width * kFloat + kId + kSlot);
  const std::int64_t loss_rows = d.packs_loss_rows ? dst * (d.out * kFloat + kSlot) : 0;
  // A layer that sums its inputs keeps their sums beside its outputs.
  const std::int64_t aggregate =
      block + src * kSlot + dst * (d.out + d.sums) * kFloat + narrowed_offsets(d, dst) + loss_rows;
  if (d.forward_only) return staging + std::max(transform, aggregate) + kStepPadding;
  const std::int64_t aggregate_backward = block_backward + 2 * src * kSlot + dst * d.out * kFloat + loss_rows +
                                          backward_workspace(d, dst, edges) + narrowed_offsets(d, src) +
                                          dst * d.next_transform_backward;
  // Inputs, their dropped copy and their gradient, the transformed-row gradients, and their ids and slots; and the
  // first layer's sums where this step takes its backward too.
  const std::int64_t transform_backward =
      transform_input_bytes(d, dst, 3) + dst * (d.width * kFloat + kId + kSlot) + dst * d.first_layer_sums * kFloat;
  return staging + std::max({transform, aggregate, aggregate_backward, transform_backward}) + kStepPadding;
}

// Bytes of a transform-only step over `rows` rows (rows a pass transforms but does not aggregate): a step
// whose subgraph has no edges, so never more than a step with the same rows as destinations.
std::int64_t transform_step_bytes(const LayerDims& d, std::int64_t rows) {
  return step_bytes(d, ClosureSize{{rows, rows}, {0}});
}

// The most rows, up to `rows`, whose transform-only step fits `limit`: step_bytes is a maximum of linear terms,
// so no one slope gives it.
std::int64_t transform_chunk_rows(const LayerDims& d, std::int64_t limit, std::int64_t rows) {
  std::int64_t fits = 0;
  std::int64_t too_many = rows + 1;
  while (too_many - fits > 1) {
    const std::int64_t mid = fits + (too_many - fits) / 2;
    (transform_step_bytes(d, mid) <= limit ? fits : too_many) = mid;
  }
  return fits;
}

// An exchange step's staging per row: the packed row and its slot.
std::int64_t exchange_row_bytes(const LayerDims& d) { return d.width * kFloat + kSlot; }

// The parameters on the device for the whole run, and in training their gradients, each allocation in whole
// arena units.
std::int64_t resident_bytes(const Model& model, bool forward_only) {
  std::int64_t bytes = 0;
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    bytes +=
        arena_block_bytes(layer.in_dim() * layer.row_width() * kFloat) + arena_block_bytes(layer.out_dim() * kFloat);
  }
  return forward_only ? bytes : 2 * bytes;
}

// How the recompute baseline sizes its subgraphs, as a split full-graph model is sized: as many destinations
// as fit on the device with their whole L-hop closure through every layer, in the half of the budget that is
// not pools.
std::int64_t closure_bytes(const std::vector<LayerDims>& dims, const ClosureSize& size) {
  const std::size_t layers = dims.size();
  std::int64_t bytes = transform_input_bytes(dims[0], size.vertices[layers], 1);
  for (std::size_t l = 0; l < layers; ++l) {
    const std::int64_t sources = size.vertices[layers - l];
    const std::int64_t destinations = size.vertices[layers - 1 - l];
    bytes += (2 * sources * dims[l].width + 2 * destinations * dims[l].out) * kFloat +
             backward_workspace(dims[l], destinations, size.edges[layers - 1 - l]);
  }
  return bytes;
}

bool unlimited(std::int64_t budget) { return budget <= 0 || budget == kUnlimited; }

std::vector<std::int64_t> out_degrees(const CsrGraph& graph) {
  std::vector<std::int64_t> degree(static_cast<std::size_t>(graph.num_vertices()), 0);
  for (const vid_t s : graph.sources) ++degree[static_cast<std::size_t>(s)];
  return degree;
}

// Tensor 2l holds layer l's transformed rows Z, tensor 2l+1 their gradient.
std::uint32_t z_tensor(std::size_t l) { return static_cast<std::uint32_t>(2 * l); }
std::uint32_t grad_tensor(std::size_t l) { return static_cast<std::uint32_t>(2 * l + 1); }

std::int64_t slots_for(std::int64_t bytes, std::int64_t row_bytes, std::int64_t rows) {
  return std::min(rows, bytes / row_bytes);
}

// The smallest budget: the parameters, plus a quarter of the rest for the smallest step.
std::int64_t minimum_budget(std::int64_t smallest_step, std::int64_t resident) {
  return kStepsPerBudget * smallest_step + resident;
}

std::string describe_minimum_budget(std::int64_t budget, std::size_t layer, std::int64_t smallest_step,
                                    std::int64_t resident) {
  const std::int64_t minimum = minimum_budget(smallest_step, resident);
  return fmt::format(
      "device memory budget {} is {} short: it must hold the parameters ({} bytes) and 4 steps of the smallest "
      "subgraph of layer {} ({} bytes for one vertex with all its in-edges, their rows, block, slots and ids); "
      "use --device-memory {} or more",
      format_bytes(budget), format_bytes(minimum - budget), resident, layer + 1, smallest_step,
      suggested_budget(minimum));
}

// The rows of a pass, listed in `order` (its graph in pass rows is given beside). Layer l aggregates the first
// out_rows[l] rows of the order and reads (transforms) the first in_rows[l]. With peers, the rows after the owned
// ones are mirrors, whose rows come from the exchange: transformed rows, or inputs that a layer which transforms
// its mirrors reads (in_rows[l] then counts them).
struct PassRows {
  std::span<const vid_t> order;
  std::vector<std::int64_t> in_rows;
  std::vector<std::int64_t> out_rows;
  std::span<const gid_t> global_id;
  std::span<const vid_t> boundary;  // owned rows other ranks mirror
  bool exchange = false;            // rows out_rows.back().. num_vertices are mirrors
  // Per layer, whether it transforms its mirrors' rows (Pass::transforms_mirrors): it reads every row then.
  std::vector<char> transforms_mirrors;
};

// Cuts rows into consecutive chunks of at most `rows_per_chunk` rows.
std::vector<std::vector<vid_t>> chunks_of(std::span<const vid_t> rows, std::int64_t rows_per_chunk) {
  std::vector<std::vector<vid_t>> chunks;
  for (std::size_t first = 0; first < rows.size(); first += static_cast<std::size_t>(rows_per_chunk)) {
    const auto chunk = rows.subspan(first, std::min(rows.size() - first, static_cast<std::size_t>(rows_per_chunk)));
    chunks.emplace_back(chunk.begin(), chunk.end());
  }
  return chunks;
}

// What rows_of_step lists, given whether the backward of the step's layer reads its Z rows too.
StepRows step_rows(const Pass& pass, std::size_t k, bool backward_reads_rows, std::span<const vid_t> sources) {
  const PlannedStep& s = pass.steps[k];
  const std::uint32_t z = z_tensor(s.layer);
  const std::uint32_t grad = grad_tensor(s.layer);
  // Every list planned is of distinct rows: a subgraph's sources, a chunk of the pass's rows, boundary rows or
  // mirrors. (A replay's placeholder sources are not, but only size its slot lists and are never planned.)
  const auto run = [](std::uint32_t tensor, std::span<const vid_t> rows) { return RowRun{tensor, rows, true}; };
  StepRows rows;
  switch (s.kind) {
    case StepKind::kTransform: rows.writes = run(z, pass.transform_chunks[s.layer][s.index]); break;
    case StepKind::kAggregate: rows.reads = run(z, sources); break;
    case StepKind::kAggregateBackward:
      if (backward_reads_rows) rows.reads = run(z, sources);
      // A layer that summed its inputs needs no gradient of them.
      if (!pass.sums_inputs(s.layer)) rows.accumulates = run(grad, sources);
      if (pass.takes_next_transform_backward(s.layer)) {
        rows.next_gradient_reads = run(grad_tensor(s.layer + 1), pass.transform_chunks[s.layer + 1][s.index]);
      }
      break;
    case StepKind::kTransformBackward: rows.reads = run(grad, pass.transform_chunks[s.layer][s.index]); break;
    case StepKind::kSendRows: rows.reads = run(z, pass.exchange[s.layer].send_rows[s.index]); break;
    case StepKind::kSendGradients: rows.reads = run(grad, pass.exchange[s.layer].send_gradients[s.index]); break;
    case StepKind::kReceiveGradients:
      rows.accumulates = run(grad, pass.exchange[s.layer].receive_gradients[s.index]);
      break;
  }
  return rows;
}

// Lists each step's rows in the pass's trace (pointing into its chunks and `sources_of(layer, subgraph)`), plans
// its cache with them, and clears the lists again, since what they point into may not outlive planning.
template <typename ReadsRows, typename SourcesOf>
void plan_trace_cache(Pass& pass, const SubgraphExecutorOptions& options, ReadsRows&& backward_reads_rows,
                      SourcesOf&& sources_of) {
  AccessTrace& trace = pass.trace;
  for (std::size_t k = 0; k < pass.steps.size(); ++k) {
    const PlannedStep& s = pass.steps[k];
    const bool aggregation = s.kind == StepKind::kAggregate || s.kind == StepKind::kAggregateBackward;
    const StepRows listed = step_rows(pass, k, backward_reads_rows(s.layer),
                                      aggregation ? sources_of(s.layer, s.index) : std::span<const vid_t>{});
    TraceStep& traced = trace.steps[k];
    if (!listed.reads.rows.empty()) traced.read_runs.push_back(listed.reads);
    if (!listed.writes.rows.empty()) traced.write_runs.push_back(listed.writes);
    if (!listed.accumulates.rows.empty()) traced.accumulate_runs.push_back(listed.accumulates);
    if (!listed.next_gradient_reads.rows.empty()) traced.read_runs.push_back(listed.next_gradient_reads);
  }
  const auto cache_start = std::chrono::steady_clock::now();
  pass.cache = plan_cache(trace, options.policy, options.cache_detail);
  spdlog::debug("plan: {} cache plan of {} steps in {:.2f} s", to_string(options.policy), trace.steps.size(),
                seconds_since(cache_start));
  for (TraceStep& traced : trace.steps) traced.read_runs = traced.write_runs = traced.accumulate_runs = {};
}

// Where layer l+1 transforms its mirrors, the boundary rows among the destinations of each of layer l's subgraphs
// whose outputs stay on the device (Pass::staying_boundary).
void note_staying_boundary_rows(Pass& pass, std::span<const vid_t> boundary) {
  std::vector<vid_t> boundary_index;  // per pass row: its index among the boundary rows, -1 where it is none
  for (std::size_t l = 0; l < pass.outputs_stay.size(); ++l) {
    if (!pass.mirrors_transformed(l + 1)) continue;
    if (boundary_index.empty()) {
      boundary_index.assign(static_cast<std::size_t>(pass.num_rows), -1);
      for (std::size_t i = 0; i < boundary.size(); ++i) {
        boundary_index[static_cast<std::size_t>(boundary[i])] = static_cast<vid_t>(i);
      }
    }
    pass.staying_boundary.resize(pass.outputs_stay.size());
    for (std::size_t k = 0; k < pass.outputs_stay[l].size(); ++k) {
      StayingBoundary& rows = pass.staying_boundary[l].emplace_back();
      if (!pass.output_stays(l, k)) continue;
      const std::span<const vid_t> destinations = pass.destinations(l, k);
      for (std::size_t i = 0; i < destinations.size(); ++i) {
        const vid_t index = boundary_index[static_cast<std::size_t>(destinations[i])];
        if (index < 0) continue;
        rows.positions.push_back(static_cast<vid_t>(i));
        rows.boundary_index.push_back(index);
      }
    }
  }
}

// In training, where the loss reads only some vertices' logits, the positions of those among each of the last layer's
// subgraphs' destinations (Pass::loss_positions).
void note_loss_positions(const SubgraphExecutorOptions& options, Pass& pass) {
  if (options.forward_only || options.loss_reads.empty()) return;
  const std::size_t last = pass.layer_parts.size() - 1;
  for (std::size_t k = 0; k < pass.layer_parts[last].size(); ++k) {
    std::vector<vid_t>& positions = pass.loss_positions.emplace_back();
    const std::span<const vid_t> destinations = pass.destinations(last, k);
    for (std::size_t i = 0; i < destinations.size(); ++i) {
      if (options.loss_reads[static_cast<std::size_t>(pass.vertex(destinations[i]))] != 0) {
        positions.push_back(static_cast<vid_t>(i));
      }
    }
  }
}

// Chains layer l to layer l+1 (Pass::chained) where a budget cuts them, on one rank's reuse pass (no exchange waits
// between them), and where each of layer l's subgraphs' destinations fits a transform step of layer l+1: layer l+1
// then transforms in chunks of those, and its own subgraphs keep their destinations apart.
void chain_layers(const EpochPlan& plan, const std::vector<LayerDims>& dims, const PassRows& rows, Pass& pass) {
  const std::size_t layers = dims.size();
  pass.chained.assign(layers - 1, 0);
  if (plan.options.device_budget == kUnlimited || !plan.options.chain_layers ||
      plan.options.mode != ExecutionMode::kReuse || rows.exchange) {
    return;
  }
  pass.own_destinations.resize(layers);
  for (std::size_t l = 0; l + 1 < layers; ++l) {
    // A layer that transforms rows it does not aggregate has chunks of those too.
    if (pass.transform_chunks[l + 1].size() != pass.layer_parts[l + 1].size()) continue;
    std::int64_t largest_transform = 0;
    for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
      largest_transform =
          std::max(largest_transform,
                   transform_step_bytes(dims[l + 1], static_cast<std::int64_t>(pass.destinations(l, k).size())));
    }
    if (largest_transform > plan.step_limit_bytes) continue;
    std::vector<std::vector<vid_t>> chunks;
    for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
      const std::span<const vid_t> destinations = pass.destinations(l, k);
      chunks.emplace_back(destinations.begin(), destinations.end());
    }
    pass.own_destinations[l + 1] = std::exchange(pass.transform_chunks[l + 1], std::move(chunks));
    pass.chained[l] = 1;
    pass.largest_step_bytes = std::max(pass.largest_step_bytes, largest_transform);
  }
}

// Plans one pass over `graph` (in pass rows): per layer, subgraphs over its destinations and transform chunks
// over its inputs, sized to the step limit; then the steps, their access trace and the cache plan. The pass keeps
// its subgraphs' blocks where they are small enough, and otherwise `graph`, to build them from as steps run.
Pass plan_pass(const EpochPlan& plan, const std::vector<LayerDims>& dims, PreparedGraph graph, const PassRows& rows,
               std::vector<vid_t> vertices, std::span<const std::int64_t> vertex_degree) {
  const std::size_t layers = dims.size();
  Pass pass;
  pass.vertices = std::move(vertices);
  pass.num_rows = graph.graph.num_vertices();
  pass.num_outputs = rows.out_rows.back();
  pass.aggregated_rows = *std::max_element(rows.out_rows.begin(), rows.out_rows.end());
  pass.layer_parts.resize(layers);
  pass.transform_chunks.resize(layers);
  pass.first_layer_sums_inputs = dims.front().sums_inputs;
  pass.transforms_mirrors = rows.transforms_mirrors;
  const bool weighted = graph.weighted();
  // Every subgraph's sources, while planning: the trace lists them.
  std::vector<std::vector<std::vector<vid_t>>> sources(layers);
  std::int64_t block_bytes = 0;
  {
    // Cuts layer l into subgraphs and lists their sources with `builder`; what it adds up goes to the layer's own.
    std::vector<std::int64_t> layer_block_bytes(layers, 0);
    std::vector<std::int64_t> layer_largest_step(layers, 0);
    const auto cut_layer = [&](std::size_t l, SubgraphBuilder& builder) {
      const auto dsts = rows.order.first(static_cast<std::size_t>(rows.out_rows[l]));
      std::int64_t& largest_step = layer_largest_step[l];
      // Each subgraph's sources are listed as the cut closes it, from the closure the cut has just marked.
      const auto list = [&](std::span<const vid_t> part_dsts, std::span<const vid_t> closure) {
        std::vector<vid_t>& listed = sources[l].emplace_back();
        const eid_t edges = builder.list_sources(part_dsts, closure, listed);
        const auto num_dst = static_cast<std::int64_t>(part_dsts.size());
        const auto num_src = static_cast<std::int64_t>(listed.size());
        largest_step = std::max(largest_step, step_bytes(dims[l], {{num_dst, num_src}, {edges}}));
        // A subgraph that reads a mirror must wait for the exchange; the others run while it is in flight.
        const bool reads_mirrors = rows.exchange && std::any_of(listed.begin(), listed.end(), [&](vid_t v) {
                                     return v >= static_cast<vid_t>(rows.in_rows[l]);
                                   });
        pass.layer_parts[l].push_back({static_cast<vid_t>(num_src), edges, reads_mirrors});
        layer_block_bytes[l] += host_block_bytes(num_dst, num_src, edges, weighted);
      };
      auto parts = partition_in_order(
          graph.graph, dsts, 1, [&](const ClosureSize& size) { return step_bytes(dims[l], size); },
          plan.step_limit_bytes,
          [&](std::int64_t minimum) {
            return describe_minimum_budget(plan.options.device_budget, l, minimum, plan.resident_bytes);
          },
          list);
      // A layer that is one subgraph (no budget cuts it) takes its rows in ascending order, the vertex order's
      // locality, so that they move and are read in place as one block: its destinations, which head its sources.
      // Cut subgraphs keep the order that cut them: sorting within them changes which rows the baseline policies'
      // ties evict.
      if (parts.size() == 1) {
        std::ranges::sort(parts.front());
        std::ranges::copy(parts.front(), sources[l].front().begin());
      }
      for (auto& part_dsts : parts) pass.transform_chunks[l].push_back(std::move(part_dsts));
      // Inputs that this layer does not aggregate (closure rows further out) are transformed in chunks of their
      // own. A one-row chunk never costs more than the smallest subgraph, which fits.
      const auto extra = rows.order.subspan(dsts.size(), static_cast<std::size_t>(rows.in_rows[l] - rows.out_rows[l]));
      const std::int64_t chunk_rows =
          transform_chunk_rows(dims[l], plan.step_limit_bytes, static_cast<std::int64_t>(extra.size()));
      NJ_EXPECTS(extra.empty() || chunk_rows > 0, "layer {} cannot transform one row within {} bytes", l + 1,
                 plan.step_limit_bytes);
      for (auto& chunk : chunks_of(extra, chunk_rows)) {
        largest_step = std::max(largest_step, transform_step_bytes(dims[l], static_cast<std::int64_t>(chunk.size())));
        pass.transform_chunks[l].push_back(std::move(chunk));
      }
    };
    // Layers share nothing but the graph: they are cut on OpenMP's threads, each with a builder of its own (the
    // 100M-edge graph's two layers: 6.3 s one after the other, 3.8 s side by side). No exception leaves the parallel
    // region; the first layer's that threw is rethrown, as one thread cutting them in order would have.
    const auto cut_start = std::chrono::steady_clock::now();
    const auto threads = static_cast<int>(std::min<std::size_t>(layers, std::max(1, omp_get_max_threads())));
    std::vector<std::exception_ptr> errors(layers);
#pragma omp parallel num_threads(threads)
    {
      std::optional<SubgraphBuilder> builder;
#pragma omp for schedule(dynamic, 1)
      for (std::size_t l = 0; l < layers; ++l) {
        try {
          if (!builder) builder.emplace(graph.graph, graph.weights(), rows.global_id, pass.vertices);
          cut_layer(l, *builder);
        } catch (...) {
          errors[l] = std::current_exception();
        }
      }
    }
    for (const std::exception_ptr& error : errors) {
      if (error) std::rethrow_exception(error);
    }
    spdlog::debug("plan: layers cut into subgraphs in {:.2f} s", seconds_since(cut_start));
    for (std::size_t l = 0; l < layers; ++l) {
      block_bytes += layer_block_bytes[l];
      pass.largest_step_bytes = std::max(pass.largest_step_bytes, layer_largest_step[l]);
    }
    chain_layers(plan, dims, rows, pass);
    note_loss_positions(plan.options, pass);
    if (block_bytes <= plan.options.kept_block_bytes) {
      SubgraphBuilder builder(graph.graph, graph.weights(), rows.global_id, pass.vertices);
      pass.blocks.resize(layers);
      for (std::size_t l = 0; l < layers; ++l) {
        for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
          pass.blocks[l].push_back(builder.build(pass.destinations(l, k)));
          std::vector<vid_t>().swap(sources[l][k]);
        }
      }
    }
  }

  const bool budgeted = plan.options.device_budget != kUnlimited;
  if (!budgeted) {
    pass.lasting = plan.options.mode == ExecutionMode::kReuse;
    // An inference plan's outputs all reach the host, where the caller reads them.
    for (std::size_t l = 0; l + 1 < layers && !plan.options.forward_only; ++l) {
      const auto& next = pass.transform_chunks[l + 1];
      std::vector<char>& stays = pass.outputs_stay.emplace_back(pass.layer_parts[l].size(), 0);
      for (std::size_t k = 0; k < stays.size() && k < next.size(); ++k) {
        stays[k] = static_cast<char>(std::ranges::equal(pass.destinations(l, k), next[k]));
      }
    }
    note_staying_boundary_rows(pass, rows.boundary);
  }
  // The input rows of layer l's transform chunk k come from the host each epoch, unless they are the features of a
  // lasting pass or the previous layer's outputs stay.
  const auto input_from_host = [&](std::size_t l, std::size_t k) {
    return l == 0 ? !pass.lasting : !pass.output_stays(l - 1, k);
  };

  AccessTrace& trace = pass.trace;
  for (std::size_t l = 0; l < layers; ++l) {
    trace.tensors.push_back({fmt::format("z{}", l), dims[l].width * kFloat, false});
    trace.tensors.push_back({fmt::format("grad_z{}", l), dims[l].width * kFloat, false});
  }
  if (plan.options.policy == CachePolicy::kDegree)
    trace.vertex_degree.assign(vertex_degree.begin(), vertex_degree.end());
  const std::size_t phases = plan.options.forward_only ? layers : 2 * layers;
  trace.capacity_rows.assign(phases, std::vector<std::int64_t>(trace.tensors.size(), 0));
  // Steps first; their rows, which point into the pass's chunks and the subgraphs' sources, once every list is
  // in place.
  auto add_step = [&](StepKind kind, std::size_t l, std::size_t index, std::uint32_t phase) {
    pass.steps.push_back({kind, static_cast<std::uint32_t>(l), static_cast<std::uint32_t>(index)});
    trace.steps.emplace_back().phase = phase;
  };
  // Exchange steps move packed rows through a staging buffer of their own, within the step limit and the pool.
  std::vector<vid_t> mirrors;
  if (rows.exchange) {
    for (auto v = static_cast<vid_t>(pass.num_outputs); v < graph.graph.num_vertices(); ++v) mirrors.push_back(v);
  }
  pass.exchange.resize(rows.exchange ? layers : 0);
  auto exchange_chunk_rows = [&](std::size_t l, std::uint32_t phase, std::uint32_t tensor) {
    const std::int64_t by_step = (plan.step_limit_bytes - kStepPadding) / exchange_row_bytes(dims[l]);
    const std::int64_t rows_per_chunk = std::min(by_step, trace.capacity_rows[phase][tensor]);
    NJ_EXPECTS(rows_per_chunk > 0, "layer {} cannot exchange one row within {} bytes", l + 1, plan.step_limit_bytes);
    return rows_per_chunk;
  };
  auto exchange_step_bytes = [&](std::size_t l, const std::vector<std::vector<vid_t>>& chunks) {
    for (const auto& chunk : chunks) {
      pass.largest_step_bytes =
          std::max(pass.largest_step_bytes,
                   static_cast<std::int64_t>(chunk.size()) * exchange_row_bytes(dims[l]) + kStepPadding);
    }
  };

  // A chained layer's rows pass through a pool of the previous layer's phase: one chunk at a time, taken from what
  // that layer's own pools may hold.
  const auto pass_through_pool = [&](std::size_t phase, std::uint32_t tensor, std::size_t l) {
    std::size_t largest_chunk = 0;
    for (const auto& chunk : pass.transform_chunks[l]) largest_chunk = std::max(largest_chunk, chunk.size());
    trace.capacity_rows[phase][tensor] = static_cast<std::int64_t>(largest_chunk);
    return static_cast<std::int64_t>(largest_chunk) * dims[l].width * kFloat;
  };
  const auto add_transform = [&](std::size_t l, std::size_t k, std::uint32_t phase) {
    add_step(StepKind::kTransform, l, k, phase);
    if (input_from_host(l, k)) {
      pass.stream_h2d_bytes +=
          streamed_input_bytes(dims[l], static_cast<std::int64_t>(pass.transform_chunks[l][k].size()));
    }
  };
  // Within a budget a first layer that sums its inputs takes its gradients in the second layer's transform backward,
  // where ∂L/∂Y of its rows is computed (Pass::first_layer_backward_fused).
  pass.first_layer_backward_fused = pass.first_layer_sums_inputs && !pass.lasting && layers > 1 &&
                                    !pass.mirrors_transformed(1) && !plan.options.forward_only;
  pass.outputs_recomputed.assign(layers - 1, 0);
  for (std::size_t l = 0; l + 1 < layers && !plan.options.forward_only; ++l) {
    const bool from_sums = l == 0 && pass.first_layer_backward_fused && computes_outputs_again(plan.options);
    pass.outputs_recomputed[l] =
        static_cast<char>(pass.chained_to_next(l) && (from_sums || dims[l].next_transform_backward > 0));
  }
  for (std::size_t l = 0; l < layers; ++l) {
    const auto phase = static_cast<std::uint32_t>(l);
    const std::int64_t passing_through = pass.chained_to_next(l) ? pass_through_pool(phase, z_tensor(l + 1), l + 1) : 0;
    trace.capacity_rows[phase][z_tensor(l)] =
        slots_for(plan.pool_bytes - passing_through, dims[l].width * kFloat, pass.num_rows);
    const auto& chunks = pass.transform_chunks[l];
    ExchangePoints points;
    // A layer that transforms its mirrors receives their inputs while it transforms its own rows; its mirrors' chunks,
    // its last, wait for them.
    const bool transforms_mirrors = pass.mirrors_transformed(l);
    points.start = pass.steps.size();
    // A layer chained to the previous one was transformed in its phase.
    for (std::size_t k = 0; k < chunks.size() && !(l > 0 && pass.chained_to_next(l - 1)); ++k) {
      if (transforms_mirrors && k == pass.layer_parts[l].size()) points.finish = pass.steps.size();
      add_transform(l, k, phase);
    }
    if (transforms_mirrors && chunks.size() <= pass.layer_parts[l].size()) points.finish = pass.steps.size();
    if (rows.exchange && !transforms_mirrors) {
      LayerExchange& exchange = pass.exchange[l];
      exchange.send_rows = chunks_of(rows.boundary, exchange_chunk_rows(l, phase, z_tensor(l)));
      exchange_step_bytes(l, exchange.send_rows);
      for (std::size_t k = 0; k < exchange.send_rows.size(); ++k) {
        add_step(StepKind::kSendRows, l, k, phase);
        pass.stream_d2h_bytes += static_cast<std::int64_t>(exchange.send_rows[k].size()) * dims[l].width * kFloat;
      }
    }
    if (!transforms_mirrors) points.start = pass.steps.size();
    // Aggregations run in the reverse order, so that the rows transformed last, still resident, are read first;
    // those that read mirrors after the others, once the exchange is complete.
    const auto& parts = pass.layer_parts[l];
    for (const bool after_exchange : {false, true}) {
      if (after_exchange && !transforms_mirrors) points.finish = pass.steps.size();
      for (std::size_t k = parts.size(); k-- > 0;) {
        if (parts[k].reads_mirror != after_exchange) continue;
        add_step(StepKind::kAggregate, l, k, phase);
        // Within a budget the sums of a first layer's inputs wait on the host for its backward half.
        if (dims[l].sums_inputs && !pass.lasting && !plan.options.forward_only) {
          pass.stream_d2h_bytes += static_cast<std::int64_t>(pass.destinations(l, k).size()) * dims[l].sums * kFloat;
        }
        // Without a budget outputs that stay leave for the host only where the next layer's exchange sends them;
        // within one, where the backward half does not compute them again. Of the logits, those the loss reads.
        std::size_t downloaded = pass.destinations(l, k).size();
        if (l + 1 == layers && !plan.options.forward_only) {
          downloaded = pass.loss_rows(k);
        } else if (pass.output_recomputed(l)) {
          downloaded = 0;
        } else if (pass.output_stays(l, k) && !budgeted) {
          downloaded = pass.staying_boundary_rows(l, k).positions.size();
        }
        pass.stream_d2h_bytes += static_cast<std::int64_t>(downloaded) * dims[l].out * kFloat;
        if (pass.chained_to_next(l)) add_transform(l + 1, k, phase);
      }
    }
    if (points.finish < pass.steps.size()) trace.steps[points.finish].fence = true;
    pass.exchange_points.push_back(points);
    pass.rows_computed += rows.out_rows[l];
  }
  pass.forward_steps = pass.steps.size();
  const auto add_transform_backward = [&](std::size_t l, std::size_t k, std::uint32_t phase) {
    add_step(StepKind::kTransformBackward, l, k, phase);
    const auto chunk_rows = static_cast<std::int64_t>(pass.transform_chunks[l][k].size());
    // Without a budget the inputs the forward transform uploaded are still on the device; the second layer's, where
    // they are computed again from the first layer's sums, on the device.
    if (budgeted && !(l == 1 && pass.output_recomputed(0))) {
      pass.stream_h2d_bytes += streamed_input_bytes(dims[l], chunk_rows);
    }
    if (l == 1 && pass.first_layer_backward_fused) {
      pass.stream_h2d_bytes += chunk_rows * dims[0].sums * kFloat;  // the sums, not ∂L/∂Y down and up again
    } else if (l > 0 && input_from_host(l, k)) {
      pass.stream_d2h_bytes += chunk_rows * dims[l].in * kFloat;
    }
  };
  // Whether layer l+1's transform backward runs in layer l's backward phase (Pass::chained): where layer l has an
  // aggregation backward to hand the output gradients to.
  const auto gradients_chained = [&](std::size_t l) { return pass.chained_to_next(l) && !pass.sums_inputs(l); };
  for (std::size_t l = layers; l-- > 0 && !plan.options.forward_only;) {
    const auto phase = static_cast<std::uint32_t>(layers + (layers - 1 - l));
    if (l == 0 && pass.first_layer_backward_fused) {  // a phase of no steps, which keeps the phases' indices
      pass.exchange_points.push_back({pass.steps.size(), pass.steps.size()});
      continue;
    }
    // A layer that summed its inputs takes its weight gradient from the sums its forward kept and needs no gradient
    // of the inputs: no pool, no exchange, no transform backward (its exchange points stay, empty, so that phases
    // keep their index; advance_exchange skips them).
    const bool input_gradients = !dims[l].sums_inputs;
    if (input_gradients) {
      const std::int64_t cached_tensors = caches_rows_backward(dims[l]) ? 2 : 1;
      const std::int64_t passing_through =
          gradients_chained(l) ? pass_through_pool(phase, grad_tensor(l + 1), l + 1) : 0;
      trace.capacity_rows[phase][grad_tensor(l)] =
          slots_for((plan.pool_bytes - passing_through) / cached_tensors, dims[l].width * kFloat, pass.num_rows);
      if (caches_rows_backward(dims[l])) {
        trace.capacity_rows[phase][z_tensor(l)] = trace.capacity_rows[phase][grad_tensor(l)];
      }
    }
    // A layer that transforms its mirrors sends the gradients of their inputs once its mirrors' chunks are through
    // its transform backward (their chunks, its last, run first), and adds what it receives to the previous layer's
    // output gradients on the host before that layer's backward reads them.
    const bool transforms_mirrors = pass.mirrors_transformed(l);
    const bool exchanges = rows.exchange && input_gradients && !transforms_mirrors;
    // Subgraphs that read mirrors first, so that the mirrors' gradients are complete and leave early; the others
    // run while they travel.
    const auto& parts = pass.layer_parts[l];
    ExchangePoints points;
    for (const bool reading_mirrors : {true, false}) {
      for (std::size_t k = 0; k < parts.size(); ++k) {
        if (parts[k].reads_mirror != reading_mirrors) continue;
        if (gradients_chained(l) && !pass.takes_next_transform_backward(l)) add_transform_backward(l + 1, k, phase);
        add_step(StepKind::kAggregateBackward, l, k, phase);
        if (dims[l].sums_inputs && !pass.lasting) {
          pass.stream_h2d_bytes += static_cast<std::int64_t>(pass.destinations(l, k).size()) * dims[l].sums * kFloat;
        }
        // Output gradients that stayed take only what the next layer's mirrors sent for them from the host; the
        // logits' only those the loss read.
        std::size_t uploaded = pass.destinations(l, k).size();
        if (l + 1 == layers) {
          uploaded = pass.loss_rows(k);
        } else if (pass.output_stays(l, k)) {
          uploaded = pass.staying_boundary_rows(l, k).positions.size();
        }
        pass.stream_h2d_bytes += static_cast<std::int64_t>(uploaded) * dims[l].out * kFloat;
      }
      if (!reading_mirrors || !exchanges) continue;
      LayerExchange& exchange = pass.exchange[l];
      exchange.send_gradients = chunks_of(mirrors, exchange_chunk_rows(l, phase, grad_tensor(l)));
      exchange_step_bytes(l, exchange.send_gradients);
      for (std::size_t k = 0; k < exchange.send_gradients.size(); ++k) {
        add_step(StepKind::kSendGradients, l, k, phase);
        pass.stream_d2h_bytes += static_cast<std::int64_t>(exchange.send_gradients[k].size()) * dims[l].width * kFloat;
      }
      points.start = pass.steps.size();
    }
    if (exchanges) {
      LayerExchange& exchange = pass.exchange[l];
      exchange.receive_gradients = chunks_of(rows.boundary, exchange_chunk_rows(l, phase, grad_tensor(l)));
      exchange_step_bytes(l, exchange.receive_gradients);
      points.finish = pass.steps.size();
      std::int64_t first = 0;
      for (std::size_t k = 0; k < exchange.receive_gradients.size(); ++k) {
        add_step(StepKind::kReceiveGradients, l, k, phase);
        trace.steps.back().fence = k == 0;
        exchange.receive_first.push_back(first);
        const auto chunk_rows = static_cast<std::int64_t>(exchange.receive_gradients[k].size());
        first += chunk_rows;
        pass.stream_h2d_bytes += chunk_rows * dims[l].width * kFloat;
      }
    } else {
      points.start = points.finish = pass.steps.size();
    }
    // A layer whose transform backward is chained to the previous layer's runs it in that layer's phase.
    const bool transformed_here = input_gradients && !(l > 0 && gradients_chained(l - 1));
    for (std::size_t k = pass.transform_chunks[l].size(); k-- > 0 && transformed_here;) {
      if (transforms_mirrors && k + 1 == pass.layer_parts[l].size()) points.start = pass.steps.size();
      add_transform_backward(l, k, phase);
    }
    if (transforms_mirrors) points.finish = pass.steps.size();
    pass.exchange_points.push_back(points);
  }
  plan_trace_cache(
      pass, plan.options, [&](std::size_t l) { return dims[l].layer->aggregation().backward_reads_rows; },
      [&](std::size_t l, std::size_t k) {
        return pass.keeps_blocks() ? std::span<const vid_t>(pass.blocks[l][k].sources)
                                   : std::span<const vid_t>(sources[l][k]);
      });
  // A pass that keeps its blocks may plan its cache again (resize_pools), and the degree policy with the degrees.
  if (!pass.keeps_blocks() || plan.options.device_budget == kUnlimited)
    std::vector<std::int64_t>().swap(trace.vertex_degree);
  if (!pass.keeps_blocks()) pass.graph = std::move(graph);
  return pass;
}

// The step limit every layer needs: its largest one-vertex subgraph (one vertex with all its in-edges), and
// the layer where that is largest.
struct SmallestStep {
  std::size_t layer = 0;
  std::int64_t bytes = 0;
};

SmallestStep smallest_step(const std::vector<LayerDims>& dims, const CsrGraph& prepared) {
  // Every vertex is some subgraph's destination; in id order, their in-edges are read front to back.
  std::vector<vid_t> vertices(static_cast<std::size_t>(prepared.num_vertices()));
  std::iota(vertices.begin(), vertices.end(), 0);
  SmallestStep largest;
  for (std::size_t l = 0; l < dims.size(); ++l) {
    const std::int64_t bytes = largest_single_vertex_cost(
        prepared, vertices, 1, [&](const ClosureSize& size) { return step_bytes(dims[l], size); });
    if (bytes > largest.bytes) largest = {l, bytes};
  }
  return largest;
}

// The order subgraphs are cut in, in three runs: the owned vertices that read no mirror, those that read one,
// then the mirrors (which no layer aggregates). Most subgraphs so fall wholly in the first run and can aggregate
// while the mirrors' rows are still in flight. One rank has only the first run.
std::vector<vid_t> owned_cut_order(const CsrGraph& prepared, const LocalGraph& local, CutOrder cut) {
  std::vector<vid_t> order;
  if (cut == CutOrder::kBreadthFirst) {
    order = locality_order(prepared);
  } else {
    order.resize(static_cast<std::size_t>(prepared.num_vertices()));
    std::iota(order.begin(), order.end(), vid_t{0});
  }
  if (local.num_mirrors() == 0) return order;  // every vertex is owned and none reads a mirror
  const vid_t owned = local.num_owned;
  std::stable_partition(order.begin(), order.end(), [&](vid_t v) { return v < owned && !local.reads_mirror(v); });
  std::stable_partition(order.begin(), order.end(), [&](vid_t v) { return v < owned; });
  return order;
}

// What a lasting pass keeps on the device for the whole run besides its steps: every subgraph's block and the
// features, `features` floats a row. (A step's bytes count its block once; a model of more than two layers keeps
// more blocks than two steps hold.)
std::int64_t lasting_bytes(const Pass& pass, const LayerDims& first) {
  std::int64_t bytes = 0;
  for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) {
    for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
      const PartSize& size = pass.layer_parts[l][k];
      const bool weighted = pass.keeps_blocks() ? !pass.blocks[l][k].block.edge_weight.empty() : pass.graph.weighted();
      bytes += DeviceBlock::bytes_for(static_cast<std::int64_t>(pass.destinations(l, k).size()), size.num_src,
                                      size.num_edges, weighted) +
               kStepPadding;
    }
  }
  for (const auto& chunk : pass.transform_chunks.front()) {
    const auto rows = static_cast<std::int64_t>(chunk.size());
    bytes += arena_block_bytes(first.sparse_inputs
                                   ? DeviceBlock::bytes_for(rows, first.in, rows * first.max_row_nonzeros, true, false)
                                   : rows * first.in * kFloat);
  }
  return bytes;
}

// Adds a planned pass to the epoch's totals.
void add_to_totals(EpochPlan& plan, const Pass& pass) {
  plan.rows_computed += pass.rows_computed;
  plan.largest_step_bytes = std::max(plan.largest_step_bytes, pass.largest_step_bytes);
  plan.largest_pass_rows = std::max(plan.largest_pass_rows, pass.num_rows);
  plan.largest_aggregated_rows = std::max(plan.largest_aggregated_rows, pass.aggregated_rows);
  plan.num_steps += static_cast<std::int64_t>(pass.steps.size());
  plan.peak_bytes_bound = std::max(plan.peak_bytes_bound, pass.largest_pool_bytes());
  plan.cache_h2d_bytes += pass.cache.h2d_bytes;
  plan.cache_d2h_bytes += pass.cache.d2h_bytes;
  plan.h2d_bytes += pass.cache.h2d_bytes + pass.stream_h2d_bytes;
  plan.d2h_bytes += pass.cache.d2h_bytes + pass.stream_d2h_bytes;
  plan.cache_hits += pass.cache.hits;
  plan.cache_misses += pass.cache.misses;
}

}  // namespace

BlockShape packed_block_shape(const Model& model, const Pass& pass, std::size_t layer, std::size_t part,
                              std::int64_t narrow_limit) {
  const bool ids = model.layer(layer).aggregation().reads_source_ids;
  if (pass.keeps_blocks()) return PackedBlock::shape_of(pass.blocks[layer][part].block, narrow_limit, ids);
  const PartSize& size = pass.layer_parts[layer][part];
  return {.destinations = static_cast<std::int64_t>(pass.destinations(layer, part).size()),
          .sources = size.num_src,
          .edges = size.num_edges,
          .weights = pass.graph.packed_weights(),
          .source_ids = ids,
          .narrow_limit = narrow_limit};
}

std::int64_t host_block_bytes(std::int64_t destinations, std::int64_t sources, std::int64_t edges, bool weighted) {
  // Sources and their global ids, out-edge offsets and vertex factors; per in-edge its source, and per out-edge its
  // destination and in-edge position; the weights in both orders; the in-edge offsets.
  return sources * (kSlot + kId + 8 + (weighted ? kFloat : 0)) +
         edges * (kSlot + kSlot + 8 + (weighted ? 2 * kFloat : 0)) + (destinations + 2) * 8;
}

namespace {

// The sources of the blocks that the first pass makes stay on the device for the run (all of a lasting pass's):
// where the pass builds its blocks, the executor keeps a copy of each one's for the steps that read it.
std::int64_t run_block_sources(const Pass* pass) {
  if (pass == nullptr || pass->keeps_blocks()) return 0;
  std::int64_t sources = 0;
  for (std::size_t l = 0; l < pass->layer_parts.size(); ++l) {
    for (std::size_t k = 0; k < pass->layer_parts[l].size(); ++k) {
      if (pass->lasting || pass->block_stays(l, k)) sources += pass->layer_parts[l][k].num_src;
    }
  }
  return sources;
}

}  // namespace

std::int64_t executor_host_bytes(const EpochPlan& plan, std::size_t layers, int threads) {
  // Where each row of each trace tensor is on the device.
  const std::int64_t rows = plan.largest_pass_rows;
  std::int64_t bytes = 2 * static_cast<std::int64_t>(layers) * rows * kSlot;
  // The largest block on the host and the most sources of a block, over the passes (a recompute plan's passes are
  // cut as they run: its sources are at most its largest pass's rows).
  std::int64_t largest_block = 0;
  std::int64_t most_sources = plan.passes.empty() ? rows : 0;
  for (const Pass& pass : plan.passes) {
    for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) {
      for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
        const PartSize& size = pass.layer_parts[l][k];
        largest_block =
            std::max(largest_block, host_block_bytes(static_cast<std::int64_t>(pass.destinations(l, k).size()),
                                                     size.num_src, size.num_edges, pass.graph.weighted()));
        most_sources = std::max<std::int64_t>(most_sources, size.num_src);
      }
    }
  }
  // Within a budget, where the backend does not read packed blocks as they lie, each step expands its block, and the
  // CPU device places the out-edges from a cursor per source and thread (CpuBackend::expand_block). (Reading them as
  // they lie, its transposes count sources in at most 1,025 buckets per thread.)
  const bool expands = plan.options.device_budget != kUnlimited && !plan.options.library.reads_packed_blocks;
  if (expands) bytes += threads * most_sources * 8;
  const bool builds = !plan.closures.empty() || (!plan.passes.empty() && !plan.passes.front().keeps_blocks());
  if (!builds) return bytes;
  bytes += run_block_sources(plan.passes.empty() ? nullptr : &plan.passes.front()) *
           static_cast<std::int64_t>(sizeof(vid_t));
  // The builder: a local id per vertex, a bitmap per thread, another of the destinations, and ranks; the largest
  // block it builds, and a cursor per source of it and thread.
  const std::int64_t words = (rows + 63) / 64;
  return bytes + rows * kSlot + (1 + threads) * words * 8 + words * 4 + largest_block + threads * most_sources * 8;
}

void resize_pools(const Model& model, EpochPlan& plan, std::vector<std::vector<std::int64_t>> capacity_rows) {
  NJ_EXPECTS(plan.passes.size() == 1 && plan.passes.front().keeps_blocks(),
             "only a plan of one pass that keeps its blocks can plan its cache again");
  Pass& pass = plan.passes.front();
  const std::int64_t pools_before = pass.largest_pool_bytes();
  {
    const CachePlan& before = pass.cache;  // replaced below
    plan.cache_h2d_bytes -= before.h2d_bytes;
    plan.cache_d2h_bytes -= before.d2h_bytes;
    plan.h2d_bytes -= before.h2d_bytes;
    plan.d2h_bytes -= before.d2h_bytes;
    plan.cache_hits -= before.hits;
    plan.cache_misses -= before.misses;
  }
  pass.trace.capacity_rows = std::move(capacity_rows);
  plan_trace_cache(
      pass, plan.options, [&](std::size_t l) { return model.layer(l).aggregation().backward_reads_rows; },
      [&](std::size_t l, std::size_t k) { return std::span<const vid_t>(pass.blocks[l][k].sources); });
  const CachePlan& after = pass.cache;
  plan.cache_h2d_bytes += after.h2d_bytes;
  plan.cache_d2h_bytes += after.d2h_bytes;
  plan.h2d_bytes += after.h2d_bytes;
  plan.d2h_bytes += after.d2h_bytes;
  plan.cache_hits += after.hits;
  plan.cache_misses += after.misses;
  plan.peak_bytes_bound += pass.largest_pool_bytes() - pools_before;
}

StepRows rows_of_step(const Model& model, const Pass& pass, std::size_t step, std::span<const vid_t> sources) {
  return step_rows(pass, step, model.layer(pass.steps[step].layer).aggregation().backward_reads_rows, sources);
}

PassSubgraphs::PassSubgraphs(const Pass& pass, std::span<const gid_t> global_id) : pass_(pass) {
  if (!pass.keeps_blocks()) builder_.emplace(pass.graph.graph, pass.graph.weights(), global_id, pass.vertices);
}

const Subgraph& PassSubgraphs::get(std::size_t layer, std::size_t part) {
  if (pass_.keeps_blocks()) return pass_.blocks[layer][part];
  builder_->build(pass_.destinations(layer, part), built_);
  return built_;
}

ClosurePlanner::ClosurePlanner(const Model& model, const LocalGraph& local)
    : model_(model),
      prepared_(model.prepare(local)),
      global_id_(local.global_id),
      out_degree_(out_degrees(prepared_.graph)),
      row_of_(static_cast<std::size_t>(prepared_.graph.num_vertices()), -1),
      lister_(prepared_.graph, static_cast<int>(model.num_layers())) {
  NJ_EXPECTS(local.peers.empty(), "closure passes cross ranks");
}

// The pass rows are the closure's vertices, the destinations first and then each hop further out; its graph
// holds the in-edges of the rows some layer aggregates, with the whole graph's edge weights (its rows' factors).
Pass ClosurePlanner::plan(const EpochPlan& plan, std::span<const vid_t> dsts) {
  const auto dims = layer_dims(model_, plan.options.library, prepared_, plan.options.forward_only, plan.options.inputs);
  const std::size_t layers = dims.size();
  std::vector<std::int64_t> level_sizes;
  std::vector<vid_t> closure = lister_.list(dsts, level_sizes);
  for (std::size_t r = 0; r < closure.size(); ++r)
    row_of_[static_cast<std::size_t>(closure[r])] = static_cast<vid_t>(r);

  CsrGraph local;
  std::vector<float> local_factors;
  std::vector<std::int64_t> local_degree;
  local.offsets.reserve(closure.size() + 1);
  const auto aggregated = level_sizes[layers - 1];
  for (std::size_t r = 0; r < closure.size(); ++r) {
    const auto v = static_cast<std::size_t>(closure[r]);
    local_degree.push_back(out_degree_[v]);
    if (prepared_.weighted()) local_factors.push_back(prepared_.vertex_factor[v]);
    if (static_cast<std::int64_t>(r) < aggregated) {
      for (eid_t e = prepared_.graph.offsets[v]; e < prepared_.graph.offsets[v + 1]; ++e) {
        local.sources.push_back(
            row_of_[static_cast<std::size_t>(prepared_.graph.sources[static_cast<std::size_t>(e)])]);
      }
    }
    local.offsets.push_back(local.num_edges());
  }
  for (const vid_t v : closure) row_of_[static_cast<std::size_t>(v)] = -1;

  std::vector<vid_t> order(closure.size());
  std::iota(order.begin(), order.end(), 0);
  PassRows rows{order, {}, {}, global_id_, {}, false, {}};
  for (std::size_t l = 0; l < layers; ++l) {
    rows.in_rows.push_back(level_sizes[layers - l]);
    rows.out_rows.push_back(level_sizes[layers - 1 - l]);
  }
  return plan_pass(plan, dims, PreparedGraph{std::move(local), std::move(local_factors), prepared_.factor_of}, rows,
                   std::move(closure), local_degree);
}

bool plan_sums_first_layer_inputs(const Model& model, const SubgraphExecutorOptions& options) {
  // Reuse's pass runs its first layer in the order in-memory training does: without a budget the sums stay on the
  // device until the backward half, within one they go to the host and back.
  return options.mode == ExecutionMode::kReuse && aggregates_before_transform(model.layer(0), 0, options.inputs.sparse);
}

constexpr EnumNames<RecomputeOutputs, 3> kRecomputeOutputsNames{
    "outputs computed again",
    {{{RecomputeOutputs::kAuto, "auto"}, {RecomputeOutputs::kOn, "on"}, {RecomputeOutputs::kOff, "off"}}}};
constexpr EnumNames<ExecutionMode, 2> kExecutionModeNames{
    "execution mode", {{{ExecutionMode::kReuse, "reuse"}, {ExecutionMode::kRecompute, "recompute"}}}};
constexpr EnumNames<CutOrder, 2> kCutOrderNames{
    "cut order", {{{CutOrder::kBreadthFirst, "breadth-first"}, {CutOrder::kVertexIds, "vertex-id"}}}};

ExecutionMode parse_execution_mode(const std::string& text) { return kExecutionModeNames.parse(text); }
RecomputeOutputs parse_recompute_outputs(const std::string& text) { return kRecomputeOutputsNames.parse(text); }
const char* to_string(RecomputeOutputs choice) { return kRecomputeOutputsNames.name(choice); }
const char* to_string(ExecutionMode mode) { return kExecutionModeNames.name(mode); }
const char* to_string(CutOrder order) { return kCutOrderNames.name(order); }

std::int64_t minimum_device_budget(const Model& model, const LocalGraph& local, const LibraryMemory& library,
                                   bool forward_only, const InputShape& inputs) {
  const PreparedGraph prepared = model.prepare(local);
  // Either order of the first layer (reuse may sum its inputs first, the recompute baseline does not).
  std::int64_t smallest = 0;
  for (const bool sums_inputs : {false, aggregates_before_transform(model.layer(0), 0, inputs.sparse)}) {
    smallest = std::max(
        smallest,
        smallest_step(layer_dims(model, library, prepared, forward_only, inputs, sums_inputs), prepared.graph).bytes);
  }
  return minimum_budget(smallest, resident_bytes(model, forward_only));
}

EpochPlan plan_epoch(const Model& model, const LocalGraph& local, const SubgraphExecutorOptions& options) {
  NJ_REQUIRE(options.mode == ExecutionMode::kReuse || local.peers.empty(),
             "the recompute baseline runs on one rank only (its closures cross ranks); use --execution reuse or "
             "in-memory");
  NJ_REQUIRE(options.loss_reads.empty() || std::cmp_equal(options.loss_reads.size(), local.num_owned),
             "the loss reads {} vertices' logits of {} owned", options.loss_reads.size(), local.num_owned);
  EpochPlan plan;
  plan.options = options;
  const bool no_budget = unlimited(options.device_budget);
  if (no_budget) plan.options.device_budget = kUnlimited;
  // The parameters stay on the device; the rest is split. Quarters of the largest int64 still add up without
  // overflow.
  plan.resident_bytes = resident_bytes(model, options.forward_only);
  const std::int64_t budget = no_budget ? std::numeric_limits<std::int64_t>::max() / 4
                                        : std::max<std::int64_t>(0, options.device_budget - plan.resident_bytes);
  plan.pool_bytes = budget / 2;
  plan.step_limit_bytes = budget / kStepsPerBudget;
  plan.staging_limit_bytes = std::max<std::int64_t>(0, plan.step_limit_bytes - kStepPadding);

  const auto prepare_start = std::chrono::steady_clock::now();
  PreparedGraph prepared = model.prepare(local);
  spdlog::debug("plan: graph prepared for the model in {:.2f} s", seconds_since(prepare_start));
  const bool may_chain = !no_budget && options.chain_layers && computes_outputs_again(options) &&
                         options.mode == ExecutionMode::kReuse && local.peers.empty();
  const auto dims_of = [&](bool chain) {
    return layer_dims(model, options.library, prepared, options.forward_only, options.inputs,
                      plan_sums_first_layer_inputs(model, options), options.narrow_source_limit, chain);
  };
  auto dims = dims_of(may_chain);
  const std::size_t layers = dims.size();
  const std::int64_t owned = local.num_owned;
  // Both modes run every layer's subgraphs; a closure pass's subgraphs are cut from the same in-edges. A
  // breadth-first order is one sequential search over the graph, the smallest step another pass over it: side by
  // side.
  std::vector<vid_t> order;
  SmallestStep smallest;
  const auto order_start = std::chrono::steady_clock::now();
  side_by_side([&] { order = owned_cut_order(prepared.graph, local, options.cut_order); },
               [&] { smallest = smallest_step(dims, prepared.graph); });
  spdlog::debug("plan: {} cut order in {:.2f} s", to_string(options.cut_order), seconds_since(order_start));
  if (may_chain && smallest.bytes > plan.step_limit_bytes) {
    // Too small a budget for an aggregation backward to take the next layer's transform backward too.
    dims = dims_of(false);
    smallest = smallest_step(dims, prepared.graph);
  }
  if (smallest.bytes > plan.step_limit_bytes) {
    throw InputError(
        describe_minimum_budget(plan.options.device_budget, smallest.layer, smallest.bytes, plan.resident_bytes));
  }
  if (options.mode == ExecutionMode::kReuse) {
    const std::vector<vid_t> boundary = local.boundary_rows();
    PassRows rows{order,
                  std::vector<std::int64_t>(layers, owned),
                  std::vector<std::int64_t>(layers, owned),
                  local.global_id,
                  boundary,
                  !local.peers.empty(),
                  std::vector<char>(layers, 0)};
    for (std::size_t l = 0; l < layers && rows.exchange; ++l) {
      if (!transforms_mirrors(model, l)) continue;
      rows.transforms_mirrors[l] = 1;
      rows.in_rows[l] = local.num_local();
    }
    // Only the degree policy reads out-degrees.
    const std::vector<std::int64_t> degree =
        options.policy == CachePolicy::kDegree ? out_degrees(prepared.graph) : std::vector<std::int64_t>{};
    add_to_totals(plan, plan.passes.emplace_back(plan_pass(plan, dims, std::move(prepared), rows, {}, degree)));
  } else {
    plan.closures = partition_in_order(
        prepared.graph, order, static_cast<int>(layers),
        [&](const ClosureSize& size) { return closure_bytes(dims, size); }, budget - plan.pool_bytes, nullptr);
    ClosurePlanner planner(model, local);
    for (const auto& dsts : plan.closures) add_to_totals(plan, planner.plan(plan, dsts));
  }
  plan.peak_bytes_bound += 2 * plan.largest_step_bytes + plan.resident_bytes;
  if (!plan.passes.empty() && plan.passes.front().lasting)
    plan.peak_bytes_bound += lasting_bytes(plan.passes.front(), dims.front());
  plan.rows_needed = static_cast<std::int64_t>(layers) * owned;
  return plan;
}

}  // namespace nj
