#pragma once
// One rank's part of a graph that is not at hand, made up to the mean part's counts: what `nj plan --shape` plans, so
// that a training rank's memory is projected for a graph's shape by the same replay that forecasts a shard's. Only the
// counts are the part's; which vertex reads which is drawn at random.
#include <cstdint>

#include "nj/graph/shard.hpp"

namespace nj {

struct PartShape {
  std::int64_t owned = 0;
  std::int64_t mirrors = 0;   // at most in_edges: each is the source of an edge
  std::int64_t in_edges = 0;  // of the owned vertices
  int peers = 0;              // the ranks the part exchanges with; at least 1 where there are mirrors
};

// The owned vertices take the in-edges evenly. Every mirror is the source of one of them, and the others' sources are
// drawn from every local vertex (seeded). The mirrors are owned by the peers in turn, and each peer mirrors as many of
// the owned rows as the part mirrors of its. Throws InputError where the counts cannot be a part.
LocalGraph mean_part_graph(const PartShape& shape, std::uint64_t seed);

}  // namespace nj
