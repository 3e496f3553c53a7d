#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "nj/core/error.hpp"
#include "nj/scheduler/cache_plan.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

constexpr std::array kAllPolicies = {CachePolicy::kStAware, CachePolicy::kLru,       CachePolicy::kFifo,
                                     CachePolicy::kDegree,  CachePolicy::kSizeOrder, CachePolicy::kBelady,
                                     CachePolicy::kNone};

constexpr std::uint8_t kRead = 1, kWrite = 2, kAccumulate = 4;

TraceStep step_of(std::uint32_t phase, std::vector<RowRef> reads, std::vector<RowRef> writes = {},
                  std::vector<RowRef> accumulates = {}) {
  TraceStep step;
  step.phase = phase;
  step.reads = std::move(reads);
  step.writes = std::move(writes);
  step.accumulates = std::move(accumulates);
  return step;
}

// Dense ids over all tensors' rows, for the checkers' plain arrays.
struct Dense {
  std::vector<std::size_t> base;
  explicit Dense(const AccessTrace& trace) : base(trace.tensors.size() + 1, 0) {
    std::vector<std::size_t> rows(trace.tensors.size(), 0);
    for (const TraceStep& step : trace.steps) {
      for (const auto* list : {&step.reads, &step.writes, &step.accumulates}) {
        for (const RowRef& r : *list) rows[r.tensor] = std::max(rows[r.tensor], static_cast<std::size_t>(r.row) + 1);
      }
    }
    for (std::size_t t = 0; t < rows.size(); ++t) base[t + 1] = base[t] + rows[t];
  }
  std::size_t operator()(RowRef r) const { return base[r.tensor] + static_cast<std::size_t>(r.row); }
  std::size_t size() const { return base.back(); }
};

// The step's distinct rows in order of first appearance (reads, writes, accumulates) with how it touches them.
std::vector<std::pair<std::size_t, std::uint8_t>> distinct_touches(const TraceStep& step, const Dense& dense) {
  std::vector<std::pair<std::size_t, std::uint8_t>> touches;
  const std::array<std::pair<const std::vector<RowRef>*, std::uint8_t>, 3> lists = {
      {{&step.reads, kRead}, {&step.writes, kWrite}, {&step.accumulates, kAccumulate}}};
  for (const auto& [list, kind] : lists) {
    for (const RowRef& r : *list) {
      const std::size_t row = dense(r);
      const auto it = std::find_if(touches.begin(), touches.end(), [&](const auto& t) { return t.first == row; });
      if (it == touches.end()) {
        touches.emplace_back(row, kind);
      } else {
        it->second = static_cast<std::uint8_t>(it->second | kind);
      }
    }
  }
  return touches;
}

std::size_t tensor_of(const Dense& dense, std::size_t row) {
  return static_cast<std::size_t>(std::upper_bound(dense.base.begin(), dense.base.end(), row) - dense.base.begin()) - 1;
}

// Replays a plan the way the executor would, tracking what every slot holds and which version of each row's
// value the device and the host have. A stale or missing row, a load into a busy slot, a lost dirty value, an
// evicted row the step touches or an impossible prefetch fails the test.
void check_plan(const AccessTrace& trace, const CachePlan& plan, CachePolicy policy) {
  const Dense dense(trace);
  const std::size_t num_tensors = trace.tensors.size();
  std::vector<int> value(dense.size(), 0);  // version of each row's current value; 0 = the epoch's start
  std::vector<int> host(dense.size(), 0);
  std::vector<char> touched(dense.size(), 0);
  std::vector<std::int32_t> where(dense.size(), -1);
  struct Slot {
    std::int64_t row = -1;
    int version = 0;
  };
  ASSERT_EQ(plan.steps.size(), trace.steps.size());
  ASSERT_EQ(plan.phase_ends.size(), trace.capacity_rows.size());
  ASSERT_EQ(plan.peak_rows.size(), trace.capacity_rows.size());
  std::int64_t h2d = 0, d2h = 0, needed = 0, loads = 0;
  std::size_t i = 0;
  for (std::size_t p = 0; p < trace.capacity_rows.size(); ++p) {
    std::vector<std::vector<Slot>> pools(num_tensors);
    for (std::size_t t = 0; t < num_tensors; ++t) pools[t].resize(static_cast<std::size_t>(trace.capacity_rows[p][t]));
    std::vector<std::int64_t> peak(num_tensors, 0);
    std::set<std::pair<std::uint32_t, std::int32_t>> previous_slots;
    std::set<std::size_t> previous_rows;
    const std::size_t first = i;
    const auto slot_of = [&](const SlotAssignment& a) -> Slot* {
      if (a.row.tensor >= num_tensors || a.slot < 0 || static_cast<std::size_t>(a.slot) >= pools[a.row.tensor].size()) {
        return nullptr;
      }
      return &pools[a.row.tensor][static_cast<std::size_t>(a.slot)];
    };
    for (; i < trace.steps.size() && trace.steps[i].phase == p; ++i) {
      const TraceStep& step = trace.steps[i];
      const StepPlan& sp = plan.steps[i];
      SCOPED_TRACE(testing::Message() << "step " << i << " phase " << p << " policy " << to_string(policy));
      const auto touches = distinct_touches(step, dense);
      std::map<std::size_t, std::uint8_t> kinds(touches.begin(), touches.end());
      const auto needs_value = [&](std::size_t row) {
        const std::uint8_t k = kinds.at(row);
        return (k & kRead) || ((k & kAccumulate) && touched[row]);
      };
      for (const bool writeback : {true, false}) {
        for (const SlotAssignment& a : writeback ? sp.evict_writeback : sp.drops) {
          Slot* slot = slot_of(a);
          ASSERT_NE(slot, nullptr) << "slot " << a.slot << " out of range";
          const std::size_t row = dense(a.row);
          ASSERT_EQ(slot->row, static_cast<std::int64_t>(row)) << "the slot does not hold the row it evicts";
          if (policy != CachePolicy::kNone) {
            ASSERT_FALSE(kinds.contains(row)) << "evicts a row the step touches";
          }
          if (writeback) {
            host[row] = slot->version;
            d2h += trace.tensors[a.row.tensor].row_bytes;
            if (sp.prefetch) {
              ASSERT_FALSE(previous_rows.contains(row)) << "prefetch waits on a writeback";
            }
          }
          slot->row = -1;
          where[row] = -1;
        }
      }
      std::vector<std::pair<std::uint32_t, std::int32_t>> expected_zeroed;
      std::vector<std::pair<std::uint32_t, std::int32_t>> zeroed;
      for (const SlotAssignment& a : sp.allocations) {
        if (kinds.at(dense(a.row)) & kAccumulate) expected_zeroed.emplace_back(a.row.tensor, a.slot);
      }
      for (const SlotAssignment& a : sp.zeroed) zeroed.emplace_back(a.row.tensor, a.slot);
      ASSERT_EQ(zeroed, expected_zeroed) << "the zeroed slots are exactly the first-touch accumulates";
      for (const bool load : {true, false}) {
        for (const SlotAssignment& a : load ? sp.loads : sp.allocations) {
          Slot* slot = slot_of(a);
          ASSERT_NE(slot, nullptr) << "slot " << a.slot << " out of range";
          ASSERT_EQ(slot->row, -1) << "slot " << a.slot << " is not free";
          const std::size_t row = dense(a.row);
          ASSERT_TRUE(kinds.contains(row)) << "places a row the step does not touch";
          ASSERT_EQ(where[row], -1) << "the row is already resident";
          ASSERT_EQ(needs_value(row), load) << (load ? "loads a row whose value is not needed"
                                                     : "allocates a row "
                                                       "it must load");
          slot->row = static_cast<std::int64_t>(row);
          if (load) {
            slot->version = host[row];
            h2d += trace.tensors[a.row.tensor].row_bytes;
            ++loads;
            if (sp.prefetch) {
              ASSERT_FALSE(previous_slots.contains({a.row.tensor, a.slot})) << "prefetch into a busy slot";
            }
          } else {
            slot->version = (kinds.at(row) & kAccumulate) ? value[row] : -1;  // zeroed: the start value
          }
          where[row] = a.slot;
        }
      }
      const std::array<std::pair<const std::vector<RowRef>*, const std::vector<std::int32_t>*>, 3> lists = {
          {{&step.reads, &sp.read_slots}, {&step.writes, &sp.write_slots}, {&step.accumulates, &sp.accumulate_slots}}};
      for (std::size_t l = 0; l < lists.size(); ++l) {
        const auto& [refs, slots] = lists[l];
        ASSERT_EQ(refs->size(), slots->size());
        for (std::size_t k = 0; k < refs->size(); ++k) {
          const std::size_t row = dense((*refs)[k]);
          const Slot* slot = slot_of({(*refs)[k], (*slots)[k]});
          ASSERT_NE(slot, nullptr);
          ASSERT_EQ(slot->row, static_cast<std::int64_t>(row)) << "the row is not in its claimed slot";
          ASSERT_EQ(where[row], (*slots)[k]);
          if (l != 1) {
            ASSERT_EQ(slot->version, value[row]) << "the device holds a stale value (lost writeback?)";
          }
        }
      }
      for (const auto& [row, k] : touches) needed += needs_value(row) ? 1 : 0;
      if (sp.prefetch) {
        EXPECT_NE(i, first) << "prefetch on a phase's first step";
        EXPECT_FALSE(sp.loads.empty());
      }
      if (policy == CachePolicy::kSizeOrder) {
        EXPECT_FALSE(sp.prefetch);
      }
      for (std::size_t t = 0; t < num_tensors; ++t) {
        const auto resident = std::count_if(pools[t].begin(), pools[t].end(), [](const Slot& s) { return s.row >= 0; });
        peak[t] = std::max<std::int64_t>(peak[t], resident);
      }
      previous_slots.clear();
      previous_rows.clear();
      for (const auto& [row, k] : touches) {
        const auto t = static_cast<std::uint32_t>(tensor_of(dense, row));
        Slot& slot = pools[t][static_cast<std::size_t>(where[row])];
        if (k & (kWrite | kAccumulate)) slot.version = ++value[row];
        touched[row] = 1;
        previous_slots.insert({t, where[row]});
        previous_rows.insert(row);
      }
    }
    for (const SlotAssignment& a : plan.phase_ends[p].writeback) {
      Slot* slot = slot_of(a);
      ASSERT_NE(slot, nullptr);
      ASSERT_EQ(slot->row, static_cast<std::int64_t>(dense(a.row))) << "phase end writes back a row not resident";
      host[dense(a.row)] = slot->version;
      d2h += trace.tensors[a.row.tensor].row_bytes;
    }
    for (std::size_t t = 0; t < num_tensors; ++t) {
      EXPECT_EQ(plan.peak_rows[p][t], peak[t]) << "phase " << p << " tensor " << t;
      EXPECT_LE(peak[t], trace.capacity_rows[p][t]);
      for (const Slot& slot : pools[t]) {
        if (slot.row >= 0) where[static_cast<std::size_t>(slot.row)] = -1;
      }
    }
  }
  ASSERT_EQ(i, trace.steps.size());
  EXPECT_EQ(plan.h2d_bytes, h2d);
  EXPECT_EQ(plan.d2h_bytes, d2h);
  EXPECT_EQ(plan.misses, loads);
  EXPECT_EQ(plan.hits, needed - loads);
  for (std::size_t row = 0; row < dense.size(); ++row) {
    if (trace.tensors[tensor_of(dense, row)].keep_on_host) {
      EXPECT_EQ(host[row], value[row]) << "keep_on_host row " << row << " did not reach the host";
    }
  }
}

struct Counts {
  std::int64_t h2d = 0, d2h = 0, hits = 0, misses = 0;
};

// Textbook LRU / FIFO on lists in eviction order: the victim is the first row the step does not touch.
Counts reference_counts(const AccessTrace& trace, bool lru) {
  const Dense dense(trace);
  std::vector<std::vector<std::pair<std::size_t, std::uint8_t>>> steps;
  for (const TraceStep& step : trace.steps) steps.push_back(distinct_touches(step, dense));
  const auto next_touch = [&](std::size_t row, std::size_t after) -> std::uint8_t {
    for (std::size_t j = after + 1; j < steps.size(); ++j) {
      for (const auto& [r, k] : steps[j]) {
        if (r == row) return k;
      }
    }
    return 0;
  };
  const bool aware = trace.release_dead_rows;
  std::vector<char> dirty(dense.size(), 0), touched(dense.size(), 0);
  std::vector<std::size_t> last_touch(dense.size(), 0);
  const auto bytes = [&](std::size_t row) { return trace.tensors[tensor_of(dense, row)].row_bytes; };
  const auto must_write_back = [&](std::size_t row) {
    if (!dirty[row]) return false;
    if (!aware) return true;
    const std::uint8_t next = next_touch(row, last_touch[row]);
    return next ? (next & (kRead | kAccumulate)) != 0 : trace.tensors[tensor_of(dense, row)].keep_on_host;
  };
  Counts c;
  std::size_t i = 0;
  for (std::size_t p = 0; p < trace.capacity_rows.size(); ++p) {
    std::vector<std::vector<std::size_t>> order(trace.tensors.size());
    for (; i < steps.size() && trace.steps[i].phase == p; ++i) {
      std::set<std::size_t> now, arrived;
      for (const auto& [row, k] : steps[i]) now.insert(row);
      const auto resident = [&](std::size_t row) {
        const auto& o = order[tensor_of(dense, row)];
        return std::find(o.begin(), o.end(), row) != o.end() || arrived.contains(row);
      };
      const auto needs = [&](std::size_t row, std::uint8_t k) {
        return (k & kRead) || ((k & kAccumulate) && touched[row]);
      };
      for (const auto& [row, k] : steps[i]) {
        if (resident(row) && needs(row, k)) ++c.hits;
      }
      std::vector<std::size_t> in_arrival(trace.tensors.size(), 0);
      for (const bool load : {true, false}) {
        for (const auto& [row, k] : steps[i]) {
          if (resident(row) || needs(row, k) != load) continue;
          const std::size_t t = tensor_of(dense, row);
          auto& o = order[t];
          if (static_cast<std::int64_t>(o.size() + in_arrival[t]) == trace.capacity_rows[p][t]) {
            const auto victim = std::find_if(o.begin(), o.end(), [&](std::size_t r) { return !now.contains(r); });
            if (must_write_back(*victim)) c.d2h += bytes(*victim);
            dirty[*victim] = 0;
            o.erase(victim);
          }
          if (load) {
            c.h2d += bytes(row);
            ++c.misses;
          }
          arrived.insert(row);
          ++in_arrival[t];
        }
      }
      for (const auto& [row, k] : steps[i]) {
        if (k & (kWrite | kAccumulate)) dirty[row] = 1;
        touched[row] = 1;
        last_touch[row] = i;
      }
      for (const auto& [row, k] : steps[i]) {
        auto& o = order[tensor_of(dense, row)];
        const auto it = std::find(o.begin(), o.end(), row);
        if (aware && !next_touch(row, i)) {
          if (must_write_back(row)) c.d2h += bytes(row);
          dirty[row] = 0;
          if (it != o.end()) o.erase(it);
        } else if (lru && it != o.end()) {
          o.erase(it);
          o.push_back(row);
        } else if (arrived.contains(row)) {
          o.push_back(row);
        }
      }
    }
    for (const auto& o : order) {
      for (const std::size_t row : o) {
        if (must_write_back(row)) c.d2h += bytes(row);
        dirty[row] = 0;
      }
    }
  }
  return c;
}

// The shape of a small random trace: 1-3 tensors (some kept on the host) over 4-12 rows with random degrees, 1-3
// phases with capacities from tight to ample, 1-8 steps each. fill(step, tensor, pick, capacity, uniform) lists a
// step's rows of each tensor, given all rows shuffled and the tensor's capacity in the phase.
template <class Fill>
AccessTrace random_trace_of(std::uint64_t seed, bool release_dead_rows, Fill&& fill) {
  std::mt19937_64 rng(seed);
  const auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  AccessTrace trace;
  trace.release_dead_rows = release_dead_rows;
  const int num_tensors = uniform(1, 3);
  const int rows = uniform(4, 12);
  for (int t = 0; t < num_tensors; ++t) {
    trace.tensors.push_back({"t" + std::to_string(t), 4 * uniform(1, 8), uniform(0, 2) == 0});
  }
  for (int v = 0; v < rows; ++v) trace.vertex_degree.push_back(uniform(0, 20));
  const int phases = uniform(1, 3);
  for (int p = 0; p < phases; ++p) {
    std::vector<std::int64_t> capacity;
    for (int t = 0; t < num_tensors; ++t) capacity.push_back(uniform(2, 6));
    trace.capacity_rows.push_back(capacity);
    const int steps = uniform(1, 8);
    for (int s = 0; s < steps; ++s) {
      TraceStep step;
      step.phase = static_cast<std::uint32_t>(p);
      for (int t = 0; t < num_tensors; ++t) {
        std::vector<vid_t> pick(static_cast<std::size_t>(rows));
        for (int v = 0; v < rows; ++v) pick[static_cast<std::size_t>(v)] = v;
        std::shuffle(pick.begin(), pick.end(), rng);
        fill(step, static_cast<std::uint32_t>(t), pick, capacity[static_cast<std::size_t>(t)], uniform);
      }
      trace.steps.push_back(step);
    }
  }
  return trace;
}

// A small random trace: steps mixing reads, writes and accumulates, rows that repeat within and across lists.
AccessTrace random_trace(std::uint64_t seed, bool release_dead_rows) {
  return random_trace_of(
      seed, release_dead_rows,
      [](TraceStep& step, std::uint32_t tensor, std::vector<vid_t>& pick, std::int64_t capacity, const auto& uniform) {
        pick.resize(static_cast<std::size_t>(uniform(0, static_cast<int>(capacity))));
        for (const vid_t v : pick) {
          const RowRef r{tensor, v};
          const int kind = uniform(0, 5);
          if (kind <= 2) step.reads.push_back(r);
          if (kind == 1 || kind == 3) step.writes.push_back(r);
          if (kind >= 4) step.accumulates.push_back(r);
          if (uniform(0, 9) == 0) step.reads.push_back(r);  // a repeated row
        }
      });
}

// The trace with each list's RowRefs past the first keep(size) moved into runs, one per stretch of one tensor's
// rows, held in `held`.
template <class Keep>
AccessTrace with_runs(const AccessTrace& trace, std::vector<std::vector<vid_t>>& held, Keep&& keep, bool distinct) {
  AccessTrace as_runs = trace;
  for (TraceStep& step : as_runs.steps) {
    const auto split = [&](std::vector<RowRef>& refs, std::vector<RowRun>& runs) {
      const std::size_t kept = keep(refs.size());
      const std::vector<RowRef> rest(refs.begin() + static_cast<std::ptrdiff_t>(kept), refs.end());
      refs.resize(kept);
      for (std::size_t first = 0; first < rest.size();) {
        std::size_t last = first;
        std::vector<vid_t>& rows = held.emplace_back();
        while (last < rest.size() && rest[last].tensor == rest[first].tensor) rows.push_back(rest[last++].row);
        runs.push_back({rest[first].tensor, rows, distinct});
        first = last;
      }
    };
    split(step.reads, step.read_runs);
    split(step.writes, step.write_runs);
    split(step.accumulates, step.accumulate_runs);
  }
  return as_runs;
}

// One tensor, one phase, one read per step: the classic paging reference string.
AccessTrace read_sequence(const std::vector<vid_t>& rows, std::int64_t capacity, bool release_dead_rows) {
  AccessTrace trace;
  trace.tensors = {{"h", 4, false}};
  trace.capacity_rows = {{capacity}};
  trace.release_dead_rows = release_dead_rows;
  for (const vid_t v : rows) trace.steps.push_back(step_of(0, {{0, v}}));
  trace.vertex_degree.assign(static_cast<std::size_t>(*std::max_element(rows.begin(), rows.end())) + 1, 1);
  return trace;
}

// The fewest loads any schedule can achieve: dynamic programming over every set of resident rows.
std::int64_t optimal_misses(const std::vector<std::uint32_t>& step_sets, int capacity) {
  std::map<std::uint32_t, std::int64_t> best = {{0u, 0}};
  for (const std::uint32_t need : step_sets) {
    std::map<std::uint32_t, std::int64_t> next;
    for (const auto& [resident, cost] : best) {
      const std::int64_t step_cost = cost + std::popcount(need & ~resident);
      const std::uint32_t optional = resident & ~need;
      for (std::uint32_t keep = optional;; keep = (keep - 1) & optional) {
        if (std::popcount(keep | need) <= capacity) {
          auto [it, inserted] = next.emplace(keep | need, step_cost);
          if (!inserted) it->second = std::min(it->second, step_cost);
        }
        if (keep == 0) break;
      }
    }
    best = std::move(next);
  }
  std::int64_t result = std::numeric_limits<std::int64_t>::max();
  for (const auto& [resident, cost] : best) result = std::min(result, cost);
  return result;
}

// A fresh pool hands allocations out in ascending slots: a step that writes rows into an empty pool gets one
// run of slots, which the executor's kernels write and read in place instead of scattering and gathering.
TEST(CachePlanSlots, AFreshPoolsAllocationsTakeAscendingSlots) {
  AccessTrace trace;
  trace.tensors = {{"z", 4, false}};
  trace.capacity_rows = {{8}};
  std::vector<RowRef> written;
  for (vid_t r = 0; r < 6; ++r) written.push_back({0, r});
  trace.steps.push_back(step_of(0, {}, written));
  trace.steps.push_back(step_of(0, written));
  trace.vertex_degree.assign(6, 1);
  for (const CachePolicy policy : kAllPolicies) {
    const CachePlan plan = plan_cache(trace, policy);
    std::vector<std::int32_t> slots;
    for (const SlotAssignment& a : plan.steps[0].allocations) slots.push_back(a.slot);
    EXPECT_EQ(slots, (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5})) << to_string(policy);
    // Without a cache the rows leave after the step that wrote them and come back wherever loads go.
    if (policy != CachePolicy::kNone) {
      EXPECT_EQ(plan.steps[1].read_slots, slots) << to_string(policy);
    }
  }
}

TEST(CachePolicyNames, RoundTripAndRejectUnknown) {
  for (const CachePolicy policy : kAllPolicies) EXPECT_EQ(parse_cache_policy(to_string(policy)), policy);
  EXPECT_EQ(parse_cache_policy("st-aware"), CachePolicy::kStAware);
  try {
    parse_cache_policy("mru");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'mru'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("belady"), std::string::npos);
  }
}

TEST(CachePlanBelady, ClassicReferenceStringHasTheKnownMissCounts) {
  const std::vector<vid_t> rows = {1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5};
  const std::map<CachePolicy, std::array<std::int64_t, 2>> expected = {
      // misses with 3 and 4 slots; FIFO shows Belady's anomaly
      {CachePolicy::kBelady, {7, 6}},     {CachePolicy::kLru, {10, 8}},   {CachePolicy::kFifo, {9, 10}},
      {CachePolicy::kSizeOrder, {9, 10}}, {CachePolicy::kNone, {12, 12}},
  };
  for (const auto& [policy, misses] : expected) {
    for (const std::int64_t capacity : {3, 4}) {
      const AccessTrace trace = read_sequence(rows, capacity, false);
      const CachePlan plan = plan_cache(trace, policy);
      EXPECT_EQ(plan.misses, misses[static_cast<std::size_t>(capacity - 3)])
          << to_string(policy) << " with " << capacity << " slots";
      EXPECT_EQ(plan.h2d_bytes, plan.misses * 4);
      check_plan(trace, plan, policy);
    }
  }
}

TEST(CachePlanBelady, MatchesExhaustiveOptimumOnRandomTraces) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    std::mt19937_64 rng(seed);
    const int capacity = 2 + static_cast<int>(seed % 2);
    const int rows = 4 + static_cast<int>(seed % 3);
    AccessTrace trace;
    trace.tensors = {{"h", 8, false}};
    trace.capacity_rows = {{capacity}};
    for (int v = 0; v < rows; ++v) trace.vertex_degree.push_back(std::uniform_int_distribution<int>(1, 9)(rng));
    std::vector<std::uint32_t> sets;
    for (int s = 0; s < 12; ++s) {
      TraceStep step;
      std::vector<vid_t> pick(static_cast<std::size_t>(rows));
      for (int v = 0; v < rows; ++v) pick[static_cast<std::size_t>(v)] = v;
      std::shuffle(pick.begin(), pick.end(), rng);
      pick.resize(static_cast<std::size_t>(std::uniform_int_distribution<int>(1, capacity)(rng)));
      std::uint32_t mask = 0;
      for (const vid_t v : pick) {
        step.reads.push_back({0, v});
        mask |= 1u << v;
      }
      sets.push_back(mask);
      trace.steps.push_back(step);
    }
    const std::int64_t optimum = optimal_misses(sets, capacity);
    for (const bool release : {true, false}) {
      trace.release_dead_rows = release;
      const CachePlan plan = plan_cache(trace, CachePolicy::kBelady);
      EXPECT_EQ(plan.misses, optimum) << "seed " << seed;
      for (const CachePolicy policy : kAllPolicies) {
        EXPECT_GE(plan_cache(trace, policy).misses, optimum) << to_string(policy) << " seed " << seed;
      }
    }
  }
}

TEST(CachePlanReference, LruAndFifoMatchAStraightforwardSimulation) {
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    for (const bool release : {true, false}) {
      const AccessTrace trace = random_trace(seed, release);
      for (const bool lru : {true, false}) {
        const CachePlan plan = plan_cache(trace, lru ? CachePolicy::kLru : CachePolicy::kFifo);
        const Counts expected = reference_counts(trace, lru);
        SCOPED_TRACE(testing::Message() << "seed " << seed << (lru ? " lru" : " fifo") << " release " << release);
        EXPECT_EQ(plan.misses, expected.misses);
        EXPECT_EQ(plan.hits, expected.hits);
        EXPECT_EQ(plan.h2d_bytes, expected.h2d);
        EXPECT_EQ(plan.d2h_bytes, expected.d2h);
      }
    }
  }
}

TEST(CachePlanReplay, EveryPolicyGivesAConsistentPlan) {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    for (const bool release : {true, false}) {
      const AccessTrace trace = random_trace(seed, release);
      for (const CachePolicy policy : kAllPolicies) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " release " << release);
        check_plan(trace, plan_cache(trace, policy), policy);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Plan p (with `detail`) is full plan e: every field, where p is kTransfers without the drops and the slots.
void expect_same_plan(const CachePlan& p, const CachePlan& e, CachePlanDetail detail = CachePlanDetail::kFull) {
  ASSERT_EQ(p.steps.size(), e.steps.size());
  for (std::size_t i = 0; i < e.steps.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "step " << i);
    EXPECT_EQ(p.steps[i].evict_writeback, e.steps[i].evict_writeback);
    EXPECT_EQ(p.steps[i].loads, e.steps[i].loads);
    EXPECT_EQ(p.steps[i].allocations, e.steps[i].allocations);
    EXPECT_EQ(p.steps[i].zeroed, e.steps[i].zeroed);
    EXPECT_EQ(p.steps[i].prefetch, e.steps[i].prefetch);
    if (detail == CachePlanDetail::kTransfers) {
      EXPECT_TRUE(p.steps[i].drops.empty() && p.steps[i].read_slots.empty() && p.steps[i].write_slots.empty() &&
                  p.steps[i].accumulate_slots.empty());
      continue;
    }
    EXPECT_EQ(p.steps[i].drops, e.steps[i].drops);
    EXPECT_EQ(p.steps[i].read_slots, e.steps[i].read_slots);
    EXPECT_EQ(p.steps[i].write_slots, e.steps[i].write_slots);
    EXPECT_EQ(p.steps[i].accumulate_slots, e.steps[i].accumulate_slots);
  }
  ASSERT_EQ(p.phase_ends.size(), e.phase_ends.size());
  for (std::size_t k = 0; k < e.phase_ends.size(); ++k) EXPECT_EQ(p.phase_ends[k].writeback, e.phase_ends[k].writeback);
  EXPECT_EQ(p.h2d_bytes, e.h2d_bytes);
  EXPECT_EQ(p.d2h_bytes, e.d2h_bytes);
  EXPECT_EQ(p.hits, e.hits);
  EXPECT_EQ(p.misses, e.misses);
  EXPECT_EQ(p.peak_rows, e.peak_rows);
}

// Runs that say their rows are distinct (as the executor's traces do) plan as the same rows given one by one,
// on one thread or three: where a step's runs are of different tensors the index takes every entry as its own row,
// and where two runs of a step share a tensor (a row read and written in place) it still finds the repeats, as it
// does in runs that do not say their rows are distinct.
TEST(CachePlanRuns, DistinctRunsPlanAsTheirRowsDo) {
  for (const bool release : {true, false}) {
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
      // Each tensor's rows of a step are distinct and in one list, except that now and then tensor 0's are both
      // read and written: two runs of one tensor, rows in both.
      const AccessTrace by_row =
          random_trace_of(seed, release,
                          [](TraceStep& step, std::uint32_t tensor, std::vector<vid_t>& pick, std::int64_t capacity,
                             const auto& uniform) {
                            const auto most = std::min<std::int64_t>(static_cast<std::int64_t>(pick.size()), capacity);
                            pick.resize(static_cast<std::size_t>(uniform(0, static_cast<int>(most))));
                            const int kind = tensor == 0 && uniform(0, 3) == 0 ? 3 : uniform(0, 2);
                            for (const vid_t v : pick) {
                              if (kind == 0 || kind == 3) step.reads.push_back({tensor, v});
                              if (kind == 1 || kind == 3) step.writes.push_back({tensor, v});
                              if (kind == 2) step.accumulates.push_back({tensor, v});
                            }
                          });
      const auto none = [](std::size_t /*refs*/) { return std::size_t{0}; };
      std::vector<std::vector<vid_t>> held;
      const AccessTrace as_runs = with_runs(by_row, held, none, true);
      // Runs that do not say so are searched for repeats, even where a step lists nothing else.
      const AccessTrace repeats = random_trace(seed, release);
      const AccessTrace unflagged = with_runs(repeats, held, none, false);
      for (const CachePolicy policy : kAllPolicies) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " release " << release << " policy "
                                        << to_string(policy));
        const CachePlan expected = plan_cache(by_row, policy, CachePlanDetail::kFull, 1);
        check_plan(by_row, expected, policy);
        for (const int threads : {1, 3})
          expect_same_plan(plan_cache(as_runs, policy, CachePlanDetail::kFull, threads), expected);
        expect_same_plan(plan_cache(unflagged, policy), plan_cache(repeats, policy));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Tensor 0 is a temporary written by step 0 and read once by steps 1 and 2; tensor 1 is kept on the host.
// A step's lists given as runs of rows held elsewhere (how the executor lists a subgraph's sources) plan as the
// same lists given row by row, RowRefs first, whether the phases are indexed and planned by one thread in order or by
// three at once; and kTransfers records the same plan without the drops and the entries' slots.
TEST(CachePlanRuns, RunsPlanAsTheirRowsDo) {
  for (const bool release : {true, false}) {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      const AccessTrace trace = random_trace(seed, release);
      // Each list: its first half stays RowRefs, the rest goes to runs of one tensor each.
      std::vector<std::vector<vid_t>> held;
      const AccessTrace as_runs = with_runs(
          trace, held, [](std::size_t refs) { return refs / 2; }, false);
      for (const CachePolicy policy : {CachePolicy::kStAware, CachePolicy::kLru, CachePolicy::kDegree,
                                       CachePolicy::kSizeOrder, CachePolicy::kBelady, CachePolicy::kNone}) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " policy " << to_string(policy));
        const CachePlan expected = plan_cache(trace, policy, CachePlanDetail::kFull, 1);
        // Phases planned apart, three at once: the same plan.
        expect_same_plan(plan_cache(as_runs, policy, CachePlanDetail::kFull, 3), expected);
        expect_same_plan(plan_cache(as_runs, policy, CachePlanDetail::kTransfers), expected,
                         CachePlanDetail::kTransfers);
      }
    }
  }
}

AccessTrace temporary_and_kept_trace(bool release_dead_rows) {
  AccessTrace trace;
  trace.tensors = {{"z", 16, false}, {"logits", 8, true}};
  trace.capacity_rows = {{2, 2}};
  trace.release_dead_rows = release_dead_rows;
  trace.vertex_degree = {1, 1};
  trace.steps = {
      step_of(0, {}, {{0, 0}, {0, 1}}),
      step_of(0, {{0, 0}}, {{1, 0}}, {{1, 1}}),
      step_of(0, {{0, 1}}),
  };
  return trace;
}

TEST(CachePlanRelease, DeadRowsLeaveAtOnceWithoutWriteback) {
  const AccessTrace trace = temporary_and_kept_trace(true);
  for (const CachePolicy policy : kAllPolicies) {
    if (policy == CachePolicy::kSizeOrder || policy == CachePolicy::kNone) continue;
    const CachePlan plan = plan_cache(trace, policy);
    SCOPED_TRACE(to_string(policy));
    // z[0] has no access after step 1: dropped before step 2, never copied.
    ASSERT_EQ(plan.steps[2].drops.size(), 1u);
    EXPECT_EQ(plan.steps[2].drops[0].row, (RowRef{0, 0}));
    // Only the logits are written back, right after their last step.
    ASSERT_EQ(plan.steps[2].evict_writeback.size(), 2u);
    for (const SlotAssignment& a : plan.steps[2].evict_writeback) EXPECT_EQ(a.row.tensor, 1u);
    EXPECT_EQ(plan.d2h_bytes, 2 * 8);
    EXPECT_EQ(plan.h2d_bytes, 0);
    check_plan(trace, plan, policy);
  }
}

TEST(CachePlanRelease, KeepOnHostRowsAreWrittenBack) {
  for (const bool release : {true, false}) {
    const AccessTrace trace = temporary_and_kept_trace(release);
    for (const CachePolicy policy : kAllPolicies) {
      const CachePlan plan = plan_cache(trace, policy);
      std::set<vid_t> logits;
      for (const StepPlan& step : plan.steps) {
        for (const SlotAssignment& a : step.evict_writeback) {
          if (a.row.tensor == 1) logits.insert(a.row.row);
        }
      }
      for (const SlotAssignment& a : plan.phase_ends[0].writeback) {
        if (a.row.tensor == 1) logits.insert(a.row.row);
      }
      EXPECT_EQ(logits, (std::set<vid_t>{0, 1})) << to_string(policy) << " release " << release;
      check_plan(trace, plan, policy);
    }
  }
}

TEST(CachePlanRelease, UnawarePlansWriteBackEveryDirtyRow) {
  // Without embedding reuse, z is copied back too.
  for (const CachePolicy policy : kAllPolicies) {
    EXPECT_EQ(plan_cache(temporary_and_kept_trace(false), policy).d2h_bytes, 2 * 16 + 2 * 8) << to_string(policy);
  }
}

TEST(CachePlanRelease, TheSwapperCopiesDeadRowsItEvictsButDropsThemAtThePhaseEnd) {
  // One slot; z0 is dead after step 1 and pushed out by z1 in step 2; z1 is dead when the phase ends. The
  // transparent swapper, which does not know z0 is dead, copies it back on eviction; the phase end (where the
  // tensor's last reference goes) drops z1. The aware policies copy neither, except none, which empties the pool
  // after every step and so copies each row back before its read; without liveness both are copied.
  AccessTrace trace;
  trace.tensors = {{"z", 16, false}};
  trace.capacity_rows = {{1}};
  trace.vertex_degree = {1, 1};
  trace.steps = {step_of(0, {}, {{0, 0}}), step_of(0, {{0, 0}}), step_of(0, {}, {{0, 1}}), step_of(0, {{0, 1}})};
  for (const bool release : {true, false}) {
    trace.release_dead_rows = release;
    for (const CachePolicy policy : kAllPolicies) {
      const std::int64_t expected = !release || policy == CachePolicy::kNone ? 32
                                    : policy == CachePolicy::kSizeOrder      ? 16
                                                                             : 0;
      EXPECT_EQ(plan_cache(trace, policy).d2h_bytes, expected) << to_string(policy) << " release " << release;
      check_plan(trace, plan_cache(trace, policy), policy);
    }
  }
}

TEST(CachePlanPrefetch, NextStepLoadsOverlapOnlyWhenTheyAvoidThePreviousStep) {
  const auto trace_with = [](std::int64_t capacity) {
    AccessTrace trace;
    trace.tensors = {{"h", 4, false}};
    trace.capacity_rows = {{capacity}};
    trace.vertex_degree = std::vector<std::int64_t>(6, 1);
    for (vid_t v = 0; v < 6; v += 2) trace.steps.push_back(step_of(0, {{0, v}, {0, v + 1}}));
    return trace;
  };
  for (const CachePolicy policy : kAllPolicies) {
    const CachePlan ample = plan_cache(trace_with(6), policy);
    const CachePlan tight = plan_cache(trace_with(2), policy);
    const bool may_prefetch = policy != CachePolicy::kSizeOrder;
    SCOPED_TRACE(to_string(policy));
    EXPECT_FALSE(ample.steps[0].prefetch);
    EXPECT_EQ(ample.steps[1].prefetch, may_prefetch);
    EXPECT_EQ(ample.steps[2].prefetch, may_prefetch);
    // Two slots: step 1's loads can only go where step 0's rows are.
    EXPECT_FALSE(tight.steps[1].prefetch);
    EXPECT_FALSE(tight.steps[2].prefetch);
    check_plan(trace_with(6), ample, policy);
    check_plan(trace_with(2), tight, policy);
  }
}

// Three slots and rows dead after their one access. Step 0 reads rows 0 and 1 into slots 1 and 2 (loads into a
// fresh pool descend from the last slot); step 1 loads row 2 into the untouched slot 0. Step 2 loads row 3 and
// writes row 4 with slots 1 and 2 (freed after step 0) and 0 (freed after step 1) free: the load takes the slot
// freed longest ago, 1, so it need not wait for step 1 and may be prefetched; the allocation, made after step 1
// anyway, takes the newest, 0. Every policy but size-order (which never prefetches and keeps dead rows) does so.
TEST(CachePlanPrefetch, LoadsTakeTheSlotFreedLongestAgoAndAllocationsTheNewest) {
  AccessTrace trace;
  trace.tensors = {{"h", 4, false}};
  trace.capacity_rows = {{3}};
  trace.release_dead_rows = true;
  trace.vertex_degree.assign(5, 1);
  trace.steps = {step_of(0, {{0, 0}, {0, 1}}), step_of(0, {{0, 2}}), step_of(0, {{0, 3}}, {{0, 4}})};
  const auto slots = [](const std::vector<SlotAssignment>& assigned) {
    std::vector<std::pair<vid_t, std::int32_t>> rows;
    for (const SlotAssignment& a : assigned) rows.emplace_back(a.row.row, a.slot);
    return rows;
  };
  using RowSlots = std::vector<std::pair<vid_t, std::int32_t>>;
  for (const CachePolicy policy : kAllPolicies) {
    if (policy == CachePolicy::kSizeOrder) continue;
    SCOPED_TRACE(to_string(policy));
    const CachePlan plan = plan_cache(trace, policy);
    EXPECT_EQ(slots(plan.steps[0].loads), (RowSlots{{0, 1}, {1, 2}}));
    EXPECT_EQ(slots(plan.steps[1].loads), (RowSlots{{2, 0}}));
    EXPECT_TRUE(plan.steps[1].prefetch);
    EXPECT_EQ(slots(plan.steps[2].loads), (RowSlots{{3, 1}}));
    EXPECT_EQ(slots(plan.steps[2].allocations), (RowSlots{{4, 0}}));
    EXPECT_TRUE(plan.steps[2].prefetch);
    check_plan(trace, plan, policy);
  }
}

TEST(CachePlanDegree, KeepsTheHighestDegreeRowsResident) {
  AccessTrace trace = read_sequence({0, 1, 2, 3, 0, 4, 0}, 2, false);
  trace.vertex_degree = {100, 1, 2, 3, 4};
  const CachePlan degree = plan_cache(trace, CachePolicy::kDegree);
  const CachePlan fifo = plan_cache(trace, CachePolicy::kFifo);
  EXPECT_EQ(degree.misses, 5);  // vertex 0 is loaded once and stays
  EXPECT_EQ(fifo.misses, 6);
  check_plan(trace, degree, CachePolicy::kDegree);
  trace.vertex_degree.pop_back();
  EXPECT_THROW(plan_cache(trace, CachePolicy::kDegree), InputError);
  EXPECT_NO_THROW(plan_cache(trace, CachePolicy::kFifo));
}

// The rows that leave the device at step `at` of a plan without a copy: under the policies that look ahead, the
// victim of that step's load.
std::vector<vid_t> dropped_at(const CachePlan& plan, std::size_t at) {
  std::vector<vid_t> rows;
  for (const SlotAssignment& a : plan.steps[at].drops) rows.push_back(a.row.row);
  return rows;
}

// Two slots, and step 2 loads row 2 among rows 0 and 1. Row 0's next read is three steps ahead but it has three
// reads left; row 1's is two steps ahead with one left. ST-aware evicts the lowest remaining / (next - now + 1):
// row 1 (1/3 against 3/4). Belady evicts the farther row 0, and so do LRU and FIFO, row 0 being the older.
TEST(CachePlanStAware, TheStructuralTermKeepsTheRowWithMoreReadersLeft) {
  const AccessTrace trace = read_sequence({0, 1, 2, 2, 1, 0, 0, 0}, 2, true);
  EXPECT_EQ(dropped_at(plan_cache(trace, CachePolicy::kStAware), 2), std::vector<vid_t>{1});
  for (const CachePolicy policy : {CachePolicy::kBelady, CachePolicy::kLru, CachePolicy::kFifo}) {
    EXPECT_EQ(dropped_at(plan_cache(trace, policy), 2), std::vector<vid_t>{0}) << to_string(policy);
  }
}

// Two slots, and step 2 loads row 2 among rows 0 and 1. Row 0 is read again at the next step, once; row 1 three
// times from step 10. ST-aware evicts row 1 (3/9 against 1/2), as Belady does: a row needed at once beats one
// with more readers far ahead; counting readers alone would evict row 0.
TEST(CachePlanStAware, TheTemporalTermKeepsTheRowNeededFirst) {
  const AccessTrace trace = read_sequence({0, 1, 2, 0, 2, 2, 2, 2, 2, 2, 1, 1, 1}, 2, true);
  EXPECT_EQ(dropped_at(plan_cache(trace, CachePolicy::kStAware), 2), std::vector<vid_t>{1});
  EXPECT_EQ(dropped_at(plan_cache(trace, CachePolicy::kBelady), 2), std::vector<vid_t>{1});
}

TEST(CachePlanNone, EveryReadIsALoad) {
  AccessTrace trace = read_sequence({0, 0, 0}, 4, true);
  for (auto& step : trace.steps) step.reads.push_back({0, 1});
  const CachePlan plan = plan_cache(trace, CachePolicy::kNone);
  EXPECT_EQ(plan.misses, 6);
  EXPECT_EQ(plan.hits, 0);
  EXPECT_EQ(plan_cache(trace, CachePolicy::kLru).misses, 2);
  check_plan(trace, plan, CachePolicy::kNone);
}

TEST(CachePlanErrors, StepLargerThanItsPoolIsAnInputError) {
  AccessTrace trace = read_sequence({0}, 2, true);
  trace.tensors[0].name = "features";
  trace.steps[0].reads = {{0, 0}, {0, 1}, {0, 2}, {0, 1}};
  try {
    plan_cache(trace, CachePolicy::kStAware);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("step 0 (phase 0) touches 3 rows of tensor 'features', but its pool holds 2"),
              std::string::npos)
        << e.what();
  }
  trace.capacity_rows = {{0}};
  trace.steps[0].reads = {{0, 0}};
  EXPECT_THROW(plan_cache(trace, CachePolicy::kLru), InputError);
}

// Phases planned at once fail as one planner going through them in order does: with the first failing step.
TEST(CachePlanErrors, PhasesPlannedAtOnceReportTheFirstFailingStep) {
  AccessTrace trace;
  trace.tensors = {{"rows", 4, false}};
  trace.capacity_rows = {{2}, {2}, {2}, {2}};
  for (std::uint32_t phase = 0; phase < 4; ++phase) {
    trace.steps.push_back({.phase = phase,
                           .reads = {{0, 0}, {0, 1}},
                           .writes = {},
                           .accumulates = {},
                           .read_runs = {},
                           .write_runs = {},
                           .accumulate_runs = {},
                           .fence = false});
  }
  trace.steps[2].reads.push_back({0, 5});
  trace.steps[3].reads.push_back({0, 6});
  for (const int threads : {1, 4}) {
    try {
      plan_cache(trace, CachePolicy::kStAware, CachePlanDetail::kFull, threads);
      FAIL() << "expected an InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("step 2 (phase 2) touches 3 rows"), std::string::npos) << e.what();
    }
  }
}

TEST(CachePlanErrors, MalformedTracesAreInputErrors) {
  const auto expect_error = [](const AccessTrace& trace, const std::string& part) {
    try {
      plan_cache(trace, CachePolicy::kBelady);
      ADD_FAILURE() << "expected an InputError mentioning " << part;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  const AccessTrace good = read_sequence({0, 1}, 2, true);
  AccessTrace t = good;
  t.steps[1].reads[0].tensor = 3;
  expect_error(t, "touches tensor 3 of 1");
  t = good;
  t.steps[1].reads[0].row = -1;
  expect_error(t, "touches row -1");
  t = good;
  t.steps[0].phase = 1;
  t.capacity_rows.push_back({2});
  expect_error(t, "phases must not decrease");
  t = good;
  t.steps[1].phase = 2;
  expect_error(t, "capacity_rows has 1");
  t = good;
  t.capacity_rows[0].push_back(1);
  expect_error(t, "capacity_rows[0] has 2 entries for 1 tensors");
  t = good;
  t.tensors[0].row_bytes = 0;
  expect_error(t, "row_bytes 0");
}

TEST(CachePlan, EmptyPhasesAndEmptyTracesPlanNothing) {
  AccessTrace trace;
  trace.tensors = {{"h", 4, true}};
  trace.capacity_rows = {{1}, {0}, {1}};
  trace.vertex_degree = {1};
  trace.steps = {step_of(0, {}, {{0, 0}}), step_of(2, {{0, 0}})};
  for (const CachePolicy policy : kAllPolicies) {
    const CachePlan plan = plan_cache(trace, policy);
    EXPECT_EQ(plan.phase_ends.size(), 3u);
    EXPECT_EQ(plan.h2d_bytes, 4);
    EXPECT_EQ(plan.d2h_bytes, 4);
    check_plan(trace, plan, policy);
  }
  trace.steps.clear();
  EXPECT_EQ(plan_cache(trace, CachePolicy::kStAware).total_bytes(), 0);
}

// ---- A realistic epoch -------------------------------------------------------------------------------------

struct Graph {
  vid_t n = 0;
  std::vector<std::int64_t> offsets;  // in-edges of v: sources[offsets[v] .. offsets[v + 1])
  std::vector<vid_t> sources;
  std::vector<std::int64_t> out_degree;
};

// A power-law graph in a locality-preserving order (as after METIS or RCM): in-degrees follow a Pareto law;
// most sources are near the destination's id, the rest are hubs drawn with power-law popularity.
Graph power_law_graph(vid_t n, double mean_degree, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<vid_t> hub_of_rank(static_cast<std::size_t>(n));
  for (vid_t v = 0; v < n; ++v) hub_of_rank[static_cast<std::size_t>(v)] = v;
  std::shuffle(hub_of_rank.begin(), hub_of_rank.end(), rng);
  const double exponent = 2.2;
  const double minimum = mean_degree * (exponent - 2.0) / (exponent - 1.0);
  const vid_t window = std::max<vid_t>(2, n / 100);
  Graph g;
  g.n = n;
  g.offsets.push_back(0);
  g.out_degree.assign(static_cast<std::size_t>(n), 0);
  std::vector<vid_t> in;
  for (vid_t v = 0; v < n; ++v) {
    const double pareto = minimum / std::pow(1.0 - unit(rng), 1.0 / (exponent - 1.0));
    const auto degree = static_cast<int>(std::min(pareto, 0.05 * n));
    in.clear();
    for (int e = 0; e < std::max(1, degree); ++e) {
      vid_t u;
      if (unit(rng) < 0.85) {
        u = v + std::uniform_int_distribution<vid_t>(-window, window)(rng);
        u = std::clamp<vid_t>(u, 0, n - 1);
      } else {
        u = hub_of_rank[static_cast<std::size_t>(n * std::pow(unit(rng), 3.0))];
      }
      if (u != v) in.push_back(u);
    }
    std::sort(in.begin(), in.end());
    in.erase(std::unique(in.begin(), in.end()), in.end());
    for (const vid_t u : in) ++g.out_degree[static_cast<std::size_t>(u)];
    g.sources.insert(g.sources.end(), in.begin(), in.end());
    g.offsets.push_back(static_cast<std::int64_t>(g.sources.size()));
  }
  return g;
}

// One epoch of a two-layer GCN run subgraph by subgraph, as the subgraph executor orders it: per layer a
// transform of each chunk (rows of one subgraph) and an aggregation of each subgraph over its in-neighbours
// (and itself), then the backward pass layer by layer, accumulating gradients into in-neighbour rows.
AccessTrace gcn_epoch(const Graph& g, int subgraphs, double capacity_fraction) {
  enum : std::uint32_t { kH0, kZ0, kH1, kZ1, kLogits, kGradLogits, kGradZ1, kGradH1, kGradZ0 };
  AccessTrace trace;
  trace.tensors = {{"h0", 512, false},     {"z0", 256, false},      {"h1", 256, false},
                   {"z1", 64, false},      {"logits", 64, true},    {"grad_logits", 64, false},
                   {"grad_z1", 64, false}, {"grad_h1", 256, false}, {"grad_z0", 256, false}};
  trace.vertex_degree = g.out_degree;
  const auto capacity = static_cast<std::int64_t>(capacity_fraction * g.n);
  trace.capacity_rows.assign(4, std::vector<std::int64_t>(trace.tensors.size(), capacity));
  std::vector<std::vector<RowRef>> neighbourhood(static_cast<std::size_t>(subgraphs));
  std::vector<std::pair<vid_t, vid_t>> range;
  std::vector<int> seen(static_cast<std::size_t>(g.n), -1);
  for (int s = 0; s < subgraphs; ++s) {
    const auto lo = static_cast<vid_t>(std::int64_t{g.n} * s / subgraphs);
    const auto hi = static_cast<vid_t>(std::int64_t{g.n} * (s + 1) / subgraphs);
    range.emplace_back(lo, hi);
    auto& rows = neighbourhood[static_cast<std::size_t>(s)];
    const auto add = [&](vid_t u) {
      if (seen[static_cast<std::size_t>(u)] == s) return;
      seen[static_cast<std::size_t>(u)] = s;
      rows.push_back({0, u});
    };
    for (vid_t v = lo; v < hi; ++v) {
      add(v);
      for (auto e = g.offsets[static_cast<std::size_t>(v)]; e < g.offsets[static_cast<std::size_t>(v) + 1]; ++e) {
        add(g.sources[static_cast<std::size_t>(e)]);
      }
    }
  }
  const auto rows_of = [](std::uint32_t tensor, vid_t lo, vid_t hi) {
    std::vector<RowRef> rows;
    for (vid_t v = lo; v < hi; ++v) rows.push_back({tensor, v});
    return rows;
  };
  const auto in_rows = [&](std::uint32_t tensor, int s) {
    std::vector<RowRef> rows = neighbourhood[static_cast<std::size_t>(s)];
    for (RowRef& r : rows) r.tensor = tensor;
    return rows;
  };
  const std::array<std::array<std::uint32_t, 3>, 2> forward = {{{kH0, kZ0, kH1}, {kH1, kZ1, kLogits}}};
  for (std::uint32_t layer = 0; layer < 2; ++layer) {
    const auto [in, z, out] = forward[layer];
    for (int s = 0; s < subgraphs; ++s) {
      const auto [lo, hi] = range[static_cast<std::size_t>(s)];
      trace.steps.push_back(step_of(layer, rows_of(in, lo, hi), rows_of(z, lo, hi)));
    }
    for (int s = 0; s < subgraphs; ++s) {
      const auto [lo, hi] = range[static_cast<std::size_t>(s)];
      trace.steps.push_back(step_of(layer, in_rows(z, s), rows_of(out, lo, hi)));
    }
  }
  struct Backward {
    std::uint32_t grad_out, grad_z, in;
    bool input_gradient;  // the first layer needs none
  };
  const std::array<Backward, 2> backward = {{{kGradLogits, kGradZ1, kH1, true}, {kGradH1, kGradZ0, kH0, false}}};
  for (std::uint32_t b = 0; b < 2; ++b) {
    const Backward& layer = backward[b];
    for (int s = 0; s < subgraphs; ++s) {
      const auto [lo, hi] = range[static_cast<std::size_t>(s)];
      trace.steps.push_back(step_of(2 + b, rows_of(layer.grad_out, lo, hi), {}, in_rows(layer.grad_z, s)));
    }
    for (int s = 0; s < subgraphs; ++s) {
      const auto [lo, hi] = range[static_cast<std::size_t>(s)];
      TraceStep step = step_of(2 + b, rows_of(layer.grad_z, lo, hi));
      const std::vector<RowRef> inputs = rows_of(layer.in, lo, hi);
      step.reads.insert(step.reads.end(), inputs.begin(), inputs.end());
      if (layer.input_gradient) step.writes = rows_of(kGradH1, lo, hi);
      trace.steps.push_back(step);
    }
  }
  return trace;
}

std::size_t accesses(const AccessTrace& trace) {
  std::size_t n = 0;
  for (const TraceStep& s : trace.steps) n += s.reads.size() + s.writes.size() + s.accumulates.size();
  return n;
}

// Prints, per policy and configuration, the megabytes moved, their ratio to Belady's and how many steps may
// prefetch; "unbounded" is the traffic no pool size can avoid (every row fits).
TEST(CachePlanSynthetic, StAwareStaysWithinFifteenPercentOfBelady) {
  const Graph g = power_law_graph(20'000, 10.0, 42);
  struct Config {
    int subgraphs;
    double capacity;
  };
  // A step of 8 subgraphs writes 12.5% of the vertices and reads more: 10% needs finer subgraphs.
  const std::array<Config, 5> configs = {{{8, 0.50}, {8, 0.25}, {32, 0.50}, {32, 0.25}, {32, 0.10}}};
  std::vector<AccessTrace> traces;
  std::map<CachePolicy, std::vector<CachePlan>> plans;
  std::vector<std::int64_t> unbounded;
  for (const Config& c : configs) {
    traces.push_back(gcn_epoch(g, c.subgraphs, c.capacity));
    for (const CachePolicy policy : kAllPolicies) plans[policy].push_back(plan_cache(traces.back(), policy));
    unbounded.push_back(plan_cache(gcn_epoch(g, c.subgraphs, 1.0), CachePolicy::kBelady).total_bytes());
  }
  std::printf("synthetic 2-layer GCN epoch: %d vertices, %zu edges, %zu / %zu accesses (K = 8 / 32 subgraphs)\n", g.n,
              g.sources.size(), accesses(traces[0]), accesses(traces[2]));
  std::printf("MB moved (ratio to belady) steps that may prefetch\n%-11s", "policy");
  for (const Config& c : configs)
    std::printf("  K=%-2d cap=%2.0f%% of %3zu", c.subgraphs, 100 * c.capacity,
                traces[&c - configs.data()].steps.size());
  std::printf("\n");
  const auto row = [&](const char* name, const auto& bytes_of, const auto& prefetched_of) {
    std::printf("%-11s", name);
    for (std::size_t k = 0; k < configs.size(); ++k) {
      const auto bytes = static_cast<double>(bytes_of(k));
      std::printf("  %6.1f (%.3fx) %4ld", bytes / 1e6,
                  bytes / static_cast<double>(plans[CachePolicy::kBelady][k].total_bytes()),
                  static_cast<long>(prefetched_of(k)));
    }
    std::printf("\n");
  };
  for (const CachePolicy policy : kAllPolicies) {
    const std::vector<CachePlan>& p = plans[policy];
    row(
        to_string(policy), [&](std::size_t k) { return p[k].total_bytes(); },
        [&](std::size_t k) {
          return std::count_if(p[k].steps.begin(), p[k].steps.end(), [](const StepPlan& s) { return s.prefetch; });
        });
  }
  row(
      "unbounded", [&](std::size_t k) { return unbounded[k]; }, [](std::size_t) { return 0; });

  for (std::size_t k = 0; k < configs.size(); ++k) {
    SCOPED_TRACE(testing::Message() << "K=" << configs[k].subgraphs << " capacity " << configs[k].capacity);
    const CachePlan& belady = plans[CachePolicy::kBelady][k];
    EXPECT_LE(static_cast<double>(plans[CachePolicy::kStAware][k].total_bytes()),
              1.15 * static_cast<double>(belady.total_bytes()));
    for (const CachePolicy policy : kAllPolicies) {
      EXPECT_GE(plans[policy][k].h2d_bytes, belady.h2d_bytes) << to_string(policy);
    }
    EXPECT_LT(plans[CachePolicy::kStAware][k].total_bytes(), plans[CachePolicy::kLru][k].total_bytes());
    EXPECT_LT(plans[CachePolicy::kStAware][k].total_bytes(), plans[CachePolicy::kSizeOrder][k].total_bytes());
    EXPECT_LE(unbounded[k], belady.total_bytes());
  }
  check_plan(traces[4], plans[CachePolicy::kStAware][4], CachePolicy::kStAware);
}

// Belady's misses, found the plain way: before each step, rows the step needs that are not resident are missed,
// and resident rows whose next use is farthest (none: farthest of all) leave until the step fits.
std::int64_t belady_misses(const std::vector<std::vector<vid_t>>& steps, vid_t rows, std::size_t capacity) {
  std::vector<std::vector<std::size_t>> uses(static_cast<std::size_t>(rows));
  for (std::size_t t = 0; t < steps.size(); ++t) {
    for (const vid_t r : steps[t]) uses[static_cast<std::size_t>(r)].push_back(t);
  }
  const std::size_t never = steps.size();
  std::vector<std::size_t> next_use(static_cast<std::size_t>(rows), never);
  std::vector<std::size_t> seen(static_cast<std::size_t>(rows), 0);  // uses of each row so far
  std::vector<char> resident(static_cast<std::size_t>(rows), 0);
  std::set<std::pair<std::size_t, vid_t>> by_next_use;
  std::int64_t misses = 0;
  for (std::size_t t = 0; t < steps.size(); ++t) {
    std::int64_t missing = 0;
    for (const vid_t r : steps[t]) missing += resident[static_cast<std::size_t>(r)] == 0 ? 1 : 0;
    while (by_next_use.size() + static_cast<std::size_t>(missing) > capacity) {
      const auto farthest = std::prev(by_next_use.end());
      resident[static_cast<std::size_t>(farthest->second)] = 0;
      by_next_use.erase(farthest);
    }
    misses += missing;
    for (const vid_t r : steps[t]) {
      const auto v = static_cast<std::size_t>(r);
      if (resident[v] != 0) by_next_use.erase({next_use[v], r});
      resident[v] = 1;
      ++seen[v];
      next_use[v] = seen[v] < uses[v].size() ? uses[v][seen[v]] : never;
      by_next_use.insert({next_use[v], r});
    }
  }
  return misses;
}

// Steps of hundreds of thousands of rows, as on large graphs, whose next-use buckets grow past a huge page: W's
// bucket empties as step 1 begins and X's grows into its memory (a spare). Step 3 must then evict X, whose next
// use is the farthest: Belady's misses are the plain simulation's.
TEST(CachePlanScale, BucketsOfHundredsOfThousandsOfRowsPlanAsThePlainSimulation) {
  constexpr vid_t kGroupRows = 300'000;
  const auto group = [&](vid_t first) {
    std::vector<vid_t> rows(static_cast<std::size_t>(kGroupRows));
    std::iota(rows.begin(), rows.end(), first * kGroupRows);
    return rows;
  };
  const std::vector<vid_t> w = group(0), x = group(1), y = group(2), z = group(3);
  const auto both = [](std::vector<vid_t> a, const std::vector<vid_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  std::vector<std::vector<vid_t>> step_rows = {w, both(w, x), y, both(y, z), z, x};
  std::mt19937 random(17);
  AccessTrace trace;
  trace.tensors = {{"h", 64, false}};
  trace.capacity_rows = {{2 * kGroupRows}};
  for (std::vector<vid_t>& rows : step_rows) {
    std::shuffle(rows.begin(), rows.end(), random);
    trace.steps.emplace_back().read_runs.push_back({0, rows, true});
  }
  const std::int64_t expected = belady_misses(step_rows, 4 * kGroupRows, 2 * kGroupRows);
  ASSERT_EQ(expected, 5 * kGroupRows);
  const CachePlan belady = plan_cache(trace, CachePolicy::kBelady, CachePlanDetail::kTransfers);
  EXPECT_EQ(belady.misses, expected);
  EXPECT_EQ(belady.misses + belady.hits, 8 * kGroupRows);
}

TEST(CachePlanScale, PlansTenMillionAccessesInSeconds) {
  const Graph g = power_law_graph(460'000, 8.0, 7);
  const AccessTrace trace = gcn_epoch(g, 32, 0.25);
  std::printf("scale trace: %d vertices, %zu steps, %zu accesses\n", g.n, trace.steps.size(), accesses(trace));
  for (const CachePolicy policy : {CachePolicy::kStAware, CachePolicy::kBelady, CachePolicy::kLru}) {
    const auto start = std::chrono::steady_clock::now();
    const CachePlan plan = plan_cache(trace, policy);
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    std::printf("  %-9s planned in %.2f s: %.1f MB moved\n", to_string(policy), seconds.count(),
                static_cast<double>(plan.total_bytes()) / 1e6);
    EXPECT_LT(seconds.count(), 30.0 * test::time_scale()) << to_string(policy);
  }
}

}  // namespace
}  // namespace nj
