#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

#include "nj/core/host_memory.hpp"
#include "nj/core/huge_pages.hpp"

namespace nj {
namespace {

// THPeligible of the mapping that holds `p`, from /proc/self/smaps: -1 where it cannot be read.
int huge_page_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = address >= begin && address < end;
      continue;
    }
    if (inside && line.starts_with("THPeligible:")) return std::stoi(line.substr(12));
  }
  return -1;
}

bool kernel_offers_huge_pages() {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(enabled, modes);
  return modes.find("[always]") != std::string::npos || modes.find("[madvise]") != std::string::npos;
}

TEST(HugeVector, SmallArraysAreOrdinaryAndKeepTheirValues) {
  HugeVector<std::int32_t> small(1000);
  std::iota(small.begin(), small.end(), 0);
  HugeVector<std::int32_t> copy = small;
  EXPECT_EQ(copy, small);
  EXPECT_EQ(copy[999], 999);
}

TEST(HugeVector, LargeArraysStartOnAHugePageAndCountInTheHeap) {
  const std::int64_t before = heap_bytes_in_use();
  {
    const std::size_t n = 3 * kHugePageBytes / sizeof(std::int64_t) + 5;
    HugeVector<std::int64_t> large(n, 7);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(large.data()) % kHugePageBytes, 0U);
    EXPECT_GE(heap_bytes_in_use() - before, static_cast<std::int64_t>(n * sizeof(std::int64_t)));
    EXPECT_EQ(large[n - 1], 7);
    large.resize(2 * n, 9);  // grows through the allocator again
    EXPECT_EQ(large[n - 1], 7);
    EXPECT_EQ(large[2 * n - 1], 9);
    HugeVector<std::int64_t>().swap(large);
  }
  // What planning measures of its own structures must not include arrays it has freed.
  EXPECT_LT(heap_bytes_in_use() - before, static_cast<std::int64_t>(kHugePageBytes));
}

TEST(HugeVector, LargeArraysAreAdvisedToTakeHugePages) {
  if (!kernel_offers_huge_pages()) GTEST_SKIP() << "this kernel gives no transparent huge pages";
  HugeVector<std::uint8_t> large(4 * kHugePageBytes, 1);
  const int eligible = huge_page_eligible(large.data());
  if (eligible < 0) GTEST_SKIP() << "/proc/self/smaps says nothing of THPeligible here";
  EXPECT_EQ(eligible, 1);
}

TEST(HugeVector, AnImpossibleSizeThrowsInsteadOfWrapping) {
  HugePageAllocator<std::int64_t> allocator;
  EXPECT_THROW(static_cast<void>(allocator.allocate(static_cast<std::size_t>(-1) / 4)), std::bad_array_new_length);
  // Bytes that would wrap when rounded up to whole huge pages.
  EXPECT_THROW(static_cast<void>(allocate_huge_bytes(static_cast<std::size_t>(-1) - 1)), std::bad_alloc);
}

TEST(HugeVector, AllocatorsOfAnyTypesAreEqual) {
  EXPECT_TRUE(HugePageAllocator<std::int32_t>() == HugePageAllocator<double>());
  const HugePageAllocator<double> rebound{HugePageAllocator<std::int32_t>()};
  EXPECT_TRUE(rebound == HugePageAllocator<double>());
}

}  // namespace
}  // namespace nj
