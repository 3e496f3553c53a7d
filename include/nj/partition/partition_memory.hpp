#pragma once
// The host memory a rank of a parallel partition holds at the peak of each of its phases, beyond what its process
// held before it read anything: the formulas nj partition logs beside each phase's measured peak, and that
// docs/multi-rank.md projects to larger graphs. partition/README.md ("What a rank holds") explains each term.
#include <cstdint>
#include <string>
#include <vector>

#include "nj/core/phase_memory.hpp"

namespace nj {

// What one rank reads, builds and receives, counted on its slice.
struct PartitionRankCounts {
  int ranks = 1;
  std::int64_t rows = 0;             // the slice's vertices
  std::int64_t in_edges = 0;         // their stored in-edges, self-loops among them
  std::int64_t self_loops = 0;       // of those
  std::int64_t reversed = 0;         // stored edges whose source the slice holds, self-loops aside (its own among them)
  std::int64_t adjacency = 0;        // the slice's entries in the simple undirected graph
  std::int64_t outside_entries = 0;  // of those, the entries whose vertex another slice holds
  std::int64_t outside = 0;          // the distinct vertices they name
  std::int64_t components = 0;       // the connected components the slice's vertices are in
  std::int64_t clusters = 0;         // the slice's clusters (pieces of heavy components), as PT-Scotch partitions them
  std::int64_t cluster_adjacency = 0;        // and their adjacency entries
  std::int64_t whole_cluster_adjacency = 0;  // the adjacency entries of every rank's clusters
  bool named = false;                        // the file names its vertices (/graph/vertex_ids)
  std::int64_t feature_width = 0;
  std::int64_t parts_built = 0;  // the parts whose shards this rank builds
  std::int64_t rows_in = 0;      // their vertices
  std::int64_t edges_in = 0;     // and their in-edges
  std::int64_t mirrors = 0;      // their mirrors, summed over the parts
};

// Its counts where every slice is the mean and the rank builds the most parts any rank does (parts / ranks, rounded
// up), each the mean part, of a graph of `vertices` vertices and `edges` stored edges, none of them self-loops, stored
// in both directions (a symmetric graph), with each vertex's neighbours spread at random over the graph (graphs with
// locality have fewer outside neighbours), and clusters for which PT-Scotch's memory can be left out (as label
// propagation contracts graphs with communities): what a forecast for a graph that is not at hand assumes. A part's
// mirrors are `mirrors_per_vertex` times its vertices, or where that is negative, what neighbours spread at random give
// (a random partition's).
PartitionRankCounts mean_partition_counts(std::int64_t vertices, std::int64_t edges, std::int64_t feature_width,
                                          int ranks, int parts, double mirrors_per_vertex = -1);

// The phases in the order they run: reading the slice, the undirected graph, assigning parts, sending the rows,
// building the shards.
std::vector<PhaseBytes> partition_phase_bytes(const PartitionRankCounts& counts);

}  // namespace nj
