#include "nj/core/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdlib>

namespace nj {

void* allocate_huge_bytes(std::size_t bytes) {
  if (bytes < kHugePageBytes) return ::operator new(bytes);
  if (bytes > static_cast<std::size_t>(-1) - kHugePageBytes) throw std::bad_alloc();
  // aligned_alloc wants a multiple of the alignment. The last huge page is faulted whole once touched: at most
  // 2 MiB more resident than `bytes`.
  const std::size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, rounded);
  if (p == nullptr) throw std::bad_alloc();
  // Before the first touch, so that the faults take huge pages. Advice only: where it fails (no THP, another
  // kernel) the array works the same in small pages.
  static_cast<void>(madvise(p, rounded, MADV_HUGEPAGE));
  return p;
}

void release_huge_bytes(void* p, std::size_t bytes) noexcept {
  if (bytes < kHugePageBytes) {
    ::operator delete(p);
  } else {
    std::free(p);  // NOLINT(cppcoreguidelines-no-malloc): it came from aligned_alloc
  }
}

}  // namespace nj
