// Offset bookkeeping of the device arena: rounding, best fit, coalescing, footprint and fragmentation, the
// budget cap with its two messages, and replay giving the same placement every time.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nj/core/bytes.hpp"
#include "nj/core/error.hpp"
#include "nj/device/arena.hpp"

namespace nj {
namespace {

constexpr std::int64_t kA = kArenaAlignment;

std::int64_t place(ArenaAllocator& arena, std::int64_t bytes) {
  const std::optional<std::int64_t> offset = arena.allocate(bytes);
  EXPECT_TRUE(offset.has_value()) << "allocating " << bytes << " bytes failed";
  return offset.value_or(-1);
}

std::string out_of_budget_message(SizeLimitedArena& arena, std::int64_t bytes, std::string_view what) {
  try {
    arena.allocate(bytes, what);
  } catch (const OutOfBudget& e) {
    return e.what();
  }
  ADD_FAILURE() << "allocating " << bytes << " bytes did not throw OutOfBudget";
  return {};
}

bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

TEST(Arena, RoundsSizesUpToTheAlignment) {
  ArenaAllocator arena(kUnlimited);
  EXPECT_EQ(place(arena, 1), 0);
  EXPECT_EQ(place(arena, kA), kA);
  EXPECT_EQ(place(arena, kA + 1), 2 * kA);
  EXPECT_EQ(arena.stats().in_use_bytes, 4 * kA);
  EXPECT_EQ(arena.deallocate(2 * kA), 2 * kA);
  EXPECT_EQ(arena.deallocate(0), kA);
  EXPECT_THROW(arena.allocate(0), Error);
}

TEST(Arena, FirstFitTakesTheLowestHoleThatHoldsTheBlock) {
  ArenaAllocator arena(kUnlimited);
  // Holes of 3, 1, 2 and 1 units, separated by live blocks.
  const std::vector<std::int64_t> units = {3, 1, 1, 1, 2, 1, 1, 1};
  std::vector<std::int64_t> offsets;
  for (std::int64_t u : units) offsets.push_back(place(arena, u * kA));
  for (std::size_t i : {0, 2, 4, 6}) arena.deallocate(offsets[i]);

  EXPECT_EQ(place(arena, 2 * kA), offsets[0]) << "the lowest hole that holds 2 units is the 3-unit one";
  EXPECT_EQ(place(arena, kA), offsets[0] + 2 * kA) << "what is left of it";
  EXPECT_EQ(place(arena, 2 * kA), offsets[4]) << "the 1-unit hole below is too small";
  EXPECT_EQ(place(arena, kA), offsets[2]);
  EXPECT_EQ(arena.stats().largest_free_bytes, kUnlimited);
}

TEST(Arena, PlacesAlikeWhateverTheCapacityUntilARequestDoesNotFit) {
  // A replay in an unlimited region predicts a capped one: the free tail is always the highest range.
  ArenaAllocator capped(6 * kA);
  ArenaAllocator unlimited(kUnlimited);
  const std::vector<std::int64_t> sizes = {2 * kA, kA, 2 * kA, kA};
  std::vector<std::int64_t> placed;
  for (const std::int64_t bytes : sizes) {
    placed.push_back(place(capped, bytes));
    EXPECT_EQ(placed.back(), place(unlimited, bytes));
  }
  capped.deallocate(placed[1]);
  unlimited.deallocate(placed[1]);
  EXPECT_EQ(place(capped, kA), place(unlimited, kA));
  EXPECT_EQ(capped.stats().peak_footprint_bytes, unlimited.stats().peak_footprint_bytes);
  EXPECT_FALSE(capped.allocate(2 * kA).has_value()) << "6 units are full";
}

TEST(Arena, FreedNeighboursCoalesce) {
  ArenaAllocator arena(5 * kA);
  std::vector<std::int64_t> offsets;
  for (int i = 0; i < 5; ++i) offsets.push_back(place(arena, kA));
  EXPECT_EQ(arena.stats().largest_free_bytes, 0);

  arena.deallocate(offsets[1]);
  arena.deallocate(offsets[2]);  // joins its left neighbour
  EXPECT_EQ(arena.stats().largest_free_bytes, 2 * kA);
  arena.deallocate(offsets[0]);  // joins its right neighbour
  EXPECT_EQ(arena.stats().largest_free_bytes, 3 * kA);

  arena.deallocate(offsets[4]);
  arena.deallocate(offsets[3]);  // between two free ranges: one range of everything
  EXPECT_EQ(arena.stats().largest_free_bytes, 5 * kA);
  EXPECT_EQ(place(arena, 5 * kA), 0);
}

TEST(Arena, TracksFootprintAndPeaks) {
  ArenaAllocator arena(kUnlimited);
  const std::int64_t a = place(arena, kA);
  const std::int64_t b = place(arena, 2 * kA);
  ArenaStats stats = arena.stats();
  EXPECT_EQ(stats.live_blocks, 2);
  EXPECT_EQ(stats.footprint_bytes, 3 * kA);
  EXPECT_EQ(stats.peak_in_use_bytes, 3 * kA);

  arena.deallocate(b);
  stats = arena.stats();
  EXPECT_EQ(stats.in_use_bytes, kA);
  EXPECT_EQ(stats.footprint_bytes, kA);
  EXPECT_EQ(stats.peak_in_use_bytes, 3 * kA);
  EXPECT_EQ(stats.peak_footprint_bytes, 3 * kA);
  EXPECT_EQ(stats.fragmentation_bytes(), 0);

  arena.deallocate(a);
  stats = arena.stats();
  EXPECT_EQ(stats.live_blocks, 0);
  EXPECT_EQ(stats.footprint_bytes, 0);
}

TEST(Arena, MeasuresFragmentation) {
  ArenaAllocator arena(kUnlimited);
  place(arena, kA);
  const std::int64_t b = place(arena, kA);
  place(arena, kA);
  arena.deallocate(b);
  // Two units live would fit in three, but the hole left by B is too small: the region must grow.
  EXPECT_EQ(place(arena, 2 * kA), 3 * kA);
  const ArenaStats stats = arena.stats();
  EXPECT_EQ(stats.footprint_bytes, 5 * kA);
  EXPECT_EQ(stats.peak_in_use_bytes, 4 * kA);
  EXPECT_EQ(stats.fragmentation_bytes(), kA);
}

TEST(Arena, RefusesWhatNoFreeRangeHolds) {
  ArenaAllocator arena(1000);  // three whole units; the last 232 bytes can hold no block
  EXPECT_EQ(arena.capacity(), 1000);
  EXPECT_FALSE(arena.allocate(1000).has_value());
  EXPECT_EQ(place(arena, 3 * kA), 0);
  EXPECT_FALSE(arena.allocate(1).has_value());
  EXPECT_FALSE(arena.allocate(kUnlimited).has_value());
  EXPECT_EQ(arena.stats().live_blocks, 1) << "a refusal must change nothing";
}

TEST(Arena, UnlimitedRegionTakesHugeBlocks) {
  ArenaAllocator arena(kUnlimited);
  const std::int64_t huge = std::int64_t{1} << 50;
  EXPECT_EQ(place(arena, huge), 0);
  EXPECT_EQ(place(arena, huge), huge);
  EXPECT_EQ(arena.stats().footprint_bytes, 2 * huge);
  EXPECT_FALSE(arena.allocate(kUnlimited).has_value());
}

TEST(Arena, ResetPeaksRestartsFromTheCurrentValues) {
  ArenaAllocator arena(kUnlimited);
  place(arena, kA);
  const std::int64_t b = place(arena, 4 * kA);
  arena.deallocate(b);
  arena.reset_peaks();
  const ArenaStats stats = arena.stats();
  EXPECT_EQ(stats.peak_in_use_bytes, kA);
  EXPECT_EQ(stats.peak_footprint_bytes, kA);
  EXPECT_EQ(stats.fragmentation_bytes(), 0);
}

TEST(Arena, ReplayGivesTheSameOffsetsAndStats) {
  const auto run = [] {
    ArenaAllocator arena(64 * kA);
    std::vector<std::int64_t> offsets;
    std::vector<std::int64_t> live;
    for (std::int64_t i = 1; i <= 40; ++i) {
      if (i % 3 == 0 && !live.empty()) {
        arena.deallocate(live[static_cast<std::size_t>(i) % live.size()]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(i) % live.size()));
      }
      if (auto offset = arena.allocate((i * 97) % 700 + 1)) {
        offsets.push_back(*offset);
        live.push_back(*offset);
      }
    }
    const ArenaStats stats = arena.stats();
    offsets.insert(offsets.end(), {stats.in_use_bytes, stats.peak_in_use_bytes, stats.footprint_bytes,
                                   stats.peak_footprint_bytes, stats.largest_free_bytes});
    return offsets;
  };
  EXPECT_EQ(run(), run());
}

TEST(Arena, RejectsDoubleFreeAndUnknownOffsets) {
  ArenaAllocator arena(kUnlimited);
  const std::int64_t a = place(arena, kA);
  EXPECT_THROW(arena.deallocate(a + 1), Error);
  arena.deallocate(a);
  EXPECT_THROW(arena.deallocate(a), Error);
}

TEST(SizeLimitedArena, ThrowsOverTheCapNamingTheRequest) {
  SizeLimitedArena arena(1000);
  EXPECT_EQ(arena.budget(), 1000);
  const auto a = arena.allocate(600, "a");
  EXPECT_EQ(a.offset, 0);
  EXPECT_EQ(a.requested, 600);

  const std::string message = out_of_budget_message(arena, 401, "layer 2 activations");
  EXPECT_TRUE(contains(message, "layer 2 activations needs 401 bytes")) << message;
  EXPECT_TRUE(contains(message, "600 of the 1000 budgeted bytes are in use (400 free)")) << message;
  EXPECT_EQ(arena.requested_in_use(), 600) << "a refused request must not be charged";
  EXPECT_EQ(arena.arena().stats().in_use_bytes, 3 * kA);
}

TEST(SizeLimitedArena, ThrowsWhenFragmentedWithinTheCap) {
  SizeLimitedArena arena(4 * kA);
  const auto a = arena.allocate(kA, "a");
  arena.allocate(kA, "b");
  const auto c = arena.allocate(kA, "c");
  arena.allocate(kA, "d");
  arena.deallocate(a.offset);
  arena.deallocate(c.offset);

  const std::string message = out_of_budget_message(arena, 2 * kA, "gradients");
  EXPECT_TRUE(contains(message, "gradients needs 512 bytes")) << message;
  EXPECT_TRUE(contains(message, "512 of the 1024 budgeted bytes are in use")) << message;
  EXPECT_TRUE(contains(message, "largest free range is 256 bytes (fragmented)")) << message;
  EXPECT_FALSE(contains(message, "free)")) << message;
  EXPECT_EQ(arena.requested_in_use(), 2 * kA);
}

TEST(SizeLimitedArena, CountsRequestedBytesBeforeRounding) {
  SizeLimitedArena arena(10 * kA);
  const auto a = arena.allocate(100, "a");
  const auto b = arena.allocate(300, "b");
  EXPECT_EQ(b.offset, kA);
  EXPECT_EQ(arena.requested_in_use(), 400);
  EXPECT_EQ(arena.arena().stats().in_use_bytes, 3 * kA);
  arena.deallocate(a.offset);
  EXPECT_EQ(arena.requested_in_use(), 300);
  EXPECT_EQ(arena.requested_peak(), 400);
  arena.reset_peaks();
  EXPECT_EQ(arena.requested_peak(), 300);
  EXPECT_EQ(arena.arena().stats().peak_in_use_bytes, 2 * kA);
}

TEST(SizeLimitedArena, ZeroOrUnlimitedBudgetHasNoCap) {
  for (std::int64_t budget : {std::int64_t{0}, std::int64_t{-1}, kUnlimited}) {
    SizeLimitedArena arena(budget);
    EXPECT_EQ(arena.budget(), kUnlimited);
    EXPECT_EQ(arena.arena().capacity(), kUnlimited);
    const std::int64_t huge = std::int64_t{1} << 60;
    EXPECT_EQ(arena.allocate(huge, "huge").offset, 0);
    EXPECT_EQ(arena.allocate(1, "one").offset, huge);
    EXPECT_EQ(arena.requested_in_use(), huge + 1);
  }
}

TEST(SizeLimitedArena, RejectsBadRequestsAndUnknownOffsets) {
  SizeLimitedArena arena(1000);
  EXPECT_THROW(arena.allocate(0, "nothing"), Error);
  const auto a = arena.allocate(10, "a");
  EXPECT_THROW(arena.deallocate(a.offset + kA), Error);
  arena.deallocate(a.offset);
  EXPECT_THROW(arena.deallocate(a.offset), Error);
  EXPECT_EQ(arena.requested_in_use(), 0);
}

}  // namespace
}  // namespace nj
