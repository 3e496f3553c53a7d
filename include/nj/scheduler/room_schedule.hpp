#pragma once
// What a fixed room on the device saves of whole items an epoch uploads again and again (a budgeted pass's packed
// graph blocks): a read of an item the room does not hold uploads it. The executor keeps a fixed set of blocks there
// for the run (settle_device_memory); this replays the same reads under an eviction policy instead, so that what
// the kept set moves can be set beside what LRU and Belady's rule would move in the same room.
#include <cstdint>
#include <span>

#include "nj/scheduler/cache_plan.hpp"

namespace nj {

struct RoomItem {
  std::int64_t room_bytes = 0;   // what it takes of the room while it stays
  std::int64_t moved_bytes = 0;  // what one upload of it moves
};

// Bytes uploaded per epoch once epochs repeat alike (from an empty room, replayed until the room holds at an
// epoch's start what it held at an earlier one's; the mean over the epochs between), for epochs that read `reads`
// (indices into `items`) in order, in a room of `capacity` bytes, under `policy`:
// - kLru: every item read stays, the least recently read ones leaving to make room;
// - kBelady: an item read stays where it is read again before each item it would push out, which leave farthest
//   next read first (Belady's rule, with items of different sizes and passing through; optimal in uploads for
//   items of one size);
// an item larger than the room passes through. Other policies are an internal error.
std::int64_t room_upload_bytes(std::span<const RoomItem> items, std::span<const std::uint32_t> reads,
                               std::int64_t capacity, CachePolicy policy);

}  // namespace nj
