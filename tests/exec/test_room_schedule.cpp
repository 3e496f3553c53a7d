#include <gtest/gtest.h>

#include <vector>

#include "nj/core/error.hpp"
#include "nj/scheduler/room_schedule.hpp"

namespace nj {
namespace {

std::vector<RoomItem> alike(std::size_t n) { return std::vector<RoomItem>(n, RoomItem{10, 7}); }

// Worked by hand: items a, b, c of one size, a room for two.
TEST(RoomSchedule, CyclicScanDefeatsLruButNotBelady) {
  const std::vector<std::uint32_t> reads = {0, 1, 2};  // a b c, a b c, ...
  // LRU always pushes out the item read next: every read uploads.
  EXPECT_EQ(room_upload_bytes(alike(3), reads, 20, CachePolicy::kLru), 3 * 7);
  // Belady keeps two of them; the third passes through, once an epoch.
  EXPECT_EQ(room_upload_bytes(alike(3), reads, 20, CachePolicy::kBelady), 7);
}

TEST(RoomSchedule, BackAndForthScanMissesWhatTheRoomCannotHoldOnEachSweep) {
  // A budgeted pass reads its blocks so: layers forward in reverse subgraph order, then backward in order.
  const std::vector<std::uint32_t> reads = {2, 1, 0, 0, 1, 2};
  for (const CachePolicy policy : {CachePolicy::kLru, CachePolicy::kBelady}) {
    EXPECT_EQ(room_upload_bytes(alike(3), reads, 20, policy), 2 * 7) << to_string(policy);
    EXPECT_EQ(room_upload_bytes(alike(3), reads, 30, policy), 0) << to_string(policy);
    // Room for one: the reads at each turn find it.
    EXPECT_EQ(room_upload_bytes(alike(3), reads, 10, policy), 4 * 7) << to_string(policy);
    EXPECT_EQ(room_upload_bytes(alike(3), reads, 9, policy), 6 * 7) << to_string(policy);
  }
}

TEST(RoomSchedule, ItemsLargerThanTheRoomPassThrough) {
  const std::vector<RoomItem> items = {{30, 100}, {10, 1}, {10, 2}};
  const std::vector<std::uint32_t> reads = {0, 1, 2, 0};
  for (const CachePolicy policy : {CachePolicy::kLru, CachePolicy::kBelady}) {
    EXPECT_EQ(room_upload_bytes(items, reads, 25, policy), 200) << to_string(policy);
  }
}

TEST(RoomSchedule, BeladyPushesOutOnlyWhatIsReadLater) {
  // A small item read often beside a large one read once an epoch: keeping the large one would push the small one
  // out, which is read sooner, so Belady lets the large one through; LRU takes it in and uploads the small one again.
  const std::vector<RoomItem> items = {{10, 1}, {20, 50}};
  const std::vector<std::uint32_t> reads = {0, 1, 0, 0};
  EXPECT_EQ(room_upload_bytes(items, reads, 20, CachePolicy::kBelady), 50);
  EXPECT_EQ(room_upload_bytes(items, reads, 20, CachePolicy::kLru), 50 + 1);
}

TEST(RoomSchedule, LruPushesOutAsManyAsTheItemReadTakes) {
  // c, read once an epoch, takes the whole room: LRU pushes out a and b for it, then c for them; Belady keeps them.
  const std::vector<RoomItem> items = {{10, 1}, {10, 2}, {20, 50}};
  const std::vector<std::uint32_t> reads = {2, 0, 1, 0, 1};
  EXPECT_EQ(room_upload_bytes(items, reads, 20, CachePolicy::kLru), 50 + 1 + 2);
  EXPECT_EQ(room_upload_bytes(items, reads, 20, CachePolicy::kBelady), 50);
  for (const CachePolicy policy : {CachePolicy::kLru, CachePolicy::kBelady}) {
    EXPECT_EQ(room_upload_bytes(items, reads, 0, policy), 50 + 2 * (1 + 2)) << "no room: every read";
  }
}

TEST(RoomSchedule, OnlyLruAndBeladyRunTheRoom) {
  EXPECT_THROW(room_upload_bytes(alike(1), std::vector<std::uint32_t>{0}, 10, CachePolicy::kStAware), Error);
  EXPECT_THROW(room_upload_bytes(alike(1), std::vector<std::uint32_t>{1}, 10, CachePolicy::kLru), Error);
  EXPECT_EQ(room_upload_bytes(alike(1), {}, 10, CachePolicy::kLru), 0);
}

}  // namespace
}  // namespace nj
