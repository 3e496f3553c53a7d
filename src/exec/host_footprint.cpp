#include "nj/exec/host_footprint.hpp"

#include <omp.h>

#include <algorithm>
#include <numeric>

#include "nj/core/bytes.hpp"
#include "nj/core/error.hpp"
#include "nj/exec/exchange_side.hpp"
#include "nj/exec/executor.hpp"

namespace nj {
namespace {

constexpr std::int64_t kFloat = sizeof(float);
// What each compute thread holds once it has run a GEMM over the whole graph: OpenBLAS's packing buffers and the
// thread's stack, as measured (the peak of an in-memory 60k-vertex run rose by 16 MB from 1 to 2 threads). Packing
// copies no more than a GEMM's operands, which a device budget bounds.
constexpr std::int64_t kThreadWorkspace = std::int64_t{16} << 20;

// The rows the subgraph executor keeps on the host: per layer its outputs for the owned rows (a layer's output
// gradients overwrite them in place, except the last layer's, which the loss writes beside the logits), the
// shared homes of the transformed rows (a first layer's dropped inputs, where it sums them) and their gradients for
// every local row, and the boundary rows sent and the gradients received (mirrors stand in for the boundary before
// partitioning is known); the recompute baseline's logits too. Outputs computed again never reach theirs, whose pages
// are then never touched (HostRows).
std::int64_t subgraph_host_rows(const Model& model, const RankShape& s, bool recompute, const RunHostUse& use,
                                bool bounded) {
  const bool first_layer_sums_inputs = use.first_layer_sums_inputs;
  std::int64_t bytes = s.owned * s.classes * kFloat * (recompute ? 2 : 1);
  // Within a budget a first layer's sums of its inputs wait on the host for the backward half.
  if (first_layer_sums_inputs && bounded) bytes += s.owned * model.layer(0).input_sums_width() * kFloat;
  const std::int64_t mirrors = s.local - s.owned;
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    // Where the next layer transforms its mirrors, their rows of these outputs arrive here too.
    const bool next_transforms_mirrors = l + 1 < model.num_layers() && transforms_mirrors(model, l + 1);
    const std::int64_t exchanged = exchanged_width(model, l, first_layer_sums_inputs) +          // rows out
                                   exchanged_gradient_width(model, l, first_layer_sums_inputs);  // gradients back
    const bool computed_again = l < use.outputs_computed_again.size() && use.outputs_computed_again[l] != 0;
    const std::int64_t output_rows = computed_again ? 0 : next_transforms_mirrors ? s.local : s.owned;
    bytes += kFloat * (output_rows * layer.out_dim() + mirrors * exchanged);
  }
  for (const std::int64_t width : row_homes(model, first_layer_sums_inputs, bounded && !recompute).width)
    bytes += kFloat * s.local * width;
  return bytes;
}

// What the compute threads hold once they have run the run's largest GEMM: OpenBLAS packs blocks of the operands, up
// to kThreadWorkspace a thread. Within a budget the threads share out one step's operands, at most the planner's bound
// on a step; without one, each may pack the widest dense rows of the owned vertices (a first layer over sparse inputs
// multiplies by SpMM, not GEMM).
std::int64_t threads_workspace(const Model& model, const RankShape& s, const RunLayout& layout, const RunHostUse& use,
                               int threads) {
  if (!layout.in_memory && layout.device_budget != kUnlimited) {
    const std::int64_t packed = threads * std::min(kThreadWorkspace, layout.device_budget);
    return use.largest_step_bytes > 0 ? std::min(packed, use.largest_step_bytes) : packed;
  }
  std::int64_t widest = 0;
  for (std::size_t l = use.sparse_input_bytes > 0 ? 1 : 0; l < model.num_layers(); ++l) {
    widest = std::max({widest, model.layer(l).in_dim(), model.layer(l).row_width()});
  }
  return threads * std::min(kThreadWorkspace, s.local * widest * kFloat);
}

}  // namespace

std::int64_t aggregated_width(const Model& model, std::size_t l, bool first_layer_sums_inputs) {
  const Layer& layer = model.layer(l);
  return l == 0 && first_layer_sums_inputs ? layer.in_dim() : layer.row_width();
}

RowHomes row_homes(const Model& model, bool first_layer_sums_inputs, bool may_chain) {
  // Phases: forward layer l is phase l, backward layer l is phase 2L-1-l. Layer l's transformed rows live from its
  // forward phase (or the previous layer's, where they may be chained) to its backward phase where the backward reads
  // them (attention), else through the forward only; their gradients through the backward phase (and the previous
  // layer's).
  // A first layer that sums its inputs runs no aggregation backward: its tensor 1 has no rows (a view of none).
  const std::size_t layers = model.num_layers();
  struct Span {
    std::size_t tensor, first, last;
  };
  std::vector<Span> spans;
  RowHomes homes;
  homes.buffer_of.assign(2 * layers, 0);
  homes.row_width.assign(2 * layers, 0);
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t backward = 2 * layers - 1 - l;
    const std::size_t chained = may_chain && l > 0 ? 1 : 0;
    spans.push_back({2 * l, l - chained, model.layer(l).aggregation().backward_reads_rows ? backward : l});
    if (l > 0 || !first_layer_sums_inputs) spans.push_back({2 * l + 1, backward, backward + chained});
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.first != b.first ? a.first < b.first : a.tensor < b.tensor; });
  homes.width.assign(spans.size(), 0);
  std::vector<std::size_t> free_after(spans.size(), 0);  // per buffer: the last phase of the tensors in it so far
  std::size_t buffers = 0;
  for (const Span& span : spans) {
    std::size_t buffer = 0;
    while (buffer < buffers && free_after[buffer] >= span.first) ++buffer;
    buffers = std::max(buffers, buffer + 1);
    free_after[buffer] = span.last;
    homes.buffer_of[span.tensor] = buffer;
    homes.row_width[span.tensor] = aggregated_width(model, span.tensor / 2, first_layer_sums_inputs);
    homes.width[buffer] = std::max(homes.width[buffer], homes.row_width[span.tensor]);
  }
  homes.width.resize(buffers);
  return homes;
}

std::int64_t HostFootprint::total() const {
  return std::accumulate(parts.begin(), parts.end(), std::int64_t{0},
                         [](std::int64_t sum, const Part& p) { return sum + p.bytes; });
}

std::string HostFootprint::describe() const {
  std::string text;
  for (const Part& p : parts) text += (text.empty() ? "" : ", ") + p.name + " " + format_bytes(p.bytes);
  return text;
}

std::int64_t shard_bytes(const RankShape& s) {
  // Features; CSR offsets (64-bit) and sources (32-bit); per local vertex its global id, global in-degree and
  // self-loop flag; per owned vertex its label and three mask bytes.
  return s.owned * s.features * kFloat + (s.local + 1) * 8 + s.in_edges * 4 + s.local * (8 + 8 + 1) + s.owned * 7;
}

std::int64_t shard_in_edge_bytes(const RankShape& s) { return s.in_edges * 4; }

std::int64_t renumbering_bytes(const RankShape& s) {
  return (s.local + 1) * std::int64_t{sizeof(eid_t)} + s.in_edges * std::int64_t{sizeof(vid_t)} +
         (s.local + s.owned) * std::int64_t{sizeof(vid_t)};
}

std::int64_t sparse_rows_bytes(std::int64_t rows, std::int64_t nonzeros) {
  return (rows + 1) * std::int64_t{sizeof(eid_t)} + nonzeros * std::int64_t{sizeof(vid_t) + sizeof(float)};
}

HostFootprint loading_host_footprint(const RankShape& shape, std::int64_t process_bytes) {
  // Beside the shard, loading holds one of these at a time, each freed before the next: the whole dataset while the
  // shard is cut from it, the stored entries of sparse features while they are expanded into dense rows, and the
  // renumbering's copies. Its peak is the shard and the largest of them.
  std::vector<HostFootprint::Part> temporaries;
  if (shape.whole_dataset_bytes > 0) temporaries.push_back({"whole dataset", shape.whole_dataset_bytes});
  if (shape.stored_nonzeros >= 0) {
    temporaries.push_back({"stored sparse features", sparse_rows_bytes(shape.owned, shape.stored_nonzeros)});
  }
  if (shape.renumbered) temporaries.push_back({"renumbering", renumbering_bytes(shape)});
  HostFootprint footprint{
      .phase = "loading",
      .parts = {
          {"process", process_bytes}, {"libraries at work", kLibrariesAtWorkBytes}, {"dataset", shard_bytes(shape)}}};
  const auto largest = std::max_element(temporaries.begin(), temporaries.end(),
                                        [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  if (largest != temporaries.end()) footprint.parts.push_back(*largest);
  return footprint;
}

HostFootprint running_host_footprint(const Model& model, const RankShape& shape, const RunLayout& layout,
                                     const RunHostUse& use) {
  HostFootprint footprint{.phase = layout.inference ? "inference" : "training",
                          .parts = {{"process", use.process_bytes}, {"libraries at work", kLibrariesAtWorkBytes}}};
  if (use.mpi_bytes > 0) footprint.parts.push_back({"MPI", use.mpi_bytes});
  const bool bounded = !layout.in_memory && layout.device_budget != kUnlimited;
  // The subgraph executor's rank frees the loaded graph's in-edges once planned, before its rows fill.
  footprint.parts.push_back({"dataset", shard_bytes(shape) - (layout.in_memory ? 0 : shard_in_edge_bytes(shape))});
  if (use.sparse_input_bytes > 0) footprint.parts.push_back({"sparse inputs", use.sparse_input_bytes});
  footprint.parts.push_back({"host rows", layout.in_memory
                                              ? 2 * shape.owned * shape.classes * kFloat
                                              : subgraph_host_rows(model, shape, layout.recompute, use, bounded)});
  if (layout.device_in_host_memory) footprint.parts.push_back({"device (emulated)", use.device_peak_bytes});
  // Copies stage through one page-locked buffer, which grows to the largest copy through it (a larger one than
  // Transfers::kPieceBytes goes in pieces) and lives as long as the executor; the in-memory executor frees what its
  // one-time uploads staged, so that what stays is its epochs' largest.
  footprint.parts.push_back({"staging", use.staging_bytes});
  const int threads = layout.threads > 0 ? layout.threads : omp_get_max_threads();
  footprint.parts.push_back({"threads", threads_workspace(model, shape, layout, use, threads)});
  // In training, beside the model's own matrices: Adam's two moments and the gradients gathered from the device, a
  // copy of the parameters each.
  footprint.parts.push_back(
      {"model", model.host_bytes() + (layout.inference ? 0 : 3 * model.num_parameters() * kFloat)});
  if (use.plan_bytes > 0) footprint.parts.push_back({"plan", use.plan_bytes});
  if (use.executor_bytes > 0) footprint.parts.push_back({"executor", use.executor_bytes});
  return footprint;
}

HostFootprint peak_host_footprint(const HostFootprint& loading, const HostFootprint& running) {
  return loading.total() > running.total() ? loading : running;
}

void require_host_memory(const HostFootprint& footprint, std::int64_t available_bytes, const std::string& whose,
                         const std::string& source) {
  if (available_bytes < 0 || footprint.total() <= available_bytes) return;
  throw InputError(fmt::format(
      "{} needs {} of host memory while {} ({}), more than the {} {}; use more ranks (mpirun -np), a smaller "
      "--device-memory, or --host-memory to state what it may use",
      whose, format_bytes(footprint.total()), footprint.phase, footprint.describe(), format_bytes(available_bytes),
      source));
}

}  // namespace nj
