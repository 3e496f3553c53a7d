#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "nj/core/host_memory.hpp"
#include "nj/core/release.hpp"

namespace nj {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// Resident bytes of an array of `bytes` once every page of it is written.
std::vector<char> touched(std::int64_t bytes) {
  std::vector<char> values(static_cast<std::size_t>(bytes));
  std::memset(values.data(), 1, values.size());
  return values;
}

TEST(HostMemory, APhasesPeakCountsOnlyWhatItHeldWhileTheProcesssPeakKeepsEverything) {
  const ResidentMemory start = resident_memory();
  { const std::vector<char> earlier = touched(96 * kMiB); }
  // Freed, the array may stay resident (a sanitizer's quarantine keeps it): what follows holds either way.
  const ResidentMemory before = resident_memory();
  ASSERT_GE(before.peak, start.current + 90 * kMiB) << "the earlier array was not counted";
  mark_peak();
  { const std::vector<char> later = touched(24 * kMiB); }
  const ResidentMemory after = resident_memory();
  EXPECT_GE(after.peak, before.peak) << "the process's peak forgot the earlier array";
  EXPECT_GE(after.peak_since_mark, before.current + 20 * kMiB) << "the phase's array is not in its peak";
  EXPECT_LT(after.peak_since_mark, before.current + 60 * kMiB) << "the phase's peak still counts the earlier array";
}

TEST(ReleaseVector, GivesTheMemoryBackWhereAssigningEmptyBracesKeepsIt) {
  std::vector<std::int64_t> kept(1000, 1);
  kept = {};
  EXPECT_EQ(kept.capacity(), 1000U) << "libstdc++ now frees on `= {}`: release_vector's comment is out of date";
  std::vector<std::int64_t> released(1000, 1);
  release_vector(released);
  EXPECT_EQ(released.capacity(), 0U);
}

}  // namespace
}  // namespace nj
