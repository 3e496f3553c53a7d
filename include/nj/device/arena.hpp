#pragma once
// Placement of device allocations inside one region, as offsets only: no memory is touched. A CUDA device adds
// each offset to a single cudaMalloc'd base (one allocation up front, none per tensor); the CPU emulation maps
// each offset to its own host block. Because placement is deterministic, a planner can replay an executor's
// allocation sequence offline and predict its peak footprint, fragmentation included.
// Neither class is thread-safe: the device that owns one serialises calls under its own lock.
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "nj/core/bytes.hpp"

namespace nj {

struct ArenaStats {
  std::int64_t in_use_bytes = 0;          // sum of live blocks' (rounded) sizes
  std::int64_t peak_in_use_bytes = 0;     // high-water mark of in_use_bytes
  std::int64_t footprint_bytes = 0;       // end of the highest live block: what the region must hold now
  std::int64_t peak_footprint_bytes = 0;  // high-water mark of footprint_bytes
  std::int64_t live_blocks = 0;
  std::int64_t largest_free_bytes = 0;  // largest block allocate() could return now; kUnlimited with no end
  // Bytes the region needed beyond what was ever live at once.
  std::int64_t fragmentation_bytes() const { return peak_footprint_bytes - peak_in_use_bytes; }
};

// What cudaMalloc guarantees, so every offset added to its base stays aligned for any kernel.
inline constexpr std::int64_t kArenaAlignment = 256;
// The bytes a request of `bytes` takes in the arena: whole alignment units.
constexpr std::int64_t arena_block_bytes(std::int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

// First-fit placement of blocks in a region of `capacity` bytes (kUnlimited: no end): each block goes at the
// lowest offset where it fits. Sizes round up to kArenaAlignment, so a capacity's last partial alignment unit
// is never used. Free neighbours coalesce. The same sequence of calls always gives the same offsets and stats,
// whatever the capacity, up to the first request that does not fit: so one replay in an unlimited region
// predicts the footprint a run needs in any region, and whether a given budget holds it.
class ArenaAllocator {
 public:
  explicit ArenaAllocator(std::int64_t capacity);
  std::int64_t capacity() const { return capacity_; }

  // Offset of a new block of round_up(bytes) bytes, at the start of the lowest free range that holds it;
  // std::nullopt when none does. bytes must be > 0.
  std::optional<std::int64_t> allocate(std::int64_t bytes);
  // Frees the live block at `offset` and returns its (rounded) size.
  std::int64_t deallocate(std::int64_t offset);

  ArenaStats stats() const;
  // Peaks restart from the current values (e.g. once per epoch).
  void reset_peaks();

 private:
  void add_free(std::int64_t offset, std::int64_t size);
  void remove_free(std::map<std::int64_t, std::int64_t>::iterator range);

  std::int64_t capacity_;
  std::map<std::int64_t, std::int64_t> free_by_offset_;  // offset -> size: first fit, and neighbours to coalesce
  std::map<std::int64_t, std::int64_t> live_;            // offset -> rounded size; last one is highest
  std::int64_t in_use_ = 0;
  std::int64_t peak_in_use_ = 0;
  std::int64_t peak_footprint_ = 0;
};

// Caps the bytes requested through it (before rounding), then places them with an arena whose capacity is
// the same budget, so rounding and fragmentation are what the arena's stats show. Over the cap, or within it
// but with no free range large enough, allocate() throws nj::OutOfBudget with a one-line message naming
// `what`, the request, the bytes in use and the budget (and, when fragmented, the largest free range).
class SizeLimitedArena {
 public:
  // budget <= 0 or kUnlimited: no cap, unlimited region.
  explicit SizeLimitedArena(std::int64_t budget);
  std::int64_t budget() const { return budget_; }

  struct Block {
    std::int64_t offset;
    std::int64_t requested;
  };
  Block allocate(std::int64_t bytes, std::string_view what);  // bytes > 0
  void deallocate(std::int64_t offset);                       // the block must be live

  std::int64_t requested_in_use() const { return requested_in_use_; }  // requested bytes of live blocks
  std::int64_t requested_peak() const { return requested_peak_; }      // its high-water mark
  const ArenaAllocator& arena() const { return arena_; }
  void reset_peaks();

 private:
  std::int64_t budget_;
  ArenaAllocator arena_;
  std::map<std::int64_t, std::int64_t> requested_;  // offset -> requested bytes
  std::int64_t requested_in_use_ = 0;
  std::int64_t requested_peak_ = 0;
};

}  // namespace nj
