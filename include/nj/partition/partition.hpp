#pragma once
// Assigning every vertex of a dataset to one of P parts (ranks): METIS k-way on the undirected graph, a
// seeded balanced random assignment, or contiguous blocks of ids. partition/README.md says why METIS is set
// up as it is.
#include <cstdint>
#include <string>
#include <vector>

#include "nj/graph/dataset.hpp"
#include "nj/graph/shard.hpp"

namespace nj {

enum class PartitionMethod { kMetis, kRandom, kContiguous, kScotch };
const char* to_string(PartitionMethod method);
// "metis", "random", "contiguous" or "scotch"; anything else is an InputError.
PartitionMethod parse_partition_method(const std::string& text);

struct PartitionOptions {
  PartitionMethod method = PartitionMethod::kMetis;
  int parts = 1;
  std::uint64_t seed = 0;  // METIS's seed, or the random assignment's; the result is a function of it
  // scotch: a graph of at most this many adjacency entries (every rank's) is partitioned several ways and the least cut
  // kept (partition/README.md, "On many ranks", step 3); a larger one, one way.
  std::int64_t several_ways_up_to = std::int64_t{1} << 18;
};

// The part of every vertex (in [0, parts)), by metis, random or contiguous (scotch partitions through
// partition_in_parallel, nj/partition/parallel.hpp, on one rank or many). Fills info: method, parts, seed, the seconds
// the assignment took, and through fill_part_counts the per-part counts and the edge cut. Throws nj::InputError when
// parts is not in [1, number of vertices] or, for METIS, when the graph is beyond METIS's 32-bit indices.
std::vector<std::int32_t> assign_parts(const Dataset& dataset, const PartitionOptions& options, PartitionInfo& info);

// Throws nj::InputError, naming `what` and the limit, when a graph of this many vertices and adjacency
// entries (twice its undirected edges) does not fit METIS's idx_t.
void require_fits_metis(const std::string& what, std::int64_t vertices, std::int64_t adjacency_entries);

}  // namespace nj
