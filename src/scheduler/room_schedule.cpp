#include "nj/scheduler/room_schedule.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include "nj/core/error.hpp"

namespace nj {
namespace {

// Enough for any plan's blocks to settle into a cycle: their reads do within a few epochs.
constexpr std::size_t kMostEpochs = 64;

// For each read, how many reads later the same item is read again, epochs repeating (every item read recurs).
std::vector<std::size_t> reads_to_next(std::span<const std::uint32_t> reads, std::size_t num_items) {
  const std::size_t n = reads.size();
  std::vector<std::size_t> distance(n, 0);
  std::vector<std::size_t> later(num_items, 0);  // the next read of each item seen, over two epochs
  for (std::size_t t = 2 * n; t-- > 0;) {
    const std::uint32_t item = reads[t % n];
    if (t < n) distance[t] = later[item] - t;
    later[item] = t;
  }
  return distance;
}

}  // namespace

std::int64_t room_upload_bytes(std::span<const RoomItem> items, std::span<const std::uint32_t> reads,
                               std::int64_t capacity, CachePolicy policy) {
  NJ_EXPECTS(policy == CachePolicy::kLru || policy == CachePolicy::kBelady, "the room has no {} policy",
             to_string(policy));
  for (const std::uint32_t item : reads) NJ_EXPECTS(item < items.size(), "read of item {} of {}", item, items.size());
  if (reads.empty()) return 0;
  // Belady's rule orders the residents by their next read, LRU by their last: both keep the largest keys longest,
  // and push out from the smallest (LRU) or the largest (Belady). Keys are positions in the epochs replayed.
  const bool belady = policy == CachePolicy::kBelady;
  const std::vector<std::size_t> to_next = belady ? reads_to_next(reads, items.size()) : std::vector<std::size_t>{};
  std::set<std::pair<std::size_t, std::uint32_t>> residents;  // (key, item)
  std::vector<std::size_t> key_of(items.size(), 0);           // per resident item: its key
  std::vector<char> resident(items.size(), 0);
  std::int64_t room_left = capacity;
  const auto leave = [&](std::uint32_t item) {
    residents.erase({key_of[item], item});
    room_left += items[item].room_bytes;
    resident[item] = 0;
  };
  // Every item read is read every epoch, so the residents at an epoch's start decide the epochs that follow: once
  // they repeat what an earlier epoch started with, the epochs from that one on repeat, and an epoch uploads the mean
  // of that cycle (one epoch, in every plan seen).
  std::vector<std::vector<std::uint32_t>> started_with;
  std::vector<std::int64_t> uploaded;
  for (std::size_t epoch = 0;; ++epoch) {
    std::vector<std::uint32_t> now;
    for (const auto& entry : residents) now.push_back(entry.second);
    std::ranges::sort(now);
    if (const auto seen = std::ranges::find(started_with, now); seen != started_with.end()) {
      const auto first = static_cast<std::size_t>(seen - started_with.begin());
      const std::int64_t cycle =
          std::accumulate(uploaded.begin() + static_cast<std::ptrdiff_t>(first), uploaded.end(), std::int64_t{0});
      return cycle / static_cast<std::int64_t>(epoch - first);
    }
    NJ_EXPECTS(epoch < kMostEpochs, "the room's {} reads do not repeat within {} epochs", reads.size(), kMostEpochs);
    started_with.push_back(std::move(now));
    std::int64_t& moved = uploaded.emplace_back(0);
    for (std::size_t i = 0; i < reads.size(); ++i) {
      const std::size_t t = epoch * reads.size() + i;
      const std::uint32_t item = reads[i];
      const RoomItem& size = items[item];
      if (resident[item] != 0) {  // read from the room; it takes its place again under its new key
        leave(item);
      } else {
        moved += size.moved_bytes;
      }
      if (size.room_bytes > capacity) continue;
      const std::size_t key = belady ? t + to_next[i] : t;
      if (belady) {
        // Push out only residents read later than this item, farthest first; where that leaves too little room,
        // this item passes through and they stay.
        std::int64_t freed = room_left;
        std::size_t pushed_out = 0;
        for (auto r = residents.rbegin(); freed < size.room_bytes && r != residents.rend() && r->first > key; ++r) {
          freed += items[r->second].room_bytes;
          ++pushed_out;
        }
        if (freed < size.room_bytes) continue;
        for (; pushed_out > 0; --pushed_out) leave(residents.rbegin()->second);
      } else {
        while (room_left < size.room_bytes) leave(residents.begin()->second);
      }
      room_left -= size.room_bytes;
      resident[item] = 1;
      key_of[item] = key;
      residents.insert({key, item});
    }
  }
}

}  // namespace nj
