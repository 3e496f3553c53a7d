#include "nj/io/ogb.hpp"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "nj/core/error.hpp"
#include "nj/io/edge_list.hpp"
#include "nj/io/text_reader.hpp"

namespace nj {
namespace {

namespace fs = std::filesystem;

// folder/stem.csv.gz or folder/stem.csv, whichever exists; empty if neither.
std::string csv_file(const fs::path& folder, const std::string& stem) {
  for (const char* extension : {".csv.gz", ".csv"}) {
    const auto path = folder / (stem + extension);
    if (fs::is_regular_file(path)) return path.string();
  }
  return {};
}

std::string required_csv_file(const fs::path& folder, const std::string& stem) {
  auto path = csv_file(folder, stem);
  NJ_REQUIRE(!path.empty(), "{}: missing {}.csv.gz", folder.string(), stem);
  return path;
}

fs::path split_folder(const fs::path& split_root, const std::string& scheme) {
  NJ_REQUIRE(fs::is_directory(split_root),
             "{}: missing split (an OGB folder has split/<scheme>/; give --split-ratio for a random split instead)",
             split_root.string());
  if (!scheme.empty()) {
    NJ_REQUIRE(fs::is_directory(split_root / scheme), "{}: missing split scheme '{}'", split_root.string(), scheme);
    return split_root / scheme;
  }
  std::vector<std::string> schemes;
  for (const auto& entry : fs::directory_iterator(split_root)) {
    if (entry.is_directory()) schemes.push_back(entry.path().filename().string());
  }
  std::sort(schemes.begin(), schemes.end());
  NJ_REQUIRE(!schemes.empty(), "{}: missing split (no scheme folder inside)", split_root.string());
  NJ_REQUIRE(schemes.size() == 1, "{}: several split schemes ({}); choose one with --ogb-split", split_root.string(),
             fmt::join(schemes, ", "));
  return split_root / schemes.front();
}

}  // namespace

OgbFiles ogb_files(const std::string& folder, ConvertOptions options, const std::string& split_scheme) {
  const fs::path dir(folder);
  const auto raw = dir / "raw";
  NJ_REQUIRE(fs::is_directory(raw), "{}: no raw/ folder (expected an OGB node-property-prediction dataset)", folder);
  options.ids = {};
  if (const auto count_file = csv_file(raw, "num-node-list"); !count_file.empty()) {
    options.ids.num_vertices = read_header_integers(count_file, 1).front();
    NJ_REQUIRE(options.ids.num_vertices > 0, "{}: the vertex count must be positive, got {}", count_file,
               options.ids.num_vertices);
    require_vertex_count(options.ids.num_vertices, count_file);
  }
  auto& data = options.data;
  if (data.features.empty() && data.random_features == 0) data.features = csv_file(raw, "node-feat");
  if (data.labels.empty()) data.labels = csv_file(raw, "node-label");
  if (data.wants_own_split()) {
    const auto split = split_folder(dir / "split", split_scheme);
    data.train = required_csv_file(split, "train");
    data.val = required_csv_file(split, "valid");
    data.test = required_csv_file(split, "test");
  }
  return {.edges = required_csv_file(raw, "edge"), .options = std::move(options)};
}

}  // namespace nj
