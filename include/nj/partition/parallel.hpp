#pragma once
// Partitioning by ranks that each read one slice of the dataset file and never hold the whole graph: the ranks build
// the distributed undirected graph, assign parts (PT-Scotch, or contiguous blocks), and send every vertex's row, edges,
// features, label and masks to the rank that builds its part's shard. partition/README.md says how, and what each
// rank holds.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

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

// So many training vertices that part `from` gives part `to` after PT-Scotch, each for a vertex outside the training
// split, so that the vertex counts stay (partition/training_balance.hpp).
struct TrainingExchange {
  int from = 0;
  int to = 0;
  std::int64_t count = 0;
};

// The exchanges that even out the training vertices per part (`training`): parts above the mean rounded up give down
// to it; parts below the mean rounded down take up to it first, then parts below the mean rounded up take up to that,
// each in part order. Every part then holds at most the mean rounded up.
std::vector<TrainingExchange> training_exchanges(std::span<const std::int64_t> training);

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
