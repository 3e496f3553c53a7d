#pragma once
// The graph that PT-Scotch partitions: clusters of each rank's slice, contracted. PT-Scotch's own coarsening keeps,
// on graphs whose edges barely merge (random graphs), nearly every edge at each level, and with its band and
// gathered graphs it took 10 times a rank's slice (docs/performance.md, "Partitioning on many ranks"). Clustering
// first, by size-constrained label propagation (as the first level of KaMinPar and ParHIP), gives it a graph many
// times smaller.
#include <cstdint>
#include <span>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/comm/slice_messages.hpp"
#include "nj/partition/slice_adjacency.hpp"

namespace nj {

// The clusters of a slice: rows with the same cluster go to the same part.
struct SliceClusters {
  std::vector<std::int32_t> of_row;  // each row's cluster, in [0, count); a rank holds fewer than 2^31 rows
  std::int32_t count = 0;
};

// How heavy label propagation lets a cluster grow (about: ranks moving rows at once may overshoot it), and how heavy
// the pieces are that each rank cuts its rows of a cluster into.
struct ClusterLimits {
  std::int64_t cluster = 0;
  std::int64_t piece = 0;
};

// Clusters the graph by label propagation over all its edges, on every rank (a collective): each row, visited in an
// order drawn from `seed`, joins the cluster that most of its neighbours are in, while that cluster stays within
// `limits.cluster`. Each rank then cuts its rows of each cluster into pieces within `limits.piece`, in visiting order:
// the clusters that it returns, which never span ranks. The pieces of one cluster are joined by its edges, so that a
// partitioner keeps them together unless balance needs otherwise.
SliceClusters cluster_slice(const SliceAdjacency& slice, std::span<const std::int64_t> weights,
                            const ClusterLimits& limits, std::uint64_t seed, const Slices& slices, Communicator& comm);

// The clusters as a graph, distributed as the slices were: this rank's clusters in `adjacency` (neighbours and
// `edge_weights` give every other cluster that a row of it reaches, once, with the number of edges between them), their
// weights the sums of their rows'. Clusters are numbered rank after rank. Rows of cluster -1 are left out, with their
// edges; no row of a cluster may have them for neighbours. A collective of every rank.
struct ClusterGraph {
  SliceAdjacency adjacency;
  std::vector<std::int64_t> weights;
};
ClusterGraph contract(const SliceAdjacency& slice, std::span<const std::int64_t> weights, const SliceClusters& clusters,
                      const Slices& slices, Communicator& comm);

// Refines `part` (the part of each of the slice's rows) by label propagation over the parts: each row, in two halves
// a round, moves to the part that most of its neighbours are in where that cuts fewer edges and the part stays within
// `max_part_weight`. A collective of every rank.
void refine_parts(const SliceAdjacency& slice, std::span<const std::int64_t> weights, std::vector<std::int32_t>& part,
                  int parts, std::int64_t max_part_weight, std::uint64_t seed, const Slices& slices,
                  Communicator& comm);

}  // namespace nj
