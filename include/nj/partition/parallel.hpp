#pragma once
// Partitioning by ranks that each read one slice of the dataset file and never hold the whole graph: the ranks build
// the distributed undirected graph, assign parts (PT-Scotch, or contiguous blocks), and send every vertex's row, edges,
// features, label and masks to the rank that builds its part's shard. partition/README.md says how, and what each
// rank holds.
#include <functional>
#include <string>

#include "nj/comm/communicator.hpp"
#include "nj/graph/shard.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/partition/partition.hpp"

namespace nj {

// Whether a method assigns parts without the whole graph in one process: scotch and contiguous do; metis and random
// need every vertex at once.
bool runs_in_parallel(PartitionMethod method);

// The rank of `ranks` that builds part `part`'s shard.
inline int builder_of_part(int part, int ranks) { return part % ranks; }

// Partitions the dataset file at `dataset_path` on every rank of `comm` (a collective). Hands `take` the shard of each
// part this rank builds, in ascending part; returns the manifest of the partition (without shard files or folder). A
// single process is the case of one rank. Throws InputError for a method that does not run in parallel, a part count
// outside [1, vertices] or a dataset file that fails its checks.
PartitionManifest partition_in_parallel(const std::string& dataset_path, const PartitionOptions& options,
                                        Communicator& comm, const std::function<void(Shard&&)>& take);

// nj partition on one rank or many: every rank writes the shards it builds into `directory`, and rank 0 the manifest
// once all are written. Returns the manifest.
PartitionManifest write_partition_in_parallel(const std::string& dataset_path, const PartitionOptions& options,
                                              Communicator& comm, const std::string& directory);

}  // namespace nj
