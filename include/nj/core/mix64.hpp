#pragma once
// SplitMix64's finaliser: a bijection of 64-bit words whose every output bit depends on every input bit. What the
// order-free hashes of a graph's edges add up (a sum of mixed edges does not depend on the order they come in).
#include <cstdint>

namespace nj {

inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27U)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31U);
}

}  // namespace nj
