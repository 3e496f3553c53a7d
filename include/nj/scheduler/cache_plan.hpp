#pragma once
// Offline planning of what stays on the device between the steps of an epoch. The subgraph executor records
// the epoch's access trace once (it is the same every epoch: static graph, fixed subgraph order, fixed
// layers), asks a policy for a plan, and replays that plan physically every epoch. See docs/scheduler.md.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nj/core/types.hpp"

namespace nj {

// One row of one tensor; the row index is the vertex id.
struct RowRef {
  std::uint32_t tensor = 0;
  vid_t row = 0;
  friend bool operator==(const RowRef&, const RowRef&) = default;
};

struct TensorSpec {
  std::string name;
  std::int64_t row_bytes = 0;
  // The host must hold the final value of every row written in the epoch, even if no later step reads it
  // (logits, gradients the optimizer reads).
  bool keep_on_host = false;
};

// Rows of one tensor that a trace step lists without owning them: they must outlive planning.
struct RowRun {
  std::uint32_t tensor = 0;
  std::span<const vid_t> rows;
  // No row appears twice in `rows` (a subgraph's sources, a chunk of distinct rows). A step whose lists are such
  // runs only, of different tensors, is indexed without looking each row up; a run that says so wrongly plans wrong.
  bool distinct = false;
};

// A step transforms one chunk of rows or aggregates one subgraph, forward or backward. A row may appear in
// several lists of one step (read and written in place): it then has one slot for the whole step.
struct TraceStep {
  std::uint32_t phase = 0;          // steps of one phase are contiguous, phases in increasing order
  std::vector<RowRef> reads;        // must be resident during the step: loaded if not
  std::vector<RowRef> writes;       // produced by the step: a slot is allocated without a load
  std::vector<RowRef> accumulates;  // read-modify-write: the first touch in the epoch gets a zeroed slot;
                                    // a later touch of a row that left the device loads it first
  // The rest of each list, after its RowRefs: runs of rows held elsewhere, at no cost per row (the executor's
  // traces list a subgraph's sources or a chunk's rows this way).
  std::vector<RowRun> read_runs, write_runs, accumulate_runs;
  // The step's loads wait for something outside the trace (rows received from other ranks): they are never
  // prefetched during the previous step.
  bool fence = false;
};

struct AccessTrace {
  std::vector<TensorSpec> tensors;
  std::vector<TraceStep> steps;
  // [phase][tensor]: slots of that tensor's pool in that phase. Every step must fit: it may touch at most
  // that many distinct rows of the tensor (0 when the phase does not touch the tensor).
  std::vector<std::vector<std::int64_t>> capacity_rows;
  // Out-degree of each vertex; only the degree policy needs it (then it must cover every row in the trace).
  std::vector<std::int64_t> vertex_degree;
  // Embedding reuse: a row with no later access in the epoch leaves the device right after its last step,
  // written back only if it is keep_on_host and dirty; and evicted rows are written back only if their value
  // is read again (or must reach the host). Off: every dirty row that leaves is written back.
  bool release_dead_rows = true;
};

enum class CachePolicy {
  kStAware,    // structural + temporal priority: remaining accesses / distance to the next access
  kLru,        // least recently used
  kFifo,       // first resident, first out
  kDegree,     // PaGraph-style: the highest-degree half of each pool pinned, the rest FIFO
  kSizeOrder,  // transparent swapper: on demand, no prefetch; dead rows stay until pushed out (and are copied
               // back if dirty), but with release_dead_rows a phase end, where the tensor's last reference
               // goes, drops them
  kBelady,     // farthest next access: the optimum in loads, the lower bound the others are measured against
  kNone,       // no reuse: the pool is emptied after every step
};

// Names: st-aware, lru, fifo, degree, size-order, belady, none. Throws InputError listing them otherwise.
CachePolicy parse_cache_policy(const std::string& name);
const char* to_string(CachePolicy policy);

struct SlotAssignment {
  RowRef row;
  std::int32_t slot = 0;  // in the pool of row.tensor for the step's phase
  friend bool operator==(const SlotAssignment&, const SlotAssignment&) = default;
};

// What the executor does for one step, in this order: evict_writeback (device->host, frees the slots), drops
// (free the slots without a copy), loads (host->device), allocations (slots for writes and first-touch
// accumulates; zero the latter), then run the step.
struct StepPlan {
  std::vector<SlotAssignment> evict_writeback;
  std::vector<SlotAssignment> drops;  // empty under CachePlanDetail::kTransfers
  std::vector<SlotAssignment> loads;
  std::vector<SlotAssignment> allocations;
  // The allocations of first-touch accumulates, whose slots start from zero (the others are written whole).
  std::vector<SlotAssignment> zeroed;
  // The step's evict_writeback and loads may run while the previous step computes: none of them writes back
  // a row the previous step touched or loads into a slot it used. Never set on a phase's first step, on a
  // fenced step or on a step without loads.
  bool prefetch = false;
  // The slot of each entry of the step's reads, writes and accumulates, in the same order (RowRefs, then runs);
  // empty under CachePlanDetail::kTransfers.
  std::vector<std::int32_t> read_slots, write_slots, accumulate_slots;
};

// After a phase's last step its pools are released: dirty rows whose value is still needed are copied back
// (with release_dead_rows off: every dirty row), the others are dropped.
struct PhaseEnd {
  std::vector<SlotAssignment> writeback;
};

struct CachePlan {
  std::vector<StepPlan> steps;
  std::vector<PhaseEnd> phase_ends;  // one per phase of capacity_rows
  std::int64_t h2d_bytes = 0;
  std::int64_t d2h_bytes = 0;
  // Per step and distinct row whose value the step needs (a read, or an accumulate after the row's first
  // touch): a hit if it was resident when the step began, a miss if it was loaded.
  std::int64_t hits = 0;
  std::int64_t misses = 0;
  std::vector<std::vector<std::int64_t>> peak_rows;  // [phase][tensor]: most rows resident at once
  std::int64_t total_bytes() const { return h2d_bytes + d2h_bytes; }
};

// How much of the plan to record. kTransfers leaves out what the executor does not need: the drops (a dropped
// row's slot is simply taken by a later load or allocation) and the slot of every list entry (the slot a row
// was last loaded or allocated into, which the executor tracks); every other field is as kFull records it.
enum class CachePlanDetail { kFull, kTransfers };

// Throws InputError for a malformed trace or a step that does not fit its pools. Phases are planned apart, by up to
// `threads` threads at once (0: OpenMP's threads, where the trace has over a million entries); the plan is the
// same for any number.
CachePlan plan_cache(const AccessTrace& trace, CachePolicy policy, CachePlanDetail detail = CachePlanDetail::kFull,
                     int threads = 0);

}  // namespace nj
