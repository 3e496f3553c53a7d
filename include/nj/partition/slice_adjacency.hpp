#pragma once
// A rank's slice of a distributed undirected graph: what the partitioners of several ranks read
// (partition/README.md, "On many ranks").
#include <algorithm>
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

// The part of each entry of the adjacency's neighbours (this rank's own, or asked of the ranks that hold them), and how
// many distinct neighbours the other ranks hold. A collective of every rank.
struct NeighbourParts {
  std::vector<std::int32_t> of_entry;
  std::int64_t outside = 0;
};
inline NeighbourParts neighbour_parts(const SliceAdjacency& adjacency, std::span<const std::int32_t> part,
                                      const Slices& slices, Communicator& comm) {
  const std::vector<std::int64_t> outside = outside_neighbours(adjacency);
  const std::vector<std::int32_t> outside_part = ask_owners<std::int32_t>(
      outside, slices, comm, [&](std::int64_t id) { return part[static_cast<std::size_t>(id - adjacency.first)]; });
  NeighbourParts parts{{}, static_cast<std::int64_t>(outside.size())};
  parts.of_entry.reserve(adjacency.neighbours.size());
  for (const std::int64_t neighbour : adjacency.neighbours) {
    parts.of_entry.push_back(adjacency.holds(neighbour) ? part[static_cast<std::size_t>(neighbour - adjacency.first)]
                                                        : outside_part[index_of(outside, neighbour)]);
  }
  return parts;
}

}  // namespace nj
