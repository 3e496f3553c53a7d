#pragma once
// A rank's slice of a distributed undirected graph: what the partitioners of several ranks read
// (partition/README.md, "On many ranks").
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

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

// The neighbours that other ranks' slices hold, ascending without repeats: what a rank asks the others about. Sized
// before it is filled, so that it holds no more than its entries while it is sorted.
inline std::vector<std::int64_t> outside_neighbours(const SliceAdjacency& slice) {
  const auto outside = [&](std::int64_t v) { return !slice.holds(v); };
  std::vector<std::int64_t> found;
  found.reserve(static_cast<std::size_t>(std::count_if(slice.neighbours.begin(), slice.neighbours.end(), outside)));
  std::copy_if(slice.neighbours.begin(), slice.neighbours.end(), std::back_inserter(found), outside);
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  found.shrink_to_fit();
  return found;
}

}  // namespace nj
