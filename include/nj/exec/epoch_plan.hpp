#pragma once
// The plan of an epoch of the subgraph executor, made once before training and replayed every epoch: the passes
// (reuse: one; the recompute baseline: one per subgraph's closure), each cut into steps sized to the device
// budget, with the cache plan of what stays on the device between them (nj/scheduler/cache_plan.hpp) and the
// exchange points with other ranks. docs/executor.md describes how it is made.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nj/device/planning_device.hpp"
#include "nj/exec/sparse_inputs.hpp"
#include "nj/exec/subgraph.hpp"
#include "nj/kernels/backend.hpp"
#include "nj/kernels/device_block.hpp"
#include "nj/model/model.hpp"
#include "nj/scheduler/cache_plan.hpp"

namespace nj {

enum class ExecutionMode { kReuse, kRecompute };
ExecutionMode parse_execution_mode(const std::string& text);
const char* to_string(ExecutionMode mode);

// A pass keeps its subgraphs' blocks on the host when they take at most this many bytes together; otherwise each
// step builds its subgraph's block from the pass's graph when it runs (SubgraphBuilder), holding one at a time.
constexpr std::int64_t kDefaultKeptBlockBytes = std::int64_t{2} << 30;

// The order a layer's destinations are cut into subgraphs in, so that consecutive subgraphs share source rows.
enum class CutOrder {
  kBreadthFirst,  // locality_order: for ids with no locality of their own (as stored)
  kVertexIds,     // ascending ids: where the vertices are numbered by community (order_vertices), the ids are a
                  // locality order already, and a better one (the ablation's plans move 0-5 % fewer bytes)
};
const char* to_string(CutOrder order);

// Within a budget, what takes the room the forecast leaves first (settle_device_memory): what may stay on the device
// for the run, in room every phase leaves, and then each phase's pools what is left of theirs; or the pools first,
// and what stays what every phase then leaves. By default, whichever order moves fewer bytes an epoch (on a tie, the
// pools first).
enum class RoomFirst : std::uint8_t { kCheaper, kStaying, kPools };

// Where layers are chained, in training: whether the backward half computes a layer's outputs again instead of
// keeping them on the host (Pass::outputs_recomputed). kAuto: from the first layer's sums of its inputs (a GEMM the
// step's own uploads allow) always, and by aggregating again (an attention layer's) only on a GPU, where moving the
// outputs over PCIe takes longer than aggregating them again; on the CPU device a copy is a memcpy.
enum class RecomputeOutputs : std::uint8_t { kAuto, kOn, kOff };
RecomputeOutputs parse_recompute_outputs(const std::string& text);
const char* to_string(RecomputeOutputs choice);

struct SubgraphExecutorOptions {
  std::int64_t device_budget = kUnlimited;  // bytes
  ExecutionMode mode = ExecutionMode::kReuse;
  CachePolicy policy = CachePolicy::kStAware;
  CutOrder cut_order = CutOrder::kBreadthFirst;
  std::int64_t kept_block_bytes = kDefaultKeptBlockBytes;
  // What the cache plans record: the executor needs only kTransfers; tests that compare every slot ask for kFull.
  CachePlanDetail cache_detail = CachePlanDetail::kTransfers;
  // What the backend's libraries take of the device (the executor sets its backend's): the workspace lies beside
  // the arena, the narrowed offsets within the steps.
  LibraryMemory library = {};
  // Inference: the plan runs the forward pass alone, without dropout. No step keeps anything for a backward pass
  // (no gradient pools, no parameter gradients), so steps are smaller and fit budgets training does not, and every
  // layer's outputs reach the host, where Executor::layer_outputs reads them.
  bool forward_only = false;
  // The first layer's inputs as sparse rows (sparse_inputs.hpp): the executor takes them so where this says so, and
  // its steps hold their entries, at most max_row_nonzeros a row, instead of dense rows.
  InputShape inputs = {};
  // Within a budget a step's block travels packed (PackedBlock), its sources in 16 bits where it has at most this
  // many; tests lower it to run the wide encoding on small graphs.
  std::int64_t narrow_source_limit = kNarrowSourceLimit;
  // Within a budget, whether what the steps upload each epoch again (packed blocks, the features) stays on the device
  // for the run where the budget has room beyond the plan's peak, and each phase's pools grow into the room it leaves
  // (settle_device_memory); off, all of it travels and the pools stay as planned.
  bool use_spare_room = true;
  // Within a budget, on one rank: whether each layer's transform runs right after the previous layer's aggregations
  // that produce its inputs, and its transform backward right before the aggregation backward that reads what it
  // computes (Pass::chained), so that neither the outputs nor their gradients go to the host and back in between.
  // No option turns it off: only tests do, to compare.
  bool chain_layers = true;
  // Where layers are chained, in training: whether the backward half computes a layer's outputs again where the next
  // layer's transform backward needs them (Pass::outputs_recomputed), so that they never go to the host.
  RecomputeOutputs recompute_outputs = RecomputeOutputs::kAuto;
  // Which of those takes the room first; tests pick one.
  RoomFirst room_first = RoomFirst::kCheaper;
  // Per owned vertex, whether the training loss reads its logits (empty: every vertex's), as a training split's mask
  // says: a training pass then brings only those logits to the host and only their gradients back, the others' being
  // zero (Pass::loss_positions). The caller keeps it while the plan is used (the recompute baseline plans its
  // closures as it trains).
  std::span<const std::uint8_t> loss_reads = {};
};

// A step of a pass: `index` is a transform chunk of its layer (transform steps), a subgraph of its layer
// (aggregation steps) or a chunk of the layer's exchange rows (exchange steps).
enum class StepKind {
  kTransform,
  kAggregate,
  kAggregateBackward,
  kTransformBackward,
  kSendRows,          // boundary rows of what the layer aggregates leave the device for the peers that mirror them
  kSendGradients,     // mirror rows of ∂L/∂Z leave the device for their owners
  kReceiveGradients,  // what the mirrors sent for the boundary rows is added into their ∂L/∂Z
};

struct PlannedStep {
  StepKind kind = StepKind::kTransform;
  std::uint32_t layer = 0;
  std::uint32_t index = 0;
};

// The rows one layer of a pass exchanges with other ranks, cut into chunks that fit a step.
struct LayerExchange {
  std::vector<std::vector<vid_t>> send_rows;          // boundary rows, forward
  std::vector<std::vector<vid_t>> send_gradients;     // mirror rows, backward
  std::vector<std::vector<vid_t>> receive_gradients;  // boundary rows, backward
  std::vector<std::int64_t> receive_first;            // position in the boundary rows of each receive chunk
};

// Where a phase's exchange runs: it starts before step `start` and must be complete before step `finish`
// (the first step that reads what it brings; that step is fenced). Either may be the phase's end: the
// index of the next phase's first step, or the number of steps.
struct ExchangePoints {
  std::size_t start = 0;
  std::size_t finish = 0;
};

// The size of one subgraph of a pass. Subgraph k of layer l has destinations transform_chunks[l][k] (a layer's
// subgraphs come first among its chunks) with all their in-edges.
struct PartSize {
  vid_t num_src = 0;
  eid_t num_edges = 0;
  bool reads_mirror = false;  // some source is a mirror, whose row the exchange brings
};

// Boundary rows among the destinations of a subgraph: their positions there, and their index among the boundary rows.
struct StayingBoundary {
  std::vector<vid_t> positions;
  std::vector<vid_t> boundary_index;
};

// One run of the layer-by-layer schedule over a set of rows, forward and backward. Reuse makes one pass over
// the whole graph. The recompute baseline makes one pass per subgraph over its L-hop closure: layer l computes
// the rows within L-1-l hops of the subgraph, and nothing a pass computed is kept for the next one.
struct Pass {
  std::vector<vid_t> vertices;       // the graph vertex of each pass row; empty: row r is vertex r
  std::int64_t num_rows = 0;         // rows of the first layer's input
  std::int64_t num_outputs = 0;      // the last layer's outputs: the first num_outputs rows, whose loss the pass takes
  std::int64_t aggregated_rows = 0;  // the most rows a layer aggregates (mirrors never are)
  std::vector<std::vector<std::vector<vid_t>>> transform_chunks;  // per layer: the rows each transform step takes
  std::vector<std::vector<PartSize>> layer_parts;                 // per layer: its subgraphs
  // Per layer l below the last, within a budget: whether it is chained to layer l+1, whose transform chunks are then
  // the destinations of layer l's subgraphs. Layer l+1 transforms each chunk in layer l's forward phase, right after
  // the aggregation that produced it, from the outputs still on the device (they go to the host too, for the backward
  // half); and, where layer l has an aggregation backward, takes each chunk's transform backward in layer l's backward
  // phase, right before the aggregation backward that reads the output gradients it leaves on the device. The
  // chunk's transformed rows, and their gradients, pass through pools of those phases on their way to and from the
  // host instead.
  std::vector<char> chained;
  // Per chained layer l, in training: whether the backward half computes layer l's outputs again where layer l+1's
  // transform backward needs them, instead of reading them from the host, which they then never reach: from the
  // first layer's sums of its inputs, which that step uploads anyway (Pass::first_layer_backward_fused), or from the
  // transformed rows layer l's aggregation backward reads, in that step, which then takes layer l+1's transform
  // backward of its subgraph's chunk (takes_next_transform_backward).
  std::vector<char> outputs_recomputed;
  // Per layer whose transform chunks so follow the previous layer's subgraphs: the destinations of its own; empty
  // for the others, whose subgraphs are their first transform chunks.
  std::vector<std::vector<std::vector<vid_t>>> own_destinations;
  // Per layer, every subgraph's block (in pass rows, src_gid: global ids) where the pass keeps them
  // (SubgraphExecutorOptions::kept_block_bytes); empty where steps build them from `graph` as they run.
  std::vector<std::vector<Subgraph>> blocks;
  PreparedGraph graph;             // in pass rows, with its edge weights; empty where the blocks are kept
  std::vector<PlannedStep> steps;  // in execution order: the trace's steps, one to one
  std::size_t forward_steps = 0;   // the first forward_steps steps are the forward pass
  // Multi-rank reuse: rows [num_outputs, num_rows) are mirrors, received from their owners. Per layer, the
  // chunks of exchanged rows; per phase (forward layers, then backward layers from the last), where the
  // exchange runs. Subgraphs that read no mirror run while it is in flight.
  std::vector<LayerExchange> exchange;
  std::vector<ExchangePoints> exchange_points;
  AccessTrace trace;  // once planned, without its steps' row lists (they pointed into planning's own data)
  CachePlan cache;
  std::int64_t largest_step_bytes = 0;  // what the largest step uses besides the pools
  std::int64_t stream_h2d_bytes = 0;    // predicted bytes of rows streamed to the device (not cached)
  std::int64_t stream_d2h_bytes = 0;    // predicted bytes of rows streamed back
  std::int64_t rows_computed = 0;       // forward aggregations
  // Without a budget, per layer below the last and per subgraph: whether the subgraph's destinations are also the
  // next layer's transform chunk of the same index, whose input its outputs then are on the device, as the
  // gradients that chunk's backward computes for them are its output gradients; neither goes through the host.
  // (Within a budget a chained layer's outputs stay so, every subgraph's: output_stays.)
  std::vector<std::vector<char>> outputs_stay;
  // Without a budget, reuse's pass keeps its blocks and the features on the device for the whole run: uploaded
  // once, before the first epoch, they are no epoch's transfers.
  bool lasting = false;
  // Whether the first layer aggregates its dropped inputs and transforms the sums, as in-memory training does
  // (aggregates_before_transform): then its transform steps only drop out, its aggregations keep the sums for the
  // backward half, which takes the weight gradient from them, and nothing of it runs backward but those (no block,
  // no gradient pool, no exchange, no transform backward). Reuse only. Without a budget the sums stay on the device;
  // within one they go to the host and back, or stay where the budget has room (sums_stay).
  bool first_layer_sums_inputs = false;
  // Within a budget, where the first layer sums its inputs and the second transforms no mirrors: the first layer's
  // backward, ∂W += sumsᵀ·∂L/∂Y and the bias's column sums of ∂L/∂Y, runs in the second layer's transform backward,
  // chunk by chunk, where ∂L/∂Y of those rows is computed. ∂L/∂Y never leaves the device, and the first layer's
  // backward phase has no steps; the sums come up from the host by the second layer's chunks.
  bool first_layer_backward_fused = false;
  // Within a budget, per layer and subgraph: whether its packed block stays on the device for the whole run, uploaded
  // once before the first epoch into room the forecast leaves (settle_device_memory); the others travel with each
  // step that reads them.
  std::vector<std::vector<char>> blocks_stay;
  // Likewise per first-layer transform chunk: whether its features stay (dense features only); and per first-layer
  // subgraph, whether its sums of the inputs stay on the device from the forward half to the backward.
  std::vector<char> inputs_stay;
  std::vector<char> sums_stay;
  // Multi-rank reuse, per layer: whether it receives its mirrors' inputs and transforms them itself
  // (exchange_side.hpp). Its transform chunks then end with chunks of mirror rows, which wait for the exchange; its
  // inputs (the previous layer's outputs) have host rows for the mirrors, where the exchange writes them forward and
  // their gradients leave from backward.
  std::vector<char> transforms_mirrors;
  // Where layer l+1 transforms its mirrors, per subgraph of layer l whose outputs stay (outputs_stay): its boundary
  // rows. Their outputs also go to the host, where the exchange sends them from, and the gradients the mirrors send
  // back for them are added to the output gradients on the device.
  std::vector<std::vector<StayingBoundary>> staying_boundary;
  // In training, where the loss reads only some vertices' logits (SubgraphExecutorOptions::loss_reads), per subgraph
  // of the last layer: the positions among its destinations of those it reads. Only their logits go to the host, and
  // only their gradients come back; the others' are zero on the device. Empty where the loss reads every row.
  std::vector<std::vector<vid_t>> loss_positions;

  vid_t vertex(vid_t row) const { return vertices.empty() ? row : vertices[static_cast<std::size_t>(row)]; }
  // The device bytes of the pools of phase `phase` (trace.capacity_rows).
  std::int64_t pool_bytes(std::size_t phase) const {
    std::int64_t bytes = 0;
    const auto& capacity = trace.capacity_rows[phase];
    for (std::size_t t = 0; t < capacity.size(); ++t) bytes += capacity[t] * trace.tensors[t].row_bytes;
    return bytes;
  }
  // The most any phase's pools take.
  std::int64_t largest_pool_bytes() const {
    std::int64_t largest = 0;
    for (std::size_t phase = 0; phase < trace.capacity_rows.size(); ++phase)
      largest = std::max(largest, pool_bytes(phase));
    return largest;
  }
  // Whether subgraph `part`'s outputs stay on the device as the next layer's transform input (outputs_stay, or every
  // subgraph of a chained layer, whose outputs go to the host too where the backward half reads them there).
  bool output_stays(std::size_t layer, std::size_t part) const {
    return chained_to_next(layer) ||
           (layer < outputs_stay.size() && part < outputs_stay[layer].size() && outputs_stay[layer][part] != 0);
  }
  std::span<const vid_t> destinations(std::size_t layer, std::size_t part) const {
    return layer < own_destinations.size() && !own_destinations[layer].empty() ? own_destinations[layer][part]
                                                                               : transform_chunks[layer][part];
  }
  bool chained_to_next(std::size_t layer) const { return layer < chained.size() && chained[layer] != 0; }
  bool output_recomputed(std::size_t layer) const {
    return layer < outputs_recomputed.size() && outputs_recomputed[layer] != 0;
  }
  bool takes_next_transform_backward(std::size_t layer) const {
    return output_recomputed(layer) && !sums_inputs(layer);
  }
  // Whether the layer aggregates its inputs and transforms the sums (first_layer_sums_inputs).
  bool sums_inputs(std::size_t layer) const { return layer == 0 && first_layer_sums_inputs; }
  // The layer whose steps phase `phase` runs: forward layers, then backward from the last.
  std::size_t phase_layer(std::size_t phase) const {
    const std::size_t layers = layer_parts.size();
    return phase < layers ? phase : 2 * layers - 1 - phase;
  }
  bool keeps_blocks() const { return !blocks.empty(); }
  bool block_stays(std::size_t layer, std::size_t part) const {
    return layer < blocks_stay.size() && part < blocks_stay[layer].size() && blocks_stay[layer][part] != 0;
  }
  bool input_stays(std::size_t chunk) const { return chunk < inputs_stay.size() && inputs_stay[chunk] != 0; }
  // Whether a step reads its subgraph's block: every aggregation, but the backward of a first layer that sums its
  // inputs.
  bool reads_block(const PlannedStep& s) const {
    return s.kind == StepKind::kAggregate || (s.kind == StepKind::kAggregateBackward && !sums_inputs(s.layer));
  }
  bool sums_stays(std::size_t part) const { return part < sums_stay.size() && sums_stay[part] != 0; }
  bool mirrors_transformed(std::size_t layer) const {
    return layer < transforms_mirrors.size() && transforms_mirrors[layer] != 0;
  }
  // How many of the last layer's subgraph `part`'s logits the training loss reads (loss_positions).
  std::size_t loss_rows(std::size_t part) const {
    return loss_positions.empty() ? destinations(layer_parts.size() - 1, part).size() : loss_positions[part].size();
  }
  const StayingBoundary& staying_boundary_rows(std::size_t layer, std::size_t part) const {
    static const StayingBoundary kNone;
    return layer < staying_boundary.size() && part < staying_boundary[layer].size() ? staying_boundary[layer][part]
                                                                                    : kNone;
  }
};

// The shape a budgeted step packs subgraph `part` of layer `layer` in (PackedBlock): from its kept block, or from the
// pass's graph and the layer's needs where steps build their blocks.
BlockShape packed_block_shape(const Model& model, const Pass& pass, std::size_t layer, std::size_t part,
                              std::int64_t narrow_limit);

// The subgraphs of a pass as its steps run them: a kept block as it is, or one built into a buffer this holds
// (valid until the next get). `global_id`: per graph vertex; both must outlive this.
class PassSubgraphs {
 public:
  PassSubgraphs(const Pass& pass, std::span<const gid_t> global_id);
  const Subgraph& get(std::size_t layer, std::size_t part);

 private:
  const Pass& pass_;
  std::optional<SubgraphBuilder> builder_;
  Subgraph built_;
};

// The rows a step of a pass lists (its trace step's lists, each one run of one tensor's rows), in list order:
// what the plan gives each of them a slot for. Tensor 2l holds layer l's transformed rows, 2l+1 their gradients.
// `sources`: an aggregation step's subgraph sources (unused by other steps).
struct StepRows {
  RowRun reads, writes, accumulates;
  // An aggregation backward that takes the next layer's transform backward: the gradients of that chunk's rows.
  RowRun next_gradient_reads;
};
// Whether the plan of a run with these options sums the first layer's inputs (Pass::first_layer_sums_inputs): reuse,
// with or without a budget, where aggregates_before_transform allows it (never over sparse inputs); the recompute
// baseline transforms first.
bool plan_sums_first_layer_inputs(const Model& model, const SubgraphExecutorOptions& options);

StepRows rows_of_step(const Model& model, const Pass& pass, std::size_t step, std::span<const vid_t> sources);

// Host bytes of a subgraph's block with `sources` and `edges` (what Pass::blocks holds per subgraph).
std::int64_t host_block_bytes(std::int64_t destinations, std::int64_t sources, std::int64_t edges, bool weighted);

// The plan of one epoch, made once: every epoch runs it alike (the recompute baseline cuts the same passes
// again each epoch).
struct EpochPlan {
  SubgraphExecutorOptions options;
  std::vector<Pass> passes;  // reuse: its one pass. Recompute: none stored (see closures)
  bool first_layer_sums_inputs() const { return passes.size() == 1 && passes.front().first_layer_sums_inputs; }
  // Recompute: the destinations of each pass. Its closure pass is cut again when it runs (ClosurePlanner), as a
  // full-neighbour sampler cuts a split model's subgraphs: storing every closure's edges would take more host
  // memory than the graph.
  std::vector<std::vector<vid_t>> closures;
  std::int64_t resident_bytes = 0;       // the parameters and their gradients, on the device for the whole run
  std::int64_t pool_bytes = 0;           // device memory given to the cache pools
  std::int64_t step_limit_bytes = 0;     // what one step may use besides the pools
  std::int64_t staging_limit_bytes = 0;  // the packed rows and slots one transfer may stage (within a step)
  // Over all passes:
  std::int64_t largest_step_bytes = 0;  // what the largest step uses besides the pools
  std::int64_t largest_pass_rows = 0;
  std::int64_t largest_aggregated_rows = 0;
  std::int64_t num_steps = 0;
  // The device peak cannot exceed this without fragmentation: the parameters, the pools, and two steps (the
  // running one and the prefetched one). `memory` is the exact forecast.
  std::int64_t peak_bytes_bound = 0;
  std::int64_t rows_computed = 0;  // per epoch, forward aggregations
  std::int64_t rows_needed = 0;
  // Predicted per epoch; cache_* is the part the cache plans move, the rest is streamed.
  std::int64_t h2d_bytes = 0;
  std::int64_t d2h_bytes = 0;
  std::int64_t cache_h2d_bytes = 0;
  std::int64_t cache_d2h_bytes = 0;
  std::int64_t cache_hits = 0;
  std::int64_t cache_misses = 0;
  // Predicted per epoch: the packed blocks steps upload (settle_device_memory); and the device bytes of the blocks
  // and features that stay for the run instead.
  std::int64_t structure_h2d_bytes = 0;
  std::int64_t staying_block_bytes = 0;
  std::int64_t staying_input_bytes = 0;
  std::int64_t staying_sums_bytes = 0;
  // The device memory the run needs (forecast_device_memory; the executor fills it in).
  MemoryForecast memory;
};

// Plans an epoch of `model` on `graph` (as stored: the model adds its self-loops). Throws nj::InputError when
// the budget cannot hold the smallest possible step, naming the smallest budget that would.
EpochPlan plan_epoch(const Model& model, const LocalGraph& local, const SubgraphExecutorOptions& options);

// Gives the pools of a plan's one pass these capacities ([phase][tensor], in rows, as AccessTrace::capacity_rows) and
// plans its cache again, with the plan's totals and peak bound. The pass must keep its blocks (Pass::keeps_blocks),
// whose sources its steps list.
void resize_pools(const Model& model, EpochPlan& plan, std::vector<std::vector<std::int64_t>> capacity_rows);

// Cuts the recompute baseline's passes, each over one subgraph's L-hop closure.
class ClosurePlanner {
 public:
  // `model` must outlive the planner; `local` must have no peers.
  ClosurePlanner(const Model& model, const LocalGraph& local);
  Pass plan(const EpochPlan& plan, std::span<const vid_t> destinations);
  const CsrGraph& prepared_graph() const { return prepared_.graph; }

 private:
  const Model& model_;
  PreparedGraph prepared_;
  std::vector<gid_t> global_id_;
  std::vector<std::int64_t> out_degree_;
  std::vector<vid_t> row_of_;  // scratch: the pass row of each vertex, -1 outside the closure
  ClosureLister lister_;
};

// The smallest device budget with which plan_epoch succeeds for this model and graph, in either mode: both
// run a layer's smallest step, one vertex with all its in-edges (forward_only: of an inference plan).
std::int64_t minimum_device_budget(const Model& model, const LocalGraph& local, const LibraryMemory& library = {},
                                   bool forward_only = false, const InputShape& inputs = {});

}  // namespace nj
