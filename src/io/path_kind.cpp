#include "nj/io/path_kind.hpp"

#include <filesystem>

#include "nj/io/shard_file.hpp"

namespace nj {

PathKind path_kind(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path p(path);
  if (!fs::is_directory(p, error)) return fs::exists(p, error) ? PathKind::kFile : PathKind::kMissing;
  if (fs::exists(p / kManifestFileName, error)) return PathKind::kPartitionFolder;
  if (fs::exists(p / "meta.txt", error) && fs::exists(p / "edges.txt", error)) return PathKind::kPlainFolder;
  if (fs::exists(p / "raw" / "edge.csv.gz", error) || fs::exists(p / "raw" / "edge.csv", error))
    return PathKind::kOgbFolder;
  return PathKind::kOtherFolder;
}

}  // namespace nj
