#pragma once
// PT-Scotch's parts of the slices of a distributed graph (partition/README.md, "On many ranks", step 3).
#include <cstdint>
#include <span>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/partition/parallel.hpp"
#include "nj/partition/partition_memory.hpp"
#include "nj/partition/slice_adjacency.hpp"

namespace nj {

// The part of each of the slice's rows, balancing `weights` (a training vertex weighs 2, any other 1) within 3 % and
// cutting few edges. Records the graph Scotch partitioned in `counts`. A collective of every rank.
std::vector<std::int32_t> scotch_slice_parts(const PartitionOptions& options, const SliceAdjacency& adjacency,
                                             std::span<const std::int64_t> weights,
                                             std::span<const std::uint8_t> training, const Slices& slices,
                                             Communicator& comm, PartitionRankCounts& counts);

}  // namespace nj
