#include <filesystem>

#include "cli/commands.hpp"
#include "nj/core/error.hpp"
#include "nj/io/path_kind.hpp"

namespace nj::cli {

void require_dataset_file(const std::string& path, PartitionFolders partition_folders) {
  switch (path_kind(path)) {
    case PathKind::kFile: return;
    case PathKind::kMissing: throw InputError(fmt::format("{}: no such file", path));
    case PathKind::kPartitionFolder:
      throw InputError(partition_folders == PartitionFolders::kByOption
                           ? fmt::format("{} is a partition folder (manifest.json), not a dataset file: use "
                                         "--partitions {}",
                                         path, path)
                           : fmt::format("{} is a partition folder (manifest.json), already split: nj partition "
                                         "splits a dataset file",
                                         path));
    case PathKind::kPlainFolder:
      throw InputError(
          fmt::format("{} is a folder of a plain-text export (meta.txt, edges.txt, ...), not a dataset "
                      "file: convert it with nj convert --format plain {} --output FILE.h5",
                      path, path));
    case PathKind::kOgbFolder:
      throw InputError(
          fmt::format("{} is an OGB dataset folder (raw/edge.csv, ...), not a dataset file: convert it "
                      "with nj convert --format ogb {} --output FILE.h5",
                      path, path));
    case PathKind::kOtherFolder: break;
  }
  throw InputError(
      fmt::format("{} is a folder with no dataset file nj knows in it (a dataset file is HDF5, written "
                  "by nj convert or nj generate; a partition folder has a manifest.json)",
                  path));
}

void require_convert_input(const std::string& format, const std::string& path) {
  const PathKind kind = path_kind(path);
  const char* fitting = kind == PathKind::kPlainFolder ? "plain" : kind == PathKind::kOgbFolder ? "ogb" : nullptr;
  if (fitting != nullptr && format != fitting) {
    throw InputError(fmt::format("{} is {}: convert it with --format {}", path,
                                 kind == PathKind::kPlainFolder ? "a plain-text export (meta.txt, edges.txt, ...)"
                                                                : "an OGB dataset folder (raw/edge.csv, ...)",
                                 fitting));
  }
  if (kind == PathKind::kPartitionFolder) {
    throw InputError(
        fmt::format("{} is a partition folder (manifest.json), written by nj partition: nothing to "
                    "convert",
                    path));
  }
  NJ_REQUIRE(format != "edgelist" || kind != PathKind::kOtherFolder,
             "{} is a folder: --format edgelist reads one edge-list file (--format plain and ogb read folders)", path);
}

}  // namespace nj::cli
