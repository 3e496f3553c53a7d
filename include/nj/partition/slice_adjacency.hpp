#pragma once
// A rank's slice of a distributed undirected graph: what the partitioners of several ranks read
// (partition/README.md, "On many ranks").
#include <cstdint>
#include <span>
#include <vector>

#include "nj/comm/slice_messages.hpp"

namespace nj {

// A slice of an undirected graph: vertices [first, first + rows) of the whole, each with its neighbours (global ids),
// where every edge is listed at both of its ends, with the same weight at both.
struct SliceAdjacency {
  std::int64_t first = 0;
  std::vector<std::int64_t> offsets{0};  // rows + 1
  std::vector<std::int64_t> neighbours;
  std::vector<std::int64_t> edge_weights;  // one a neighbour; none: every edge weighs 1

  std::int64_t rows() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
  bool holds(std::int64_t v) const { return v >= first && v < first + rows(); }
};

// The neighbours that other ranks' slices hold, ascending without repeats: what a rank asks the others about.
inline std::vector<std::int64_t> outside_neighbours(const SliceAdjacency& slice) {
  return sorted_unique_where(std::span<const std::int64_t>(slice.neighbours),
                             [&](std::int64_t v) { return !slice.holds(v); });
}

}  // namespace nj
