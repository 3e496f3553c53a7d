#pragma once
// Host arrays read at random over many megabytes (the cache planner's per-row state, its trace index): where one
// spans at least a huge page it is aligned to one and asks the kernel for transparent huge pages (madvise), so that
// a random access costs a cache miss instead of a cache miss and a page walk. Smaller arrays are allocated as
// usual. Where the kernel gives no huge pages the memory is the same, in small pages.
#include <cstddef>
#include <new>
#include <vector>

namespace nj {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// `bytes` from malloc (so that the heap's count includes it), huge-page backed from kHugePageBytes up; throws
// std::bad_alloc. release_huge_bytes takes the same size back.
void* allocate_huge_bytes(std::size_t bytes);
void release_huge_bytes(void* p, std::size_t bytes) noexcept;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  explicit HugePageAllocator(const HugePageAllocator<U>& /*other*/) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(allocate_huge_bytes(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { release_huge_bytes(p, n * sizeof(T)); }
};

// Stateless: any two are equal, whatever they allocate.
template <class T, class U>
bool operator==(const HugePageAllocator<T>& /*a*/, const HugePageAllocator<U>& /*b*/) noexcept {
  return true;
}

template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace nj
