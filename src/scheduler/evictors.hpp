#pragma once
// The evictor families: which resident row of a pool a step that needs a slot evicts. A keyed evictor orders rows
// by a key fixed when the row last left a step (LRU, FIFO, size-order, degree); the next-use evictor by the trace
// index's next use, with the structural term (readers left) where it is ST-Aware, without it where it is Belady.
// Internal to the scheduler.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "scheduler/trace_index.hpp"

namespace nj::scheduling {

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

}  // namespace nj::scheduling
