#pragma once
// The host memory one rank's run holds at its peak, by part: what `nj plan` reports per rank and what
// `nj train` checks, before it loads anything, against the memory the rank may use, so that a run that cannot
// fit stops with an error naming the parts instead of being killed by the operating system.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "nj/model/model.hpp"

namespace nj {

// Where the trace tensors' rows live (tensor 2l: layer l's transformed rows, 2l+1: their gradients;
// docs/scheduler.md), on the subgraph executor's host and on the in-memory executor's device: a tensor's rows are
// needed only during the phases that touch it (its layer's forward phase, and its backward phase where that reads
// them), so tensors whose phases do not overlap share one buffer. Per tensor, its buffer and its rows' width (0: a
// tensor no step touches, the input gradients of a first layer that sums its inputs); per buffer, the widest row it
// holds.
struct RowHomes {
  std::vector<std::size_t> buffer_of;
  std::vector<std::int64_t> row_width;
  std::vector<std::int64_t> width;
};
// first_layer_sums_inputs: as Pass::first_layer_sums_inputs, where layer 0's tensors hold its inputs' width.
// may_chain: a budgeted reuse pass, whose layers may be chained (Pass::chained): a layer's transformed rows are then
// written in the previous layer's forward phase, and their gradients read in its backward phase.
RowHomes row_homes(const Model& model, bool first_layer_sums_inputs = false, bool may_chain = false);
// The width of layer l's tensors' rows: what its aggregation reads.
std::int64_t aggregated_width(const Model& model, std::size_t l, bool first_layer_sums_inputs);

// What a rank loads and computes on.
struct RankShape {
  std::int64_t owned = 0;     // vertices whose rows it holds
  std::int64_t local = 0;     // owned and mirrored
  std::int64_t in_edges = 0;  // stored in-edges of its owned vertices
  std::int64_t features = 0;
  std::int64_t classes = 0;
  // Where its file stores the features sparse, their stored entries (the reader holds them while it fills the dense
  // rows); -1 where it stores them dense.
  std::int64_t stored_nonzeros = -1;
  // Ranks that partition in memory read the whole dataset first and hold it while they cut their shard.
  std::int64_t whole_dataset_bytes = 0;
  // Loading renumbers the owned vertices (every --vertex-order but input), holding a renumbered copy of the in-edges.
  bool renumbered = true;
};

// A rank's host memory at a moment of its run, by part.
struct HostFootprint {
  struct Part {
    std::string name;
    std::int64_t bytes = 0;
  };
  std::string phase;  // "loading", "training", "inference": when it holds this
  std::vector<Part> parts;
  std::int64_t total() const;
  std::string describe() const;  // "dataset 300M, host rows 1.2G, ..."
};

// Host bytes of a loaded dataset or shard of this shape: features (as dense rows: the reader expands sparse ones),
// graph, ids, degrees, labels and masks.
std::int64_t shard_bytes(const RankShape& shape);
// The part of it the subgraph executor frees once planned: the graph's in-edges, of which it keeps its own copy
// (with self-loops) where its steps build their blocks, and blocks or nothing otherwise.
std::int64_t shard_in_edge_bytes(const RankShape& shape);
// What renumbering the owned vertices holds beside the shard at its peak: the in-edges renumbered into a CSR of their
// own while the loaded one lives, each local vertex's new id, and the order.
std::int64_t renumbering_bytes(const RankShape& shape);
// Host bytes of the features as sparse rows (SparseRows) with this many entries.
std::int64_t sparse_rows_bytes(std::int64_t rows, std::int64_t nonzeros);

// How a rank's run is set up, as far as its host memory goes.
struct RunLayout {
  bool in_memory = true;
  // The CPU device keeps its "device" memory in host memory; a GPU's is not the host's.
  bool device_in_host_memory = true;
  // The subgraph executor's device budget (kUnlimited: none).
  std::int64_t device_budget = 0;
  // The recompute baseline gathers each pass's logits into rows of their own; reuse's last layer outputs are them.
  bool recompute = false;
  // Compute threads (0: OpenMP's default), each with its own BLAS packing buffers.
  int threads = 0;
  bool inference = false;  // nj infer's forward pass: no gradients
};

// What the libraries hold once they work, beyond what was resident when main began: the pages of their code that a
// run reaches (HDF5's readers, the BLAS kernels, the C++ runtime's) and their buffers (HDF5's caches, the threads'
// stacks). Measured with Debian 12's libraries: 6.2 MiB once Cora is loaded, 6 to 8 MiB more than the parts counted
// at the peak of training small graphs; Forecasts.EqualWhatTrainingMeasures checks the forecasts that count it.
inline constexpr std::int64_t kLibrariesAtWorkBytes = std::int64_t{7} << 20;

// What Open MPI holds in a rank of several beyond the process's code: about 8 MiB from MPI_Init on (which a rank's
// resident_at_start counts, and nj plan's own process does not) and shared-memory buffers once the ranks exchange,
// which grow with what they send, up to about 8 MiB. Measured with Debian 12's Open MPI 4.1 on 2 to 4 ranks of one
// machine: 7.6 to 10 MiB, and 7.5 MiB on a large graph; Forecasts.EqualWhatTrainingMeasures checks the forecasts
// that count them.
inline constexpr std::int64_t kMpiInitBytes = std::int64_t{8} << 20;
inline constexpr std::int64_t kMpiExchangeBytes = std::int64_t{8} << 20;
// The shared-memory buffers of a rank that sends this many bytes an epoch.
inline std::int64_t mpi_exchange_bytes(std::int64_t sent_per_epoch) {
  return std::min(kMpiExchangeBytes, sent_per_epoch);
}

// What a planned run holds beside its loaded data, as planning measured or forecast it (nj/run/rank_setup.hpp,
// PlannedRun).
struct RunHostUse {
  std::int64_t process_bytes = 0;       // resident before any data is read: code and libraries (resident_at_start)
  std::int64_t device_peak_bytes = 0;   // the device's forecast peak footprint
  std::int64_t plan_bytes = 0;          // the plan's structures, measured while planning
  std::int64_t executor_bytes = 0;      // executor_host_bytes
  std::int64_t sparse_input_bytes = 0;  // the first layer's inputs as sparse rows, where it takes them so
  std::int64_t staging_bytes = 0;       // the most one copy stages (MemoryForecast::largest_copy_bytes)
  std::int64_t mpi_bytes = 0;           // what MPI holds beyond process_bytes, with several ranks
  std::int64_t largest_step_bytes = 0;  // within a device budget, the most a step's operands take (the planner's bound)
  bool first_layer_sums_inputs = false;
  // Per layer below the last: whether training computes its outputs again where the backward half reads them, so
  // that they never reach the host (Pass::outputs_recomputed).
  std::vector<char> outputs_computed_again = {};
};

// The rank's host memory at the peak of loading its data, from the files' shapes: what nj train checks before it reads
// anything.
HostFootprint loading_host_footprint(const RankShape& shape, std::int64_t process_bytes);
// Its host memory while it runs the planned epoch: the loaded data, the rows the executor keeps on the host, and where
// the device is emulated, the device's forecast peak.
HostFootprint running_host_footprint(const Model& model, const RankShape& shape, const RunLayout& layout,
                                     const RunHostUse& use);
// The rank's peak: the larger of the two (the loading's temporaries are gone before the run allocates).
HostFootprint peak_host_footprint(const HostFootprint& loading, const HostFootprint& running);

// Throws nj::InputError naming the parts where the footprint exceeds `available_bytes` (< 0: unknown, no
// check). `whose`: "rank 2", or "this run".
void require_host_memory(const HostFootprint& footprint, std::int64_t available_bytes, const std::string& whose,
                         const std::string& source);

}  // namespace nj
