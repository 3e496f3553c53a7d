#include "nj/io/dataset_file.hpp"

#include <spdlog/spdlog.h>

#include <limits>
#include <numeric>

#include "nj/core/error.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/io/feature_storage.hpp"
#include "nj/io/hdf5.hpp"

namespace nj {
namespace {

constexpr hsize_t kFeatureRowsPerChunk = 4096;

// The root attributes every dataset file has.
void set_root_attributes(hdf5::File& file, const DatasetHeader& header) {
  file.set_attribute("format_version", kDatasetFormatVersion);
  file.set_attribute("name", header.name);
  file.set_attribute("num_classes", static_cast<std::int64_t>(header.num_classes));
  file.set_attribute("num_vertices", header.num_vertices);
  file.set_attribute("num_edges", header.num_edges);
  file.set_attribute("symmetrized", static_cast<std::int64_t>(header.symmetrized ? 1 : 0));
  file.set_attribute("self_loops", std::string(to_string(header.self_loops)));
}

// All but the features, which a writer of one block at a time writes apart.
void write_checked_vertex_data(hdf5::File& file, const Dataset& dataset, std::int64_t num_edges) {
  const auto n = static_cast<hsize_t>(dataset.num_vertices());

  if (!dataset.vertex_ids.empty()) file.write<gid_t>("/graph/vertex_ids", dataset.vertex_ids, {n});
  if (!dataset.community_order.empty()) {
    file.write<vid_t>("/graph/community_order", dataset.community_order, {n});
    file.set_attribute("community_order_version", kCommunityOrderVersion);
  }
  file.write<std::int32_t>("/labels", dataset.labels, {n});
  file.create_group("/masks");
  file.write<std::uint8_t>("/masks/train", dataset.train_mask, {n});
  file.write<std::uint8_t>("/masks/val", dataset.val_mask, {n});
  file.write<std::uint8_t>("/masks/test", dataset.test_mask, {n});
  set_root_attributes(file, {.name = dataset.name,
                             .num_vertices = static_cast<std::int64_t>(n),
                             .num_edges = num_edges,
                             .num_classes = dataset.num_classes,
                             .symmetrized = dataset.symmetrized,
                             .self_loops = dataset.self_loops});
}

}  // namespace

void write_dataset(const std::string& path, const Dataset& dataset, FeatureStorage features) {
  dataset.validate("dataset to write to " + path);
  auto file = hdf5::File::create(path);
  file.create_group("/graph");
  file.write<eid_t>("/graph/indptr", dataset.graph.offsets, {dataset.graph.offsets.size()});
  file.write<vid_t>("/graph/indices", dataset.graph.sources, {static_cast<hsize_t>(dataset.graph.num_edges())},
                    1U << 20U);
  write_features(file, dataset.features, features, kFeatureRowsPerChunk);
  write_checked_vertex_data(file, dataset, dataset.graph.num_edges());
}

bool write_dataset_vertex_data(hdf5::File& file, const Dataset& dataset, std::int64_t num_edges,
                               const FeatureBlocks& features, FeatureStorage storage) {
  const std::string where = "dataset to write to " + file.path();
  dataset.validate_vertex_data(where);
  NJ_REQUIRE(features.rows == dataset.num_vertices(), "{}: /features: {} rows but the graph has {} vertices", where,
             features.rows, dataset.num_vertices());
  const bool sparse = write_features(file, features, storage, kFeatureRowsPerChunk, where);
  write_checked_vertex_data(file, dataset, num_edges);
  return sparse;
}

namespace {

// The root attributes, checked; the counts are those of /graph and of the stored features.
DatasetHeader read_header(const hdf5::File& file, const std::string& path) {
  const auto version = file.int_attribute("format_version");
  NJ_REQUIRE(version == kDatasetFormatVersion, "{}: format_version {} is not supported (this build reads {})", path,
             version, kDatasetFormatVersion);
  DatasetHeader header;
  header.name = file.has_attribute("name") ? file.string_attribute("name") : "";
  // Checked before narrowing to 32 bits, which would turn 2^32 + 3 into 3.
  const auto num_classes = file.int_attribute("num_classes");
  NJ_REQUIRE(num_classes > 0 && num_classes <= std::numeric_limits<std::int32_t>::max(),
             "{}: attribute num_classes must be in [1, {}], got {}", path, std::numeric_limits<std::int32_t>::max(),
             num_classes);
  header.num_classes = static_cast<std::int32_t>(num_classes);
  header.symmetrized = file.int_attribute("symmetrized") != 0;
  try {
    header.self_loops = parse_self_loop_policy(file.string_attribute("self_loops"));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: attribute self_loops: {}", path, e.what()));
  }
  const std::vector<hsize_t> indptr = file.shape("/graph/indptr");
  NJ_REQUIRE(indptr.size() == 1 && indptr[0] >= 1, "{}: /graph/indptr: must have num_vertices + 1 entries", path);
  header.num_vertices = static_cast<std::int64_t>(indptr[0]) - 1;
  const std::vector<hsize_t> indices = file.shape("/graph/indices");
  NJ_REQUIRE(indices.size() == 1, "{}: /graph/indices: expected 1 dimension, found {}", path, indices.size());
  header.num_edges = static_cast<std::int64_t>(indices[0]);
  for (const auto& [key, actual] : {std::pair<const char*, std::int64_t>{"num_vertices", header.num_vertices},
                                    std::pair<const char*, std::int64_t>{"num_edges", header.num_edges}}) {
    if (file.has_attribute(key)) {
      const auto declared = file.int_attribute(key);
      NJ_REQUIRE(declared == actual, "{}: attribute {} = {} but /graph holds {}", path, key, declared, actual);
    }
  }
  const StoredFeatures stored = stored_features(file);
  NJ_REQUIRE(stored.rows == header.num_vertices, "{}: {}: {} rows but the graph has {} vertices", path, stored.object(),
             stored.rows, header.num_vertices);
  header.feature_width = stored.width;
  header.features_stored_sparse = stored.sparse;
  return header;
}

// Reads all but the feature values, and checks the features' shape; returns their width.
std::int64_t read_all_but_feature_values(const hdf5::File& file, const std::string& path, Dataset& d) {
  const DatasetHeader header = read_header(file, path);
  d.name = header.name;
  d.num_classes = header.num_classes;
  d.symmetrized = header.symmetrized;
  d.self_loops = header.self_loops;
  d.features_stored_sparse = header.features_stored_sparse;

  d.graph.offsets = hdf5::read_vector<eid_t>(file, "/graph/indptr", -1);
  NJ_REQUIRE(!d.graph.offsets.empty(), "{}: /graph/indptr: must have num_vertices + 1 entries, found 0", path);
  const auto n = static_cast<std::int64_t>(d.graph.offsets.size()) - 1;
  d.graph.sources = hdf5::read_vector<vid_t>(file, "/graph/indices", -1);
  d.graph.validate(path + ": /graph");
  if (file.exists("/graph/vertex_ids")) d.vertex_ids = hdf5::read_vector<gid_t>(file, "/graph/vertex_ids", n);
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

  d.labels = hdf5::read_vector<std::int32_t>(file, "/labels", n);
  for (auto [name, mask] : {std::pair{"/masks/train", &d.train_mask}, std::pair{"/masks/val", &d.val_mask},
                            std::pair{"/masks/test", &d.test_mask}}) {
    NJ_REQUIRE(file.exists(name), "{}: {}: missing (every dataset needs train, val and test masks)", path, name);
    *mask = hdf5::read_vector<std::uint8_t>(file, name, n);
    for (auto& m : *mask) {
      NJ_REQUIRE(m <= 1, "{}: {}: mask entries must be 0 or 1, found {}", path, name, m);
    }
  }
  return header.feature_width;
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

DatasetHeader read_dataset_header(const std::string& path) { return read_header(hdf5::File::open_read(path), path); }

namespace {

void check_rows(const std::string& path, const DatasetRows& read) {
  const std::int64_t n = read.header.num_vertices;
  for (std::int64_t r = 0; r < read.rows(); ++r) {
    const auto v = static_cast<std::size_t>(r);
    NJ_REQUIRE(read.offsets[v] <= read.offsets[v + 1], "{}: /graph/indptr: decreases at vertex {}", path,
               read.first + r);
    const auto label = read.labels[v];
    NJ_REQUIRE(label >= -1 && label < read.header.num_classes, "{}: /labels: vertex {} has label {} outside [0, {})",
               path, read.first + r, label, read.header.num_classes);
    for (const auto& [mask_name, mask] :
         {std::pair{"train", &read.train_mask}, std::pair{"val", &read.val_mask}, std::pair{"test", &read.test_mask}}) {
      NJ_REQUIRE((*mask)[v] <= 1, "{}: /masks/{}: mask entries must be 0 or 1, found {}", path, mask_name, (*mask)[v]);
      NJ_REQUIRE(label != -1 || (*mask)[v] == 0, "{}: /masks/{}: vertex {} is in the split but has no label", path,
                 mask_name, read.first + r);
    }
  }
  for (std::size_t r = 0; r < read.vertex_ids.size(); ++r) {
    NJ_REQUIRE(read.vertex_ids[r] >= 0 && (r == 0 || read.vertex_ids[r] > read.vertex_ids[r - 1]),
               "{}: /graph/vertex_ids: entry {} is {} (ids must be non-negative and ascending)", path,
               read.first + static_cast<std::int64_t>(r), read.vertex_ids[r]);
  }
  for (const gid_t s : read.sources) {
    NJ_REQUIRE(s >= 0 && s < n, "{}: /graph/indices: source {} outside [0, {})", path, s, n);
  }
}

}  // namespace

DatasetRows read_dataset_rows(const std::string& path, std::int64_t first, std::int64_t rows) {
  const auto file = hdf5::File::open_read(path);
  DatasetRows read;
  read.header = read_header(file, path);
  NJ_REQUIRE(first >= 0 && rows >= 0 && first + rows <= read.header.num_vertices, "{}: vertices {} to {} asked of {}",
             path, first, first + rows, read.header.num_vertices);
  read.first = first;
  read.offsets = file.read_rows<eid_t>("/graph/indptr", first, rows + 1).values;
  const eid_t base = read.offsets.front();
  NJ_REQUIRE(base >= 0 && base <= read.offsets.back() && read.offsets.back() <= read.header.num_edges,
             "{}: /graph/indptr: vertices {} to {} span edges {} to {} of {}", path, first, first + rows, base,
             read.offsets.back(), read.header.num_edges);
  NJ_REQUIRE(first > 0 || base == 0, "{}: /graph/indptr: must start at 0, found {}", path, base);
  NJ_REQUIRE(first + rows < read.header.num_vertices || read.offsets.back() == read.header.num_edges,
             "{}: /graph/indptr: must end at the {} edges, found {}", path, read.header.num_edges, read.offsets.back());
  for (eid_t& offset : read.offsets) offset -= base;
  read.sources = file.read_rows<gid_t>("/graph/indices", base, read.offsets.back()).values;
  if (file.exists("/graph/vertex_ids")) {
    NJ_REQUIRE(file.shape("/graph/vertex_ids") == std::vector<hsize_t>{static_cast<hsize_t>(read.header.num_vertices)},
               "{}: /graph/vertex_ids: expected {} entries", path, read.header.num_vertices);
    // With the id before the slice, where there is one: the ids ascend across slices too, which check_rows checks
    // within the slice and this at its start.
    const std::int64_t before = first > 0 ? 1 : 0;
    read.vertex_ids = file.read_rows<gid_t>("/graph/vertex_ids", first - before, rows + before).values;
    NJ_REQUIRE(before == 0 || rows == 0 || read.vertex_ids[1] > read.vertex_ids[0],
               "{}: /graph/vertex_ids: entry {} is {} (ids must be non-negative and ascending)", path, first,
               read.vertex_ids[static_cast<std::size_t>(before)]);
    read.vertex_ids.erase(read.vertex_ids.begin(), read.vertex_ids.begin() + before);
  }
  read.labels = file.read_rows<std::int32_t>("/labels", first, rows).values;
  read.train_mask = file.read_rows<std::uint8_t>("/masks/train", first, rows).values;
  read.val_mask = file.read_rows<std::uint8_t>("/masks/val", first, rows).values;
  read.test_mask = file.read_rows<std::uint8_t>("/masks/test", first, rows).values;
  check_rows(path, read);
  return read;
}

Matrix read_dataset_feature_rows(const std::string& path, std::int64_t first, std::int64_t rows) {
  const auto file = hdf5::File::open_read(path);
  Matrix features = read_feature_rows(file, first, rows);
  std::vector<gid_t> vertices(static_cast<std::size_t>(rows));
  std::iota(vertices.begin(), vertices.end(), first);
  require_finite_features(features, path, vertices);
  return features;
}

void create_dataset_file(hdf5::File& file, const DatasetHeader& header) {
  const auto n = static_cast<hsize_t>(header.num_vertices);
  file.create_group("/graph");
  file.create<eid_t>("/graph/indptr", {n + 1}, 1U << 20U);
  file.create<vid_t>("/graph/indices", {static_cast<hsize_t>(header.num_edges)}, 1U << 20U);
  file.create<float>(kDenseFeaturesPath, {n, static_cast<hsize_t>(header.feature_width)}, kFeatureRowsPerChunk);
  file.create<std::int32_t>("/labels", {n});
  file.create_group("/masks");
  for (const char* mask : {"/masks/train", "/masks/val", "/masks/test"}) file.create<std::uint8_t>(mask, {n});
  set_root_attributes(file, header);
}

void write_dataset_rows(hdf5::File& file, const DatasetRows& rows, std::int64_t first_edge, const Matrix& features) {
  NJ_EXPECTS(features.rows() == rows.rows(), "{} feature rows for {} vertices", features.rows(), rows.rows());
  std::vector<eid_t> offsets(rows.offsets.size());
  for (std::size_t r = 0; r < offsets.size(); ++r) offsets[r] = first_edge + rows.offsets[r];
  file.write_rows<eid_t>("/graph/indptr", rows.first, offsets);
  // Sources fit the file's 32-bit /graph/indices: a dataset has at most 2^31 - 1 vertices (vid_t).
  const std::vector<vid_t> sources(rows.sources.begin(), rows.sources.end());
  file.write_rows<vid_t>("/graph/indices", first_edge, sources);
  file.write_rows<float>(kDenseFeaturesPath, rows.first, features.span());
  file.write_rows<std::int32_t>("/labels", rows.first, rows.labels);
  file.write_rows<std::uint8_t>("/masks/train", rows.first, rows.train_mask);
  file.write_rows<std::uint8_t>("/masks/val", rows.first, rows.val_mask);
  file.write_rows<std::uint8_t>("/masks/test", rows.first, rows.test_mask);
}

}  // namespace nj
