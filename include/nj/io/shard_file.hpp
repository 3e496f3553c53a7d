#pragma once
// A partitioned dataset on disk: one HDF5 shard file per part (`part-<k>.h5`, one rank's `Shard`) and a
// `manifest.json` that describes the partition and names the shards. docs/dataset-format.md specifies both.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "nj/core/progress.hpp"
#include "nj/graph/dataset.hpp"
#include "nj/graph/shard.hpp"

namespace nj {

inline constexpr std::int64_t kShardFormatVersion = 1;
inline constexpr std::int64_t kManifestFormatVersion = 1;
inline constexpr const char* kShardKind = "nj-shard";
inline constexpr const char* kManifestKind = "nj-partition";
inline constexpr const char* kManifestFileName = "manifest.json";

// "part-<k>.h5"
std::string shard_file_name(int part);

// Validates the shard, then writes it (replacing any file at `path`).
void write_shard(const std::string& path, const Shard& shard);
// Reads and validates; every error names the file and the object inside it.
Shard read_shard(const std::string& path);
// True when `path` is an HDF5 file whose `kind` attribute says it is a shard; false for a dataset file.
bool is_shard_file(const std::string& path);

// What manifest.json records.
struct PartitionManifest {
  std::string dataset_name;
  std::string dataset_path;  // the dataset file partitioned, as an absolute path
  std::int64_t global_vertices = 0;
  std::int64_t global_edges = 0;
  std::int64_t global_train = 0;
  PartitionInfo partition;
  std::vector<std::string> shard_files;  // per part, relative to the manifest's folder

  // The manifest's folder, where the shard files are; set by read_manifest, not stored.
  std::string directory;
};

// The manifest as manifest.json holds it, with the derived figures (cut fraction, imbalances, mirror
// fractions) that a reader of the file would otherwise compute.
nlohmann::json to_json(const PartitionManifest& manifest);
void write_manifest(const std::string& directory, const PartitionManifest& manifest);
// Reads `<path>/manifest.json` when `path` is a folder, else `path` itself; errors name the file and the key.
PartitionManifest read_manifest(const std::string& path);

// The two ends of writing a partition into `directory`: before the first shard, the folder made and any manifest in it
// removed (it would name shards being replaced); after the last, the manifest written and the shard files an earlier
// partition into more parts left there removed.
void start_partition_folder(const std::string& directory);
void finish_partition_folder(const std::string& directory, const PartitionManifest& manifest);

// Writes every part's shard of `dataset` (one at a time, so that only one shard is in memory) and then the
// manifest into `directory`, which is created if missing, telling `progress` of each shard; removes the shard files
// an earlier partition into more parts left there. Returns the manifest written.
PartitionManifest write_partition(const Dataset& dataset, const std::string& dataset_path,
                                  std::span<const std::int32_t> part_of, const PartitionInfo& info,
                                  const std::string& directory, const ProgressCallback& progress = {});

// Reads part `part`'s shard of the partition in `directory` after checking that the partition has
// `expected_parts` parts (one per rank of the job).
Shard load_part(const std::string& directory, int part, int expected_parts);

}  // namespace nj
