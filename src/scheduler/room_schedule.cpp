#include "nj/scheduler/room_schedule.hpp"

#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "nj/core/error.hpp"

namespace nj {
namespace {

// Epochs replayed: two from an empty room, then the one counted; Belady's rule also looks one epoch further.
constexpr std::size_t kWarmEpochs = 2;
constexpr std::size_t kReplayedEpochs = kWarmEpochs + 1;
constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();

// For each read of `epochs` repetitions of `reads`, the position of the next read of the same item (kNever: none).
std::vector<std::size_t> next_reads(std::span<const std::uint32_t> reads, std::size_t num_items, std::size_t epochs) {
  const std::size_t n = reads.size() * epochs;
  std::vector<std::size_t> next(n, kNever);
  std::vector<std::size_t> later(num_items, kNever);
  for (std::size_t t = n; t-- > 0;) {
    const std::uint32_t item = reads[t % reads.size()];
    next[t] = later[item];
    later[item] = t;
  }
  return next;
}

}  // namespace

std::int64_t room_upload_bytes(std::span<const RoomItem> items, std::span<const std::uint32_t> reads,
                               std::int64_t capacity, CachePolicy policy) {
  NJ_EXPECTS(policy == CachePolicy::kLru || policy == CachePolicy::kBelady, "the room has no {} policy",
             to_string(policy));
  for (const std::uint32_t item : reads) NJ_EXPECTS(item < items.size(), "read of item {} of {}", item, items.size());
  if (reads.empty()) return 0;
  // Belady's rule orders the residents by their next read, LRU by their last: both pick the largest key to stay
  // longest, and evict from the smallest (LRU) or the largest (Belady).
  const bool belady = policy == CachePolicy::kBelady;
  const std::vector<std::size_t> next =
      belady ? next_reads(reads, items.size(), kReplayedEpochs + 1) : std::vector<std::size_t>{};
  std::set<std::pair<std::size_t, std::uint32_t>> residents;  // (key, item)
  std::vector<std::size_t> key_of(items.size(), 0);           // per resident item: its key
  std::vector<char> resident(items.size(), 0);
  std::int64_t free = capacity;
  std::int64_t counted = 0;
  const auto leave = [&](std::uint32_t item) {
    residents.erase({key_of[item], item});
    free += items[item].room_bytes;
    resident[item] = 0;
  };
  for (std::size_t t = 0; t < reads.size() * kReplayedEpochs; ++t) {
    const std::uint32_t item = reads[t % reads.size()];
    const RoomItem& it = items[item];
    const std::size_t key = belady ? next[t] : t;
    if (resident[item] != 0) {  // read from the room
      leave(item);
    } else if (t >= reads.size() * kWarmEpochs) {
      counted += it.moved_bytes;
    }
    if (it.room_bytes > capacity || key == kNever) continue;
    if (belady) {
      // Push out only residents read later than this item, farthest first; where that leaves too little room,
      // this item passes through and they stay.
      std::int64_t freed = free;
      std::size_t pushed_out = 0;
      for (auto r = residents.rbegin(); freed < it.room_bytes && r != residents.rend() && r->first > key; ++r) {
        freed += items[r->second].room_bytes;
        ++pushed_out;
      }
      if (freed < it.room_bytes) continue;
      for (; pushed_out > 0; --pushed_out) leave(residents.rbegin()->second);
    } else {
      while (free < it.room_bytes) leave(residents.begin()->second);
    }
    free -= it.room_bytes;
    resident[item] = 1;
    key_of[item] = key;
    residents.insert({key, item});
  }
  return counted;
}

}  // namespace nj
