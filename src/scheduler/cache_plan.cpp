#include "nj/scheduler/cache_plan.hpp"

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

#include "nj/core/enum_names.hpp"
#include "nj/core/error.hpp"
#include "nj/core/huge_pages.hpp"
#include "nj/core/stopwatch.hpp"
#include "scheduler/evictors.hpp"
#include "scheduler/trace_index.hpp"

namespace nj {
namespace scheduling {
namespace {

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

constexpr EnumNames<CachePolicy, 7> kPolicyNames{"cache policy",
                                                 {{{CachePolicy::kStAware, "st-aware"},
                                                   {CachePolicy::kLru, "lru"},
                                                   {CachePolicy::kFifo, "fifo"},
                                                   {CachePolicy::kDegree, "degree"},
                                                   {CachePolicy::kSizeOrder, "size-order"},
                                                   {CachePolicy::kBelady, "belady"},
                                                   {CachePolicy::kNone, "none"}}}};

}  // namespace
}  // namespace scheduling

CachePolicy parse_cache_policy(const std::string& name) { return scheduling::kPolicyNames.parse(name); }
const char* to_string(CachePolicy policy) { return scheduling::kPolicyNames.name(policy); }

CachePlan plan_cache(const AccessTrace& trace, CachePolicy policy, CachePlanDetail detail, int threads) {
  const bool full = detail == CachePlanDetail::kFull;
  scheduling::TraceIndex ix(trace, policy == CachePolicy::kDegree, threads);
  const scheduling::Traits traits = scheduling::traits_of(policy, trace.release_dead_rows);
  // Rows are numbered per phase while it is planned: a keyed evictor needs the largest phase's, once per planner.
  std::size_t rows = 0;
  for (std::size_t p = 0; p < trace.capacity_rows.size(); ++p) rows = std::max<std::size_t>(rows, ix.phase_rows(p));
  const std::size_t tensors = trace.tensors.size();
  switch (policy) {
    case CachePolicy::kStAware:
      return scheduling::run_planners(trace, ix, traits, full,
                                      [&] { return scheduling::NextUseEvictor(tensors, true); });
    case CachePolicy::kBelady:
      return scheduling::run_planners(trace, ix, traits, full,
                                      [&] { return scheduling::NextUseEvictor(tensors, false); });
    case CachePolicy::kLru:
      return scheduling::run_planners(trace, ix, traits, full,
                                      [&] { return scheduling::KeyedEvictor(rows, tensors, true); });
    default:
      return scheduling::run_planners(trace, ix, traits, full,
                                      [&] { return scheduling::KeyedEvictor(rows, tensors, false); });
  }
}

}  // namespace nj
