#include "nj/exec/cache_plan.hpp"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <limits>
#include <numeric>
#include <span>
#include <utility>

#include "nj/core/error.hpp"
#include "nj/core/huge_pages.hpp"
#include "nj/core/stopwatch.hpp"

namespace nj {
namespace {

constexpr std::int32_t kNever = std::numeric_limits<std::int32_t>::max();
// How many rows ahead a pass over a step's touches fetches per-row state it is about to read.
constexpr std::size_t kAhead = 16;
constexpr std::uint32_t kNoRow = std::numeric_limits<std::uint32_t>::max();

// Touch::bits
constexpr std::uint8_t kRead = 1;
constexpr std::uint8_t kWrite = 2;
constexpr std::uint8_t kAccumulate = 4;
constexpr std::uint8_t kLater = 8;    // the row is touched again later in the epoch
constexpr std::uint8_t kLive = 16;    // its value after the step is read again, or must end on the host
constexpr std::uint8_t kBefore = 32;  // an accumulate of a row an earlier phase touched: it loads, not zeroes

// One distinct row of one step, with what the rest of the epoch does to it.
struct Touch {
  std::uint32_t row;       // dense over all tensors: tensor base + vertex id
  std::int32_t next;       // step of the row's next touch in the same phase, kNever if none
  std::int32_t remaining;  // touches of the row later in the same phase
  std::uint16_t tensor;
  std::uint8_t bits;
};
static_assert(sizeof(Touch) == 16);

void validate_shape(const AccessTrace& trace) {
  const std::size_t num_tensors = trace.tensors.size();
  NJ_REQUIRE(num_tensors <= std::numeric_limits<std::uint16_t>::max(), "cache trace: {} tensors, more than {}",
             num_tensors, std::numeric_limits<std::uint16_t>::max());
  NJ_REQUIRE(trace.capacity_rows.size() < std::numeric_limits<std::uint16_t>::max(),
             "cache trace: {} phases, more than {}", trace.capacity_rows.size(),
             std::numeric_limits<std::uint16_t>::max() - 1);
  for (const TensorSpec& tensor : trace.tensors) {
    NJ_REQUIRE(tensor.row_bytes > 0, "cache trace: tensor '{}' has row_bytes {} (must be positive)", tensor.name,
               tensor.row_bytes);
  }
  for (std::size_t p = 0; p < trace.capacity_rows.size(); ++p) {
    NJ_REQUIRE(trace.capacity_rows[p].size() == num_tensors,
               "cache trace: capacity_rows[{}] has {} entries for {} tensors", p, trace.capacity_rows[p].size(),
               num_tensors);
    for (std::size_t t = 0; t < num_tensors; ++t) {
      NJ_REQUIRE(trace.capacity_rows[p][t] >= 0, "cache trace: tensor '{}' has capacity {} in phase {}",
                 trace.tensors[t].name, trace.capacity_rows[p][t], p);
    }
  }
}

// Traces with at least this many entries are indexed and planned on OpenMP's threads, unless told how many.
constexpr std::int64_t kParallelOccurrences = std::int64_t{1} << 20;
int planning_threads(int asked, std::int64_t entries) {
  if (asked > 0) return asked;
  return entries >= kParallelOccurrences ? std::max(1, omp_get_max_threads()) : 1;
}

// The entries of a step's lists.
std::int64_t entries_of(const TraceStep& step) {
  std::int64_t n = static_cast<std::int64_t>(step.reads.size() + step.writes.size() + step.accumulates.size());
  for (const auto* runs : {&step.read_runs, &step.write_runs, &step.accumulate_runs}) {
    for (const RowRun& run : *runs) n += static_cast<std::int64_t>(run.rows.size());
  }
  return n;
}

// Whether each entry of the step is a distinct row: its lists are runs only, each of distinct rows, no two of one
// tensor.
bool lists_only_distinct_runs(const TraceStep& step) {
  if (!step.reads.empty() || !step.writes.empty() || !step.accumulates.empty()) return false;
  std::uint32_t tensors[3];
  std::size_t count = 0;
  for (const auto* runs : {&step.read_runs, &step.write_runs, &step.accumulate_runs}) {
    for (const RowRun& run : *runs) {
      if (!run.distinct || count == 3) return false;
      for (std::size_t k = 0; k < count; ++k) {
        if (tensors[k] == run.tensor) return false;
      }
      tensors[count++] = run.tensor;
    }
  }
  return true;
}

// Returns the number of rows of each tensor (one past the largest row in the trace).
std::vector<std::int64_t> validate_steps(const AccessTrace& trace, bool needs_degree, int threads) {
  const std::size_t num_steps = trace.steps.size();
  std::vector<std::int64_t> rows(trace.tensors.size(), 0);
  // A run is in range when its smallest and largest rows are: those, per run, on every thread first (a run holds
  // up to a subgraph's sources), checked below in step order.
  // Sized first: nothing in the parallel loop allocates (or throws).
  std::vector<std::vector<std::pair<vid_t, vid_t>>> run_bounds(num_steps);
  for (std::size_t i = 0; i < num_steps; ++i) {
    const TraceStep& step = trace.steps[i];
    run_bounds[i].resize(step.read_runs.size() + step.write_runs.size() + step.accumulate_runs.size());
  }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (std::size_t i = 0; i < num_steps; ++i) {
    const TraceStep& step = trace.steps[i];
    std::size_t r = 0;
    for (const auto* runs : {&step.read_runs, &step.write_runs, &step.accumulate_runs}) {
      for (const RowRun& run : *runs) {
        if (run.rows.empty()) {
          run_bounds[i][r++] = {0, 0};
          continue;
        }
        const auto [low, high] = std::minmax_element(run.rows.begin(), run.rows.end());
        run_bounds[i][r++] = {*low, *high};
      }
    }
  }
  std::uint32_t previous_phase = 0;
  for (std::size_t i = 0; i < num_steps; ++i) {
    const TraceStep& step = trace.steps[i];
    NJ_REQUIRE(step.phase < trace.capacity_rows.size(), "cache trace: step {} is in phase {}, but capacity_rows has {}",
               i, step.phase, trace.capacity_rows.size());
    NJ_REQUIRE(step.phase >= previous_phase,
               "cache trace: step {} is in phase {} after a step of phase {} (phases must not decrease)", i, step.phase,
               previous_phase);
    previous_phase = step.phase;
    const auto check = [&](std::uint32_t tensor, vid_t row) {
      NJ_REQUIRE(tensor < trace.tensors.size(), "cache trace: step {} touches tensor {} of {}", i, tensor,
                 trace.tensors.size());
      NJ_REQUIRE(row >= 0, "cache trace: step {} touches row {} of tensor '{}'", i, row, trace.tensors[tensor].name);
      NJ_REQUIRE(!needs_degree || static_cast<std::size_t>(row) < trace.vertex_degree.size(),
                 "cache trace: step {} touches vertex {}, but vertex_degree covers {} (the degree policy needs it)", i,
                 row, trace.vertex_degree.size());
      rows[tensor] = std::max<std::int64_t>(rows[tensor], std::int64_t{row} + 1);
    };
    for (const auto* list : {&step.reads, &step.writes, &step.accumulates}) {
      for (const RowRef& ref : *list) check(ref.tensor, ref.row);
    }
    std::size_t r = 0;
    for (const auto* runs : {&step.read_runs, &step.write_runs, &step.accumulate_runs}) {
      for (const RowRun& run : *runs) {
        const auto [low, high] = run_bounds[i][r++];
        if (run.rows.empty()) continue;
        check(run.tensor, low);
        check(run.tensor, high);
      }
    }
  }
  return rows;
}

// Per row, what indexing a phase needs: the touch of the step being indexed, then (sweeping backward) the step of
// its next touch, how many touches it has from there on and that touch's kinds; together, so that a touch reads one
// cache line.
struct RowScratch {
  std::int32_t mark = -1;
  std::int32_t count = 0;
  std::uint8_t bits = 0;
};

// One phase of the trace indexed for planning: distinct rows per step, with next-use information from one backward
// sweep over the phase, so that no policy has to look ahead at run time (16 bytes per distinct row of a step).
struct PhaseTouches {
  // Rows are numbered over the tensors the phase touches only: tensor t's row r is base[t] + r, of `rows`.
  std::vector<std::uint32_t> base;
  std::uint32_t rows = 0;
  std::size_t first_step = 0;
  std::vector<std::size_t> step_begin;  // touches of the phase's j-th step: [step_begin[j], step_begin[j + 1])
  // Read and written in order, but the touches of the largest phases are faulted in fresh (1.2 GB each on the
  // 100M-edge graph, two at once): on huge pages that is 512 times fewer faults, and under a hypervisor each
  // costs a trip to the host (a 2-core EPYC VM planned that graph's cache 1.3-2.2 s faster).
  HugeVector<Touch> touches;
  HugeVector<RowScratch> scratch;  // per row of the phase
  // The touches of step i of the phase.
  std::span<const Touch> step(std::size_t i) const {
    const std::size_t j = i - first_step;
    return {touches.data() + step_begin[j], step_begin[j + 1] - step_begin[j]};
  }
};

// The trace reduced to what planning needs, one phase at a time. Only the phase being planned is indexed; of the
// others, what a phase needs to know about the rest of the epoch is kept: which rows each phase touches, and
// whether it first reads them, and the first phase that touches each row. Phases can so be planned apart (and at
// once, each by a planner of its own).
class TraceIndex {
 public:
  // On `threads` threads where it asks for more than one (see planning_threads).
  TraceIndex(const AccessTrace& trace, bool needs_degree, int threads_asked) : trace_(trace) {
    validate_shape(trace);
    std::vector<std::int64_t> step_entries(trace.steps.size());
    std::ranges::transform(trace.steps, step_entries.begin(), entries_of);
    threads = planning_threads(threads_asked, std::reduce(step_entries.begin(), step_entries.end(), std::int64_t{0}));
    const std::vector<std::int64_t> rows = validate_steps(trace, needs_degree, threads);
    const std::size_t num_tensors = trace.tensors.size();
    const std::size_t num_steps = trace.steps.size();
    const std::size_t num_phases = trace.capacity_rows.size();
    base.resize(num_tensors + 1, 0);
    std::int64_t total = 0;
    for (std::size_t t = 0; t < num_tensors; ++t) {
      base[t] = static_cast<std::uint32_t>(total);
      total += rows[t];
      NJ_REQUIRE(total < std::int64_t{kNoRow}, "cache trace: {} rows over all tensors is more than the planner indexes",
                 total);
    }
    base[num_tensors] = static_cast<std::uint32_t>(total);
    phase_begin.assign(num_phases + 1, num_steps);
    for (std::size_t i = num_steps; i-- > 0;) phase_begin[trace.steps[i].phase] = i;
    for (std::size_t p = num_phases; p-- > 0;) phase_begin[p] = std::min(phase_begin[p], phase_begin[p + 1]);

    // What each phase does first to each row it touches: the kinds of its first step's touches. Phases are
    // independent here: on OpenMP's threads where the trace is large, largest first, each thread marking rows with
    // the step that first touched them in a scratch array of its own (a mark outside the phase's steps is none).
    first_.resize(num_phases * num_tensors);
    phase_occurrences_.assign(num_phases, 0);
    for (std::size_t p = 0; p < num_phases; ++p) {
      for (std::size_t i = phase_begin[p]; i < phase_begin[p + 1]; ++i) phase_occurrences_[p] += step_entries[i];
      if (phase_begin[p] < phase_begin[p + 1]) phases_largest_first.push_back(p);
    }
    // A phase takes time about in proportion to its entries: the largest first, so that the threads finish
    // together (the 100M-edge graph's first layer: 10 s, where the one-thread order had it start last). Phases
    // without steps touch nothing: each thread's marks (4 bytes per row) are allocated once it has a phase.
    std::ranges::stable_sort(phases_largest_first, std::ranges::greater{},
                             [&](std::size_t p) { return phase_occurrences_[p]; });
    const std::vector<std::size_t>& phases = phases_largest_first;
    // No exception leaves the parallel region; the first phase's that threw is rethrown.
    std::vector<std::exception_ptr> errors(num_phases);
    std::atomic<std::size_t> next{0};
    const auto indexing_threads = static_cast<int>(std::clamp<std::size_t>(phases.size(), 1, threads));
#pragma omp parallel num_threads(indexing_threads)
    {
      HugeVector<std::int32_t> first_step_of;
      for (std::size_t k = next++; k < phases.size(); k = next++) {
        const std::size_t p = phases[k];
        try {
          if (first_step_of.empty()) first_step_of.assign(static_cast<std::size_t>(total), -1);
          const auto phase_start = static_cast<std::int32_t>(phase_begin[p]);
          const auto phase_end = static_cast<std::int32_t>(phase_begin[p + 1]);
          for (std::size_t i = phase_begin[p]; i < phase_begin[p + 1]; ++i) {
            const auto step = static_cast<std::int32_t>(i);
            for_each_ref(trace.steps[i], base, first_step_of, [&](const RowRef& ref, std::uint8_t kind) {
              HugeVector<std::uint8_t>& first = first_[p * num_tensors + ref.tensor];
              if (first.empty()) first.assign(static_cast<std::size_t>(rows[ref.tensor]), 0);
              std::int32_t& first_step = first_step_of[base[ref.tensor] + static_cast<std::uint32_t>(ref.row)];
              std::uint8_t& kinds = first[static_cast<std::size_t>(ref.row)];
              if (first_step < phase_start || first_step >= phase_end) {
                first_step = step;
                kinds = kind;
              } else if (first_step == step) {
                kinds |= kind;
              }
            });
          }
        } catch (...) {
          errors[p] = std::current_exception();
        }
      }
    }
    for (const std::exception_ptr& error : errors) {
      if (error) std::rethrow_exception(error);
    }
    // The first phase that touches each row.
    first_phase_.assign(static_cast<std::size_t>(total), std::numeric_limits<std::uint16_t>::max());
    for (std::size_t p = num_phases; p-- > 0;) {
      for (std::size_t t = 0; t < num_tensors; ++t) {
        const HugeVector<std::uint8_t>& first = first_[p * num_tensors + t];
        for (std::size_t r = 0; r < first.size(); ++r) {
          if (first[r] != 0) first_phase_[base[t] + r] = static_cast<std::uint16_t>(p);
        }
      }
    }
  }

  std::vector<std::uint32_t> base;                // per tensor: dense id of its row 0; back() = number of rows
  std::vector<std::size_t> phase_begin;           // steps of phase p: [phase_begin[p], phase_begin[p + 1])
  int threads = 1;                                // how many index and plan the trace
  std::vector<std::size_t> phases_largest_first;  // the phases with steps, by entries (ties: in order)

  // Rows of the tensors phase p touches (how planning numbers them while it plans the phase).
  std::uint32_t phase_rows(std::size_t p) const {
    const std::size_t num_tensors = trace_.tensors.size();
    std::uint32_t rows = 0;
    for (std::size_t t = 0; t < num_tensors; ++t)
      rows += static_cast<std::uint32_t>(first_[p * num_tensors + t].size());
    return rows;
  }

  // Indexes phase p into `out`: distinct rows per step, in order of first appearance over reads, writes,
  // accumulates, each with its next touch and the touches it has left in the phase; the last one in the phase
  // learns whether a later phase touches the row and first reads it, and an accumulate whether an earlier phase
  // touched the row.

  void index_phase(std::size_t p, PhaseTouches& out) const {
    const std::size_t num_tensors = trace_.tensors.size();
    out.base.assign(num_tensors, 0);
    out.rows = 0;
    for (std::size_t t = 0; t < num_tensors; ++t) {
      out.base[t] = out.rows;
      out.rows += static_cast<std::uint32_t>(first_[p * num_tensors + t].size());
    }
    out.first_step = phase_begin[p];
    out.touches.clear();
    // At most one touch per entry: reserved at once, the touches are not copied as they grow (where a vector
    // grows past malloc's mmap threshold, each copy also faults in fresh pages), and what no touch reaches is
    // never resident.
    out.touches.reserve(static_cast<std::size_t>(phase_occurrences_[p]));
    out.step_begin.clear();
    out.scratch.assign(out.rows, RowScratch{});
    HugeVector<Touch>& touches = out.touches;
    HugeVector<RowScratch>& scratch = out.scratch;
    std::vector<std::int64_t> rows_of_tensor(num_tensors, 0);
    for (std::size_t i = phase_begin[p]; i < phase_begin[p + 1]; ++i) {
      const TraceStep& step = trace_.steps[i];
      const std::size_t step_start = touches.size();
      out.step_begin.push_back(step_start);
      if (lists_only_distinct_runs(step)) {
        // Every entry is its own touch: no row needs looking up.
        for_each_ref(
            step, out.base, scratch,
            [&](const RowRef& ref, std::uint8_t kind) {
              touches.push_back({out.base[ref.tensor] + static_cast<std::uint32_t>(ref.row), kNever, 0,
                                 static_cast<std::uint16_t>(ref.tensor), kind});
            },
            /*prefetch=*/false);
      } else {
        for_each_ref(step, out.base, scratch, [&](const RowRef& ref, std::uint8_t kind) {
          const std::uint32_t row = out.base[ref.tensor] + static_cast<std::uint32_t>(ref.row);
          const auto k = static_cast<std::size_t>(static_cast<std::uint32_t>(scratch[row].mark));
          if (k >= step_start && k < touches.size() && touches[k].row == row) {
            touches[k].bits |= kind;
            return;
          }
          scratch[row].mark = static_cast<std::int32_t>(touches.size());
          touches.push_back({row, kNever, 0, static_cast<std::uint16_t>(ref.tensor), kind});
        });
      }
      const std::span<const Touch> touched(touches.data() + step_start, touches.size() - step_start);
      for (const Touch& touch : touched) ++rows_of_tensor[touch.tensor];
      for (const Touch& touch : touched) {
        std::int64_t& count = rows_of_tensor[touch.tensor];
        const std::int64_t capacity = trace_.capacity_rows[step.phase][touch.tensor];
        NJ_REQUIRE(count <= capacity,
                   "cache trace: step {} (phase {}) touches {} rows of tensor '{}', but its pool holds {} rows in "
                   "that phase: give the tensor more capacity or split the step",
                   i, step.phase, count, trace_.tensors[touch.tensor].name, capacity);
        count = 0;
      }
    }
    out.step_begin.push_back(touches.size());

    // Backward sweep: each touch learns the row's next touch and how many touches it has left in the phase; the
    // last one in the phase, whether a later phase touches the row and first reads it. The scratch starts afresh:
    // filling it is one pass over the phase's rows, where undoing the marks would be a random one over its touches.
    scratch.assign(out.rows, RowScratch{});
    const std::size_t num_phases = trace_.capacity_rows.size();
    for (std::size_t j = out.step_begin.size() - 1; j-- > 0;) {
      const auto step = static_cast<std::int32_t>(phase_begin[p] + j);
      for (std::size_t k = out.step_begin[j]; k < out.step_begin[j + 1]; ++k) {
        if (k + kAhead < out.step_begin[j + 1]) __builtin_prefetch(&scratch[touches[k + kAhead].row]);
        Touch& touch = touches[k];
        RowScratch& row = scratch[touch.row];
        const std::int32_t next = row.mark;
        bool later = next >= 0;
        bool live = false;
        if (later) {
          live = (row.bits & (kRead | kAccumulate)) != 0;
          touch.next = next;
          touch.remaining = row.count;
        } else {
          const std::uint32_t vertex = touch.row - out.base[touch.tensor];
          for (std::size_t q = p + 1; q < num_phases && !later; ++q) {
            const HugeVector<std::uint8_t>& first = first_[q * num_tensors + touch.tensor];
            if (first.empty() || first[vertex] == 0) continue;
            later = true;
            live = (first[vertex] & (kRead | kAccumulate)) != 0;
          }
          if (!later) live = trace_.tensors[touch.tensor].keep_on_host;
        }
        const bool before = (touch.bits & kAccumulate) != 0 &&
                            first_phase_[base[touch.tensor] + touch.row - out.base[touch.tensor]] < p;
        touch.bits |= static_cast<std::uint8_t>((later ? kLater : 0) | (live ? kLive : 0) | (before ? kBefore : 0));
        row.count = touch.remaining + 1;
        row.mark = step;
        row.bits = touch.bits;
      }
    }
  }

 private:
  // fn(ref, kind) for every entry of the step's lists; fetches the per-row scratch of runs' rows a few ahead.
  template <typename Scratch, typename Fn>
  void for_each_ref(const TraceStep& step, std::span<const std::uint32_t> row_base, const Scratch& scratch, Fn&& fn,
                    bool prefetch = true) const {
    const auto list = [&](const std::vector<RowRef>& refs, const std::vector<RowRun>& runs, std::uint8_t kind) {
      for (const RowRef& ref : refs) fn(ref, kind);
      for (const RowRun& run : runs) {
        const std::uint32_t first = row_base[run.tensor];
        for (std::size_t i = 0; i < run.rows.size(); ++i) {
          if (prefetch && i + kAhead < run.rows.size()) {
            __builtin_prefetch(&scratch[first + static_cast<std::uint32_t>(run.rows[i + kAhead])]);
          }
          fn(RowRef{run.tensor, run.rows[i]}, kind);
        }
      }
    };
    list(step.reads, step.read_runs, kRead);
    list(step.writes, step.write_runs, kWrite);
    list(step.accumulates, step.accumulate_runs, kAccumulate);
  }

  const AccessTrace& trace_;
  // [phase * tensors + tensor]: per row of the tensor, the kinds of the phase's first touch of it (0: none);
  // empty where the phase does not touch the tensor.
  std::vector<HugeVector<std::uint8_t>> first_;
  HugeVector<std::uint16_t> first_phase_;        // per row: the first phase that touches it (none: the largest value)
  std::vector<std::int64_t> phase_occurrences_;  // per phase: entries over its steps' lists
};

// One tensor's slots in the current phase. Free slots form a queue: a load takes the slot freed longest ago,
// the least likely to be one the previous step used (which would forbid prefetching it); an allocation
// happens only once the previous step is done, so it takes the newest. A fresh pool hands allocations out in
// ascending slots, and loads in descending ones (placed from a step's last load, they too ascend along its list), so
// that the rows a step writes or loads into it lie in one run, which kernels read and write in place (where a pass
// fits the pools whole, every step's rows do).
// A slot, and the last step that touched the row it holds or last held (-1: none), which decides whether a load
// into it must wait for the previous step.
struct SlotUse {
  std::int32_t slot;
  std::int32_t last_step;
};

struct Pool {
  HugeVector<std::uint32_t> slot_row;  // kNoRow when free
  HugeVector<SlotUse> free_ring;
  std::size_t free_head = 0;
  std::size_t free_count = 0;
  std::int64_t resident = 0;
  std::int64_t peak = 0;

  void reset(std::int64_t capacity) {
    const auto n = static_cast<std::size_t>(capacity);
    slot_row.assign(n, kNoRow);
    free_ring.resize(n);
    for (std::size_t s = 0; s < n; ++s) free_ring[s] = {static_cast<std::int32_t>(n - 1 - s), -1};
    free_head = 0;
    free_count = n;
    resident = 0;
    peak = 0;
  }
  void push_free(SlotUse slot) {
    free_ring[wrap(free_head + free_count)] = slot;
    ++free_count;
  }
  SlotUse take_oldest() {
    const SlotUse slot = free_ring[free_head];
    free_head = wrap(free_head + 1);
    --free_count;
    return slot;
  }
  SlotUse take_newest() {
    --free_count;
    return free_ring[wrap(free_head + free_count)];
  }
  // A position in the ring from one less than twice its size (without a division on every slot taken).
  std::size_t wrap(std::size_t i) const { return i < free_ring.size() ? i : i - free_ring.size(); }
};

// Eviction candidates ordered by a key fixed when the row last left a step: LRU (the last touch), FIFO and
// size-order (when the row arrived), degree (arrival, with pinned rows after all others). One indexed binary
// heap per pool, so that a row the current step touches leaves the candidates in O(log n).
class KeyedEvictor {
 public:
  KeyedEvictor(std::size_t num_rows, std::size_t num_tensors, bool refresh_on_touch)
      : key_(num_rows, 0), pos_(num_rows, -1), heaps_(num_tensors), refresh_on_touch_(refresh_on_touch) {}

  void start_phase(std::int32_t /*first_step*/, std::int32_t /*end_step*/) {
    for (auto& heap : heaps_) {
      for (const std::uint32_t row : heap) pos_[row] = -1;
      heap.clear();
    }
  }
  void begin_step(std::int32_t /*step*/) {}
  void pin(const Touch& touch) {
    auto& heap = heaps_[touch.tensor];
    const std::int32_t pos = pos_[touch.row];
    NJ_EXPECTS(pos >= 0, "resident row {} is not an eviction candidate", touch.row);
    const std::uint32_t last = heap.back();
    heap.pop_back();
    pos_[touch.row] = -1;
    if (last == touch.row) return;
    place(heap, static_cast<std::size_t>(pos), last);
    sift_down(heap, sift_up(heap, static_cast<std::size_t>(pos)));
  }
  std::uint32_t pop(std::uint32_t tensor, std::int32_t step) {
    auto& heap = heaps_[tensor];
    NJ_EXPECTS(!heap.empty(), "step {} needs a slot of tensor {} but no row can be evicted", step, tensor);
    const std::uint32_t victim = heap.front();
    pos_[victim] = -1;
    const std::uint32_t last = heap.back();
    heap.pop_back();
    if (!heap.empty()) {
      place(heap, 0, last);
      sift_down(heap, 0);
    }
    return victim;
  }
  void insert(const Touch& touch, bool arrived, bool pinned) {
    // Pinned rows sort after every other row of their pool, so they leave only when a step needs more
    // slots than the unpinned rows free.
    constexpr std::int64_t kPinnedBias = std::int64_t{1} << 62;
    if (refresh_on_touch_ || arrived) key_[touch.row] = ++clock_ + (pinned ? kPinnedBias : 0);
    auto& heap = heaps_[touch.tensor];
    heap.push_back(touch.row);
    pos_[touch.row] = static_cast<std::int32_t>(heap.size() - 1);
    sift_up(heap, heap.size() - 1);
  }

 private:
  bool before(std::uint32_t a, std::uint32_t b) const { return key_[a] != key_[b] ? key_[a] < key_[b] : a < b; }
  void place(HugeVector<std::uint32_t>& heap, std::size_t i, std::uint32_t row) {
    heap[i] = row;
    pos_[row] = static_cast<std::int32_t>(i);
  }
  std::size_t sift_up(HugeVector<std::uint32_t>& heap, std::size_t i) {
    const std::uint32_t row = heap[i];
    while (i > 0 && before(row, heap[(i - 1) / 2])) {
      place(heap, i, heap[(i - 1) / 2]);
      i = (i - 1) / 2;
    }
    place(heap, i, row);
    return i;
  }
  void sift_down(HugeVector<std::uint32_t>& heap, std::size_t i) {
    const std::uint32_t row = heap[i];
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= heap.size()) break;
      if (child + 1 < heap.size() && before(heap[child + 1], heap[child])) ++child;
      if (!before(heap[child], row)) break;
      place(heap, i, heap[child]);
      i = child;
    }
    place(heap, i, row);
  }

  HugeVector<std::int64_t> key_;
  HugeVector<std::int32_t> pos_;
  std::vector<HugeVector<std::uint32_t>> heaps_;
  bool refresh_on_touch_;
  std::int64_t clock_ = 0;
};

// Eviction candidates grouped by the step of their next touch in the phase (a bucket per step), each bucket
// a min-heap by remaining touches. A row whose next touch is step t sits in bucket t, so the rows the current
// step touches are exactly its bucket; rows not touched again in the phase wait in a queue and go first.
//
// Belady evicts from the farthest bucket. ST-aware evicts the row of least priority
//   remaining / (next - now + 1),
// the rate at which the row will be used from now on: temporal (how soon it is needed) times structural
// (how many readers it still has). The priority grows as `now` advances, so buckets cannot be kept in one
// static order; instead each step ranks buckets lazily from the farthest down, admitting a bucket only while
// its best possible priority, 1 / (next - now + 1), could still beat the best one admitted.
class NextUseEvictor {
 public:
  NextUseEvictor(std::size_t num_tensors, bool structural) : pools_(num_tensors), structural_(structural) {}

  void start_phase(std::int32_t first_step, std::int32_t end_step) {
    first_step_ = first_step;
    for (Candidates& pool : pools_) {
      pool.buckets.assign(static_cast<std::size_t>(end_step - first_step), {});
      pool.heap_size.assign(static_cast<std::size_t>(end_step - first_step), 0);
      pool.never.clear();
      pool.never_head = 0;
      pool.top = first_step - 1;
      pool.ranked_at = -1;
    }
  }
  // The step's bucket held exactly the rows it touches: emptied, its memory kept for a bucket that grows large
  // (see grow), in place of the smallest spare where there are enough.
  void begin_step(std::int32_t step) {
    for (Candidates& pool : pools_) {
      HugeVector<Entry>& taken = bucket(pool, step);
      pool.heap_size[static_cast<std::size_t>(step - first_step_)] = 0;
      taken.clear();
      if (taken.capacity() * sizeof(Entry) >= kHugePageBytes) {
        if (pool.spare.size() < kSpareBuckets) {
          pool.spare.emplace_back().swap(taken);
        } else {
          const auto smallest = std::ranges::min_element(pool.spare, {}, &HugeVector<Entry>::capacity);
          if (smallest->capacity() < taken.capacity()) smallest->swap(taken);
        }
      }
      HugeVector<Entry>().swap(taken);
    }
  }
  void pin(const Touch& /*touch*/) {}  // begin_step emptied the step's bucket, which held exactly its rows
  std::uint32_t pop(std::uint32_t tensor, std::int32_t step) {
    Candidates& pool = pools_[tensor];
    if (pool.never_head < pool.never.size()) return pool.never[pool.never_head++];
    if (pool.ranked_at != step) {
      while (pool.top > step && bucket(pool, pool.top).empty()) --pool.top;
      pool.frontier = pool.top;
      pool.ranked.clear();
      pool.ranked_at = step;
    }
    while (pool.frontier > step) {
      const HugeVector<Entry>& entries = heap_of(pool, pool.frontier);
      if (!entries.empty()) {
        // Nearer buckets only win with a strictly lower priority: ties go to the farther next use, as in Belady.
        if (!pool.ranked.empty() && priority(1, pool.frontier, step) >= pool.ranked.front().priority) break;
        pool.ranked.push_back({priority(entries.front().remaining, pool.frontier, step), pool.frontier});
        std::push_heap(pool.ranked.begin(), pool.ranked.end(), ranked_after);
      }
      --pool.frontier;
    }
    NJ_EXPECTS(!pool.ranked.empty(), "step {} needs a slot of tensor {} but no row can be evicted", step, tensor);
    std::pop_heap(pool.ranked.begin(), pool.ranked.end(), ranked_after);
    const std::int32_t next = pool.ranked.back().next;
    pool.ranked.pop_back();
    HugeVector<Entry>& entries = heap_of(pool, next);
    std::pop_heap(entries.begin(), entries.end(), std::greater<>());
    const std::uint32_t victim = entries.back().row;
    entries.pop_back();
    pool.heap_size[static_cast<std::size_t>(next - first_step_)] = static_cast<std::uint32_t>(entries.size());
    if (!entries.empty()) {
      pool.ranked.push_back({priority(entries.front().remaining, next, step), next});
      std::push_heap(pool.ranked.begin(), pool.ranked.end(), ranked_after);
    }
    return victim;
  }
  void insert(const Touch& touch, bool /*arrived*/, bool /*pinned*/) {
    Candidates& pool = pools_[touch.tensor];
    if (touch.next == kNever) {
      pool.never.push_back(touch.row);
      return;
    }
    HugeVector<Entry>& entries = bucket(pool, touch.next);
    if (entries.size() == entries.capacity()) grow(pool, entries);
    entries.push_back({touch.remaining, touch.row});
    pool.top = std::max(pool.top, touch.next);
  }

 private:
  struct Entry {
    std::int32_t remaining;
    std::uint32_t row;
    friend auto operator<=>(const Entry&, const Entry&) = default;
  };
  struct Ranked {
    double priority;
    std::int32_t next;
  };
  struct Candidates {
    std::vector<HugeVector<Entry>> buckets;  // by next touch - first step of the phase
    // How many of the bucket's first entries form a heap: rows join a bucket at its end, and it is made a heap only
    // when a victim is sought in it (most buckets never are: their step arrives first and takes them whole).
    std::vector<std::uint32_t> heap_size;
    std::vector<std::uint32_t> never;  // a queue: the oldest, least likely used by the last step, first
    std::size_t never_head = 0;
    std::int32_t top = 0;         // no bucket above this step holds rows
    std::int32_t ranked_at = -1;  // the step `ranked` and `frontier` belong to
    std::int32_t frontier = 0;    // buckets above it are in `ranked` (or empty)
    std::vector<Ranked> ranked;   // heap of admitted buckets, least priority first
    // Memory of emptied buckets, and of those that outgrew it, for buckets that grow. Buckets fill over many
    // steps, up to a step's rows (millions on large graphs), and each growth would take memory fresh from the
    // system, faulted in page by page (the 100M-edge graph's backward phases: 1.2 GB each, where the rows in all
    // buckets are at most the resident ones).
    std::vector<HugeVector<Entry>> spare;
  };

  // A few spares at a time: one bucket empties per step, and the memory they hold (until the planner is done) is
  // memory kept from other uses.
  static constexpr std::size_t kSpareBuckets = 4;

  // Moves a full bucket into the smallest spare that holds twice its entries, its old memory taking the spare's
  // place where it is a huge page or more; where no spare does, it grows into new memory of that size. Small
  // buckets grow through malloc, which recycles small memory itself (a spare would be wasted on them).
  static void grow(Candidates& pool, HugeVector<Entry>& entries) {
    const std::size_t wanted = std::max<std::size_t>(2 * entries.size(), 16);
    if (wanted * sizeof(Entry) < kHugePageBytes) {
      entries.reserve(wanted);
      return;
    }
    HugeVector<Entry>* best = nullptr;
    for (HugeVector<Entry>& spare : pool.spare) {
      if (spare.capacity() >= wanted && (best == nullptr || spare.capacity() < best->capacity())) best = &spare;
    }
    if (best == nullptr) {
      entries.reserve(wanted);
      return;
    }
    best->assign(entries.begin(), entries.end());
    entries.clear();
    entries.swap(*best);
    if (best->capacity() * sizeof(Entry) < kHugePageBytes) {
      std::swap(*best, pool.spare.back());
      pool.spare.pop_back();
    }
  }

  HugeVector<Entry>& bucket(Candidates& pool, std::int32_t step) const {
    return pool.buckets[static_cast<std::size_t>(step - first_step_)];
  }
  // The bucket of a step as a min-heap by remaining touches: its rows that joined since it last was one are added
  // one by one where they are few, or the whole bucket is made a heap again.
  HugeVector<Entry>& heap_of(Candidates& pool, std::int32_t step) const {
    const auto b = static_cast<std::size_t>(step - first_step_);
    HugeVector<Entry>& entries = pool.buckets[b];
    const std::size_t heaped = pool.heap_size[b];
    if (heaped < entries.size()) {
      if ((entries.size() - heaped) * 8 > entries.size()) {
        std::make_heap(entries.begin(), entries.end(), std::greater<>());
      } else {
        for (std::size_t n = heaped + 1; n <= entries.size(); ++n) {
          std::push_heap(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(n), std::greater<>());
        }
      }
      pool.heap_size[b] = static_cast<std::uint32_t>(entries.size());
    }
    return entries;
  }
  double priority(std::int32_t remaining, std::int32_t next, std::int32_t now) const {
    const double uses = structural_ ? static_cast<double>(remaining) : 1.0;
    return uses / static_cast<double>(next - now + 1);
  }
  static bool ranked_after(const Ranked& a, const Ranked& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.next < b.next;
  }

  std::vector<Candidates> pools_;
  bool structural_;
  std::int32_t first_step_ = 0;
};

struct Traits {
  bool aware;  // honours release_dead_rows: dead rows leave at once, only live values are written back
  // Even unaware, a phase end (where a tensor's reference count would drop) writes back only live values.
  bool drops_dead_at_phase_end;
  bool reuse;     // rows stay resident between steps
  bool prefetch;  // steps may be marked for prefetch
  bool pin_by_degree;
};

// Row flags
constexpr std::uint8_t kDirty = 1;
constexpr std::uint8_t kTouched = 2;  // touched earlier in the phase (kBefore tells of earlier phases)
constexpr std::uint8_t kRowLive = 4;
constexpr std::uint8_t kPinned = 8;
constexpr std::uint8_t kArrived = 16;  // became resident in the current step

// The one simulation loop every policy shares; the evictor is the policy's victim order.
template <class Evictor>
class Planner {
 public:
  // Writes into `plan`, whose steps, phase ends and peaks are sized: a phase's own entries only, so that planners
  // of other phases may write theirs at the same time.
  Planner(const AccessTrace& trace, const TraceIndex& ix, Traits traits, Evictor evictor, bool full, CachePlan& plan)
      : trace_(trace),
        ix_(ix),
        traits_(traits),
        evictor_(std::move(evictor)),
        full_(full),

        pools_(trace.tensors.size()),
        plan_(plan) {}

  // What the phases this planner planned add to the plan's totals.
  struct Totals {
    std::int64_t h2d_bytes = 0, d2h_bytes = 0, hits = 0, misses = 0;
  };
  Totals totals;

  // A phase depends on the others only through what the index says of them, whatever this planner planned before.
  void plan_phase(std::size_t p) {
    const auto index_start = std::chrono::steady_clock::now();
    ix_.index_phase(p, phase_);
    const double index_seconds = seconds_since(index_start);
    const auto plan_start = std::chrono::steady_clock::now();
    // Row states last a phase: what earlier phases did to a row, the index says (kBefore).
    rows_.assign(phase_.rows, RowState{});
    start_phase(p);
    for (std::size_t i = ix_.phase_begin[p]; i < ix_.phase_begin[p + 1]; ++i) run_step(i, i == ix_.phase_begin[p]);
    end_phase(p);
    spdlog::debug("cache plan: phase {}: {} touches of {} rows indexed in {:.2f} s, planned in {:.2f} s", p,
                  phase_.touches.size(), phase_.rows, index_seconds, seconds_since(plan_start));
  }

 private:
  void start_phase(std::size_t p) {
    for (std::size_t t = 0; t < pools_.size(); ++t) pools_[t].reset(trace_.capacity_rows[p][t]);
    evictor_.start_phase(static_cast<std::int32_t>(ix_.phase_begin[p]),
                         static_cast<std::int32_t>(ix_.phase_begin[p + 1]));
    if (traits_.pin_by_degree) pin_by_degree(p);
  }

  // PaGraph: of the rows each pool sees in the phase, the highest-degree ones, up to half its slots.
  void pin_by_degree(std::size_t p) {
    std::vector<std::vector<std::uint32_t>> seen(pools_.size());
    for (const Touch& touch : phase_.touches) {
      if (rows_[touch.row].flags & kPinned) continue;
      rows_[touch.row].flags |= kPinned;
      seen[touch.tensor].push_back(touch.row);
    }
    pinned_.clear();
    for (std::size_t t = 0; t < pools_.size(); ++t) {
      std::vector<std::uint32_t>& rows = seen[t];
      for (const std::uint32_t row : rows) rows_[row].flags &= static_cast<std::uint8_t>(~kPinned);
      const auto pinned = std::min(rows.size(), static_cast<std::size_t>(trace_.capacity_rows[p][t] / 2));
      const auto degree = [&](std::uint32_t row) { return trace_.vertex_degree[row - phase_.base[t]]; };
      std::nth_element(
          rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(pinned), rows.end(),
          [&](std::uint32_t a, std::uint32_t b) { return degree(a) != degree(b) ? degree(a) > degree(b) : a < b; });
      for (std::size_t k = 0; k < pinned; ++k) {
        rows_[rows[k]].flags |= kPinned;
        pinned_.push_back(rows[k]);
      }
    }
  }

  void end_phase(std::size_t p) {
    PhaseEnd& end = plan_.phase_ends[p];
    end.writeback = std::move(pending_writeback_);
    pending_writeback_.clear();
    pending_drops_.clear();
    for (std::size_t t = 0; t < pools_.size(); ++t) {
      Pool& pool = pools_[t];
      plan_.peak_rows[p][t] = pool.peak;
      for (const std::uint32_t row : pool.slot_row) {
        if (row != kNoRow) leave(row, static_cast<std::uint32_t>(t), end.writeback, pending_drops_, true);
      }
    }
    pending_drops_.clear();
    for (const std::uint32_t row : pinned_) rows_[row].flags &= static_cast<std::uint8_t>(~kPinned);
  }

  bool needs_value(const Touch& touch) const {
    return (touch.bits & kRead) ||
           ((touch.bits & kAccumulate) && ((touch.bits & kBefore) || (rows_[touch.row].flags & kTouched)));
  }
  bool must_write_back(std::uint32_t row, bool at_phase_end) const {
    const bool knows_liveness = traits_.aware || (at_phase_end && traits_.drops_dead_at_phase_end);
    return (rows_[row].flags & kDirty) && (!knows_liveness || (rows_[row].flags & kRowLive));
  }
  RowRef ref(std::uint32_t row, std::uint32_t tensor) const {
    return {tensor, static_cast<vid_t>(row - phase_.base[tensor])};
  }

  // Takes the row off the device, recording the copy if its value must survive; returns its slot.
  std::int32_t leave(std::uint32_t row, std::uint32_t tensor, std::vector<SlotAssignment>& writeback,
                     std::vector<SlotAssignment>& drops, bool at_phase_end = false) {
    RowState& state = rows_[row];
    const std::int32_t slot = state.slot;
    if (must_write_back(row, at_phase_end)) {
      writeback.push_back({ref(row, tensor), slot});
      totals.d2h_bytes += trace_.tensors[tensor].row_bytes;
    } else if (full_) {
      drops.push_back({ref(row, tensor), slot});
    }
    Pool& pool = pools_[tensor];
    pool.slot_row[static_cast<std::size_t>(slot)] = kNoRow;
    --pool.resident;
    state.slot = -1;
    state.flags &= static_cast<std::uint8_t>(~kDirty);
    return slot;
  }

  SlotUse acquire(std::uint32_t tensor, std::int32_t step, bool load, StepPlan& plan) {
    Pool& pool = pools_[tensor];
    if (pool.free_count > 0) return load ? pool.take_oldest() : pool.take_newest();
    const std::uint32_t victim = evictor_.pop(tensor, step);
    const std::int32_t last_step = rows_[victim].last_step;
    NJ_EXPECTS(last_step != step, "the planner evicted row {} that step {} touches", victim, step);
    if (last_step == step - 1 && must_write_back(victim, false)) prefetch_blocked_ = true;
    return {leave(victim, tensor, plan.evict_writeback, plan.drops), last_step};
  }

  void run_step(std::size_t i, bool first_of_phase) {
    const auto step = static_cast<std::int32_t>(i);
    StepPlan& plan = plan_.steps[i];
    // Rows the previous step released: writing them back has to wait for it to finish.
    prefetch_blocked_ = !pending_writeback_.empty();
    // Copied at their size, so the scratch lists keep their capacity from step to step instead of growing anew.
    plan.evict_writeback.assign(pending_writeback_.begin(), pending_writeback_.end());
    plan.drops.assign(pending_drops_.begin(), pending_drops_.end());
    pending_writeback_.clear();
    pending_drops_.clear();
    evictor_.begin_step(step);

    const std::span<const Touch> touches = phase_.step(i);
    // Resident rows are hits and stay; the others, in order, are placed below.
    missing_.clear();
    for (std::size_t j = 0; j < touches.size(); ++j) {
      // The first look at each row's state: fetch the rows a few touches ahead meanwhile.
      if (j + kAhead < touches.size()) __builtin_prefetch(&rows_[touches[j + kAhead].row]);
      const Touch& touch = touches[j];
      const bool needed = needs_value(touch);
      if (rows_[touch.row].slot < 0) {
        missing_.push_back({static_cast<std::uint32_t>(j), needed});
        continue;
      }
      evictor_.pin(touch);
      if (needed) ++totals.hits;
    }
    // Sized at once: a step's lists reach millions of entries on large graphs, and growing them copies.
    const auto loads = static_cast<std::size_t>(
        std::count_if(missing_.begin(), missing_.end(), [](const Missing& m) { return m.load; }));
    plan.loads.reserve(loads);
    plan.allocations.reserve(missing_.size() - loads);
    const auto place = [&](const Missing& m) {
      const Touch& touch = touches[m.touch];
      const auto [slot, slot_last_step] = acquire(touch.tensor, step, m.load, plan);
      Pool& pool = pools_[touch.tensor];
      pool.slot_row[static_cast<std::size_t>(slot)] = touch.row;
      pool.peak = std::max(pool.peak, ++pool.resident);
      rows_[touch.row].slot = slot;
      rows_[touch.row].flags |= kArrived;
      const SlotAssignment assignment{ref(touch.row, touch.tensor), slot};
      if (!m.load) {
        plan.allocations.push_back(assignment);
        if (touch.bits & kAccumulate) plan.zeroed.push_back(assignment);
        return;
      }
      plan.loads.push_back(assignment);
      totals.h2d_bytes += trace_.tensors[touch.tensor].row_bytes;
      ++totals.misses;
      if (slot_last_step == step - 1) prefetch_blocked_ = true;
    };
    // Loads first, so they get the free slots the previous step is least likely to have used. They are placed
    // from the last: a fresh pool hands loads its slots descending, which then ascend along the list, as
    // allocations' do, so that rows loaded in order lie in one run that kernels read in place.
    for (auto m = missing_.rbegin(); m != missing_.rend(); ++m) {
      if (m->load) place(*m);
    }
    std::reverse(plan.loads.begin(), plan.loads.end());
    for (const Missing& m : missing_) {
      if (!m.load) place(m);
    }

    // Every touched row is in its slot now: it records the step, then leaves (dead, or nothing is reused) or
    // becomes an eviction candidate. The full plan records every entry's slot in between, before any leaves.
    const auto touched = [&](const Touch& touch) {
      RowState& state = rows_[touch.row];
      state.flags =
          static_cast<std::uint8_t>((state.flags & ~kRowLive) | kTouched | ((touch.bits & kLive) ? kRowLive : 0) |
                                    ((touch.bits & (kWrite | kAccumulate)) ? kDirty : 0));
      state.last_step = step;
    };
    const auto release = [&](const Touch& touch) {
      const bool arrived = rows_[touch.row].flags & kArrived;
      rows_[touch.row].flags &= static_cast<std::uint8_t>(~kArrived);
      if (!traits_.reuse || (traits_.aware && !(touch.bits & kLater))) {
        pools_[touch.tensor].push_free({leave(touch.row, touch.tensor, pending_writeback_, pending_drops_), step});
      } else {
        evictor_.insert(touch, arrived, rows_[touch.row].flags & kPinned);
      }
    };
    if (full_) {
      for (const Touch& touch : touches) touched(touch);
      const TraceStep& traced = trace_.steps[i];
      record_slots(traced.reads, traced.read_runs, plan.read_slots);
      record_slots(traced.writes, traced.write_runs, plan.write_slots);
      record_slots(traced.accumulates, traced.accumulate_runs, plan.accumulate_slots);
      for (const Touch& touch : touches) release(touch);
    } else {
      for (std::size_t j = 0; j < touches.size(); ++j) {
        if (j + kAhead < touches.size()) __builtin_prefetch(&rows_[touches[j + kAhead].row]);
        touched(touches[j]);
        release(touches[j]);
      }
    }
    plan.prefetch =
        traits_.prefetch && !first_of_phase && !trace_.steps[i].fence && !plan.loads.empty() && !prefetch_blocked_;
  }

  void record_slots(const std::vector<RowRef>& refs, const std::vector<RowRun>& runs,
                    std::vector<std::int32_t>& slots) const {
    std::size_t count = refs.size();
    for (const RowRun& run : runs) count += run.rows.size();
    slots.reserve(count);
    for (const RowRef& r : refs) slots.push_back(rows_[phase_.base[r.tensor] + static_cast<std::uint32_t>(r.row)].slot);
    for (const RowRun& run : runs) {
      const std::uint32_t base = phase_.base[run.tensor];
      for (const vid_t row : run.rows) slots.push_back(rows_[base + static_cast<std::uint32_t>(row)].slot);
    }
  }

  // Per row, together so that a touch reads one cache line.
  struct RowState {
    std::int32_t slot = -1;  // -1 when not resident
    std::int32_t last_step = -1;
    std::uint8_t flags = 0;
  };

  const AccessTrace& trace_;
  const TraceIndex& ix_;
  PhaseTouches phase_;  // the phase being planned
  Traits traits_;
  Evictor evictor_;
  bool full_;  // CachePlanDetail::kFull: drops and every entry's slot too
  HugeVector<RowState> rows_;
  struct Missing {
    std::uint32_t touch;  // index in the step's touches
    bool load;            // its value is needed: loaded, not allocated
  };
  std::vector<Missing> missing_;  // scratch: the step's touches not resident when it begins
  std::vector<Pool> pools_;
  std::vector<std::uint32_t> pinned_;
  // Rows released after a step; the executor applies that before the next step (or at the phase end).
  std::vector<SlotAssignment> pending_writeback_;
  std::vector<SlotAssignment> pending_drops_;
  bool prefetch_blocked_ = false;
  CachePlan& plan_;
};

Traits traits_of(CachePolicy policy, bool release_dead_rows) {
  Traits traits{.aware = release_dead_rows,
                .drops_dead_at_phase_end = release_dead_rows,
                .reuse = true,
                .prefetch = true,
                .pin_by_degree = false};
  switch (policy) {
    case CachePolicy::kSizeOrder:
      traits.aware = false;
      traits.prefetch = false;
      break;
    case CachePolicy::kNone: traits.reuse = false; break;
    case CachePolicy::kDegree: traits.pin_by_degree = true; break;
    default: break;
  }
  return traits;
}

// Plans every phase, each by one of OpenMP's threads where the trace is large: a planner per thread, taking phases
// largest first. The plan is the same however many there are, in whatever order they run. Of the phases that throw, the
// first one's error is rethrown, as one planner going through them in order would have.
template <class MakeEvictor>
CachePlan run_planners(const AccessTrace& trace, const TraceIndex& ix, Traits traits, bool full, MakeEvictor make) {
  const std::size_t num_phases = trace.capacity_rows.size();
  CachePlan plan;
  plan.steps.resize(trace.steps.size());
  plan.phase_ends.resize(num_phases);
  plan.peak_rows.assign(num_phases, std::vector<std::int64_t>(trace.tensors.size(), 0));
  const std::vector<std::size_t>& phases = ix.phases_largest_first;
  const int threads = static_cast<int>(std::min<std::size_t>(phases.size(), static_cast<std::size_t>(ix.threads)));
  using Totals = typename Planner<decltype(make())>::Totals;
  std::vector<Totals> totals(static_cast<std::size_t>(std::max(threads, 1)));
  std::vector<std::exception_ptr> errors(num_phases);
  std::atomic<std::size_t> next{0};
  // No exception may leave the parallel region: a planner's own allocations failing end its thread's work, and
  // the first failing phase's error (or else a planner's) is thrown after it.
  std::vector<std::exception_ptr> planner_errors(totals.size());
#pragma omp parallel num_threads(std::max(threads, 1))
  {
    const auto thread = static_cast<std::size_t>(omp_get_thread_num());
    try {
      Planner<decltype(make())> planner(trace, ix, traits, make(), full, plan);
      for (std::size_t k = next++; k < phases.size(); k = next++) {
        try {
          planner.plan_phase(phases[k]);
        } catch (...) {
          errors[phases[k]] = std::current_exception();
        }
      }
      totals[thread] = planner.totals;
    } catch (...) {
      planner_errors[thread] = std::current_exception();
    }
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  for (const std::exception_ptr& error : planner_errors) {
    if (error) std::rethrow_exception(error);
  }
  for (const Totals& t : totals) {
    plan.h2d_bytes += t.h2d_bytes;
    plan.d2h_bytes += t.d2h_bytes;
    plan.hits += t.hits;
    plan.misses += t.misses;
  }
  return plan;
}

constexpr std::array<std::pair<CachePolicy, const char*>, 7> kPolicyNames = {{
    {CachePolicy::kStAware, "st-aware"},
    {CachePolicy::kLru, "lru"},
    {CachePolicy::kFifo, "fifo"},
    {CachePolicy::kDegree, "degree"},
    {CachePolicy::kSizeOrder, "size-order"},
    {CachePolicy::kBelady, "belady"},
    {CachePolicy::kNone, "none"},
}};

}  // namespace

CachePolicy parse_cache_policy(const std::string& name) {
  for (const auto& [policy, policy_name] : kPolicyNames) {
    if (name == policy_name) return policy;
  }
  throw InputError(fmt::format(
      "unknown cache policy '{}' (expected st-aware, lru, fifo, degree, size-order, belady or none)", name));
}

const char* to_string(CachePolicy policy) {
  for (const auto& [candidate, name] : kPolicyNames) {
    if (candidate == policy) return name;
  }
  NJ_EXPECTS(false, "cache policy {} has no name", static_cast<int>(policy));
  return "";
}

CachePlan plan_cache(const AccessTrace& trace, CachePolicy policy, CachePlanDetail detail, int threads) {
  const bool full = detail == CachePlanDetail::kFull;
  TraceIndex ix(trace, policy == CachePolicy::kDegree, threads);
  const Traits traits = traits_of(policy, trace.release_dead_rows);
  // Rows are numbered per phase while it is planned: a keyed evictor needs the largest phase's, once per planner.
  std::size_t rows = 0;
  for (std::size_t p = 0; p < trace.capacity_rows.size(); ++p) rows = std::max<std::size_t>(rows, ix.phase_rows(p));
  const std::size_t tensors = trace.tensors.size();
  switch (policy) {
    case CachePolicy::kStAware:
      return run_planners(trace, ix, traits, full, [&] { return NextUseEvictor(tensors, true); });
    case CachePolicy::kBelady:
      return run_planners(trace, ix, traits, full, [&] { return NextUseEvictor(tensors, false); });
    case CachePolicy::kLru:
      return run_planners(trace, ix, traits, full, [&] { return KeyedEvictor(rows, tensors, true); });
    default: return run_planners(trace, ix, traits, full, [&] { return KeyedEvictor(rows, tensors, false); });
  }
}

}  // namespace nj
