#pragma once
// The cache planner's view of an access trace: validated, then indexed one phase at a time with each row's next
// use and remaining touches (what every policy's evictions are decided from). Internal to the scheduler.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <limits>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "nj/core/error.hpp"
#include "nj/core/huge_pages.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/scheduler/cache_plan.hpp"

namespace nj::scheduling {

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

inline void validate_shape(const AccessTrace& trace) {
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
inline int planning_threads(int asked, std::int64_t entries) {
  if (asked > 0) return asked;
  return entries >= kParallelOccurrences ? std::max(1, omp_get_max_threads()) : 1;
}

// The entries of a step's lists.
inline std::int64_t entries_of(const TraceStep& step) {
  std::int64_t n = static_cast<std::int64_t>(step.reads.size() + step.writes.size() + step.accumulates.size());
  for (const auto* runs : {&step.read_runs, &step.write_runs, &step.accumulate_runs}) {
    for (const RowRun& run : *runs) n += static_cast<std::int64_t>(run.rows.size());
  }
  return n;
}

// Whether each entry of the step is a distinct row: its lists are runs only, each of distinct rows, no two of one
// tensor.
inline bool lists_only_distinct_runs(const TraceStep& step) {
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
inline std::vector<std::int64_t> validate_steps(const AccessTrace& trace, bool needs_degree, int threads) {
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

}  // namespace nj::scheduling
