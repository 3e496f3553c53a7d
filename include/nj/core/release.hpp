#pragma once
// Frees what a vector holds, where a large array is done with before its owner is. `values = {}` and
// `values.clear()` keep the capacity (libstdc++ assigns the empty initializer list into the same buffer), so the
// array would stay resident until its vector is destroyed.
#include <vector>

namespace nj {

template <typename T, typename Allocator>
void release_vector(std::vector<T, Allocator>& values) {
  std::vector<T, Allocator>().swap(values);
}

}  // namespace nj
