#include "nj/io/dataset_file.hpp"

#include <spdlog/spdlog.h>

#include <limits>

#include "nj/core/error.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/io/feature_storage.hpp"
#include "nj/io/hdf5.hpp"

namespace nj {
namespace {

constexpr hsize_t kFeatureRowsPerChunk = 4096;

}  // namespace

void write_dataset(const std::string& path, const Dataset& dataset, FeatureStorage features) {
  dataset.validate("dataset to write to " + path);
  auto file = hdf5::File::create(path);
  const auto n = static_cast<hsize_t>(dataset.num_vertices());
  file.create_group("/graph");
  file.write<eid_t>("/graph/indptr", dataset.graph.offsets, {n + 1});
  file.write<vid_t>("/graph/indices", dataset.graph.sources, {static_cast<hsize_t>(dataset.graph.num_edges())},
                    1U << 20U);
  if (!dataset.community_order.empty()) {
    file.write<vid_t>("/graph/community_order", dataset.community_order, {n});
    file.set_attribute("community_order_version", kCommunityOrderVersion);
  }
  write_features(file, dataset.features, features, kFeatureRowsPerChunk);
  file.write<std::int32_t>("/labels", dataset.labels, {n});
  file.create_group("/masks");
  file.write<std::uint8_t>("/masks/train", dataset.train_mask, {n});
  file.write<std::uint8_t>("/masks/val", dataset.val_mask, {n});
  file.write<std::uint8_t>("/masks/test", dataset.test_mask, {n});
  file.set_attribute("format_version", kDatasetFormatVersion);
  file.set_attribute("name", dataset.name);
  file.set_attribute("num_classes", static_cast<std::int64_t>(dataset.num_classes));
  file.set_attribute("num_vertices", static_cast<std::int64_t>(n));
  file.set_attribute("num_edges", static_cast<std::int64_t>(dataset.graph.num_edges()));
  file.set_attribute("symmetrized", static_cast<std::int64_t>(dataset.symmetrized ? 1 : 0));
  file.set_attribute("self_loops", std::string(to_string(dataset.self_loops)));
}

namespace {

// Reads all but the feature values, and checks the features' shape; returns their width.
std::int64_t read_all_but_feature_values(const hdf5::File& file, const std::string& path, Dataset& d) {
  const auto version = file.int_attribute("format_version");
  NJ_REQUIRE(version == kDatasetFormatVersion, "{}: format_version {} is not supported (this build reads {})", path,
             version, kDatasetFormatVersion);
  d.name = file.has_attribute("name") ? file.string_attribute("name") : "";
  // Checked before narrowing to 32 bits, which would turn 2^32 + 3 into 3.
  const auto num_classes = file.int_attribute("num_classes");
  NJ_REQUIRE(num_classes > 0 && num_classes <= std::numeric_limits<std::int32_t>::max(),
             "{}: attribute num_classes must be in [1, {}], got {}", path, std::numeric_limits<std::int32_t>::max(),
             num_classes);
  d.num_classes = static_cast<std::int32_t>(num_classes);
  d.symmetrized = file.int_attribute("symmetrized") != 0;
  try {
    d.self_loops = parse_self_loop_policy(file.string_attribute("self_loops"));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: attribute self_loops: {}", path, e.what()));
  }

  d.graph.offsets = hdf5::read_vector<eid_t>(file, "/graph/indptr", -1);
  NJ_REQUIRE(!d.graph.offsets.empty(), "{}: /graph/indptr: must have num_vertices + 1 entries, found 0", path);
  const auto n = static_cast<std::int64_t>(d.graph.offsets.size()) - 1;
  d.graph.sources = hdf5::read_vector<vid_t>(file, "/graph/indices", -1);
  d.graph.validate(path + ": /graph");
  if (file.exists("/graph/community_order")) {
    // An order from another version of the search is not what this build would search for: searched again.
    const std::int64_t order_version =
        file.has_attribute("community_order_version") ? file.int_attribute("community_order_version") : 0;
    if (order_version == kCommunityOrderVersion) {
      d.community_order = hdf5::read_vector<vid_t>(file, "/graph/community_order", n);
    } else {
      spdlog::info("{}: the stored community order is of version {}, not {}: not used", path, order_version,
                   kCommunityOrderVersion);
    }
  }
  for (const auto& [key, actual] : {std::pair<const char*, std::int64_t>{"num_vertices", n},
                                    std::pair<const char*, std::int64_t>{"num_edges", d.graph.num_edges()}}) {
    if (file.has_attribute(key)) {
      const auto declared = file.int_attribute(key);
      NJ_REQUIRE(declared == actual, "{}: attribute {} = {} but /graph holds {}", path, key, declared, actual);
    }
  }

  const StoredFeatures stored = stored_features(file);
  d.features_stored_sparse = stored.sparse;
  NJ_REQUIRE(stored.rows == n, "{}: {}: {} rows but the graph has {} vertices", path, stored.object(), stored.rows, n);

  d.labels = hdf5::read_vector<std::int32_t>(file, "/labels", n);
  for (auto [name, mask] : {std::pair{"/masks/train", &d.train_mask}, std::pair{"/masks/val", &d.val_mask},
                            std::pair{"/masks/test", &d.test_mask}}) {
    NJ_REQUIRE(file.exists(name), "{}: {}: missing (every dataset needs train, val and test masks)", path, name);
    *mask = hdf5::read_vector<std::uint8_t>(file, name, n);
    for (auto& m : *mask) {
      NJ_REQUIRE(m <= 1, "{}: {}: mask entries must be 0 or 1, found {}", path, name, m);
    }
  }
  return stored.width;
}

}  // namespace

Dataset read_dataset(const std::string& path) {
  const auto file = hdf5::File::open_read(path);
  Dataset d;
  read_all_but_feature_values(file, path, d);
  d.features = read_features(file);
  d.validate(path);
  return d;
}

DatasetWithoutFeatures read_dataset_without_features(const std::string& path) {
  const auto file = hdf5::File::open_read(path);
  DatasetWithoutFeatures read;
  read.feature_width = read_all_but_feature_values(file, path, read.dataset);
  read.dataset.validate_all_but_features(path);
  return read;
}

}  // namespace nj
