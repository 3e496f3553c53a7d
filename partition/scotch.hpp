#pragma once
// Scotch's graph partitioning, 64-bit (Debian's scotch-int64 flavour): the part of each vertex of a rank's slice of a
// distributed graph.
#include <cstdint>
#include <span>
#include <vector>

#include "nj/partition/slice_adjacency.hpp"

namespace nj {

// The imbalance Scotch may leave: each part at most 1.03 times the mean weight, as METIS's default.
constexpr double kPartImbalance = 0.03;

// The parts Scotch divides vertices into, of equal weight once `padding` is added in isolated vertices (fillers) of at
// most `most_filler` each: the room that other vertices are to take, spread as Scotch finds best.
struct ScotchTargets {
  int parts = 0;
  std::int64_t padding = 0;
  std::int64_t most_filler = 1;
};

// The part of each of the slice's vertices, `targets.parts` parts of equal weight (within 3 %, counting the fillers),
// cutting the least edge weight (the slice's edge_weights, one an adjacency entry). On several ranks (`ranks` > 1, MPI
// up) PT-Scotch's SCOTCH_dgraphPart over MPI_COMM_WORLD, every rank passing its own slice (slices ascending by rank)
// and the same targets; on one, Scotch's SCOTCH_graphPart. The seed makes the result a function of the graph, the seed
// and the number of ranks. Throws Error naming the call where Scotch fails.
std::vector<std::int32_t> scotch_parts(const SliceAdjacency& slice, std::span<const std::int64_t> weights,
                                       const ScotchTargets& targets, std::uint64_t seed, int ranks);

}  // namespace nj
