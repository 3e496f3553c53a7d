#include "nj/io/feature_storage.hpp"

#include <algorithm>
#include <limits>

#include "nj/core/enum_names.hpp"
#include "nj/core/error.hpp"

namespace nj {
namespace {

constexpr const char* kSparseGroup = "/features_sparse";
constexpr const char* kShape = "/features_sparse/shape";
constexpr const char* kIndptr = "/features_sparse/indptr";
constexpr const char* kIndices = "/features_sparse/indices";
constexpr const char* kValues = "/features_sparse/values";

constexpr EnumNames<FeatureStorage, 3> kStorageNames{
    "feature storage",
    {{{FeatureStorage::kAuto, "auto"}, {FeatureStorage::kDense, "dense"}, {FeatureStorage::kSparse, "sparse"}}}};

std::int64_t count_nonzeros(const Matrix& features) {
  return std::count_if(features.span().begin(), features.span().end(), [](float x) { return x != 0.0F; });
}

// The message of hdf5::read_vector, for a reader of some of the entries.
void require_entries(const hdf5::File& file, const char* object, std::int64_t expected) {
  const std::vector<hsize_t> shape = file.shape(object);
  NJ_REQUIRE(shape.size() == 1, "{}: {}: expected 1 dimension, found {}", file.path(), object, shape.size());
  NJ_REQUIRE(static_cast<std::int64_t>(shape[0]) == expected, "{}: {}: expected {} entries, found {}", file.path(),
             object, expected, shape[0]);
}

}  // namespace

FeatureStorage parse_feature_storage(const std::string& text) { return kStorageNames.parse(text); }
const char* to_string(FeatureStorage storage) { return kStorageNames.name(storage); }

bool stores_sparse(const Matrix& features, FeatureStorage storage) {
  if (storage != FeatureStorage::kAuto) return storage == FeatureStorage::kSparse;
  // A stored entry takes a value and a column id (8 bytes) where the dense matrix takes 4 a cell.
  const std::int64_t sparse_bytes = 8 * count_nonzeros(features) + 8 * (features.rows() + 1);
  return features.size() > 0 && sparse_bytes <= 4 * features.size() / 2;
}

void write_features(hdf5::File& file, const Matrix& features, FeatureStorage storage, hsize_t rows_per_chunk) {
  const auto rows = static_cast<hsize_t>(features.rows());
  const auto width = static_cast<hsize_t>(features.cols());
  if (!stores_sparse(features, storage)) {
    file.write<float>(kDenseFeaturesPath, features.span(), {rows, width}, rows_per_chunk);
    return;
  }
  std::vector<std::int64_t> indptr{0};
  std::vector<std::int32_t> indices;
  std::vector<float> values;
  const ConstRows view = features.view();
  for (std::int64_t r = 0; r < features.rows(); ++r) {
    const float* row = view.row(r);
    for (std::int64_t c = 0; c < features.cols(); ++c) {
      if (row[c] == 0.0F) continue;
      indices.push_back(static_cast<std::int32_t>(c));
      values.push_back(row[c]);
    }
    indptr.push_back(static_cast<std::int64_t>(indices.size()));
  }
  file.create_group(kSparseGroup);
  const std::vector<std::int64_t> shape = {features.rows(), features.cols()};
  file.write<std::int64_t>(kShape, shape, {2});
  file.write<std::int64_t>(kIndptr, indptr, {rows + 1});
  constexpr hsize_t kEntriesPerChunk = hsize_t{1} << 20;
  const auto entries = static_cast<hsize_t>(indices.size());
  file.write<std::int32_t>(kIndices, indices, {entries}, entries > 0 ? std::min(entries, kEntriesPerChunk) : 0);
  file.write<float>(kValues, values, {entries}, entries > 0 ? std::min(entries, kEntriesPerChunk) : 0);
}

StoredFeatures stored_features(const hdf5::File& file) {
  const bool dense = file.exists(kDenseFeaturesPath);
  const bool sparse = file.exists(kSparseGroup);
  NJ_REQUIRE(dense != sparse, "{}: {}", file.path(),
             dense ? "holds both /features and /features_sparse: one of them only"
                   : "/features: missing (and no /features_sparse)");
  if (dense) {
    const std::vector<hsize_t> shape =
        file.check_readable<float>(kDenseFeaturesPath, 0);  // the type: read_rows checks the memory
    NJ_REQUIRE(shape.size() == 2, "{}: /features: expected 2 dimensions, found {}", file.path(), shape.size());
    return {static_cast<std::int64_t>(shape[0]), static_cast<std::int64_t>(shape[1]), false, 0};
  }
  const std::vector<std::int64_t> shape = hdf5::read_vector<std::int64_t>(file, kShape, 2);
  NJ_REQUIRE(shape[0] >= 0 && shape[1] >= 0 && shape[1] <= std::numeric_limits<std::int32_t>::max(),
             "{}: {}: rows and width must be non-negative (width below 2^31), got {} and {}", file.path(), kShape,
             shape[0], shape[1]);
  const std::vector<hsize_t> entries = file.shape(kIndices);
  NJ_REQUIRE(entries.size() == 1, "{}: {}: expected 1 dimension, found {}", file.path(), kIndices, entries.size());
  return {shape[0], shape[1], true, static_cast<std::int64_t>(entries[0])};
}

Matrix read_features(const hdf5::File& file) { return read_feature_rows(file, 0, stored_features(file).rows); }

Matrix read_feature_rows(const hdf5::File& file, std::int64_t first, std::int64_t count) {
  const StoredFeatures stored = stored_features(file);
  NJ_REQUIRE(first >= 0 && count >= 0 && first + count <= stored.rows, "{}: {}: rows {} to {} asked of {}", file.path(),
             stored.object(), first, first + count, stored.rows);
  if (!stored.sparse) {
    auto dense = file.read_rows<float>(kDenseFeaturesPath, first, count);
    return Matrix(count, stored.width, std::move(dense.values));
  }
  const auto indptr = file.read_rows<std::int64_t>(kIndptr, first, count + 1).values;
  const std::int64_t base = indptr.front();
  require_entries(file, kIndptr, stored.rows + 1);
  NJ_REQUIRE((first > 0 || base == 0) && (first + count < stored.rows || indptr.back() == stored.nonzeros),
             "{}: {}: must start at 0 and end at the {} stored entries, found {} and {}", file.path(), kIndptr,
             stored.nonzeros, base, indptr.back());
  NJ_REQUIRE(base >= 0 && base <= indptr.back() && indptr.back() <= stored.nonzeros,
             "{}: {}: rows {} to {} span entries {} to {} of {}", file.path(), kIndptr, first, first + count, base,
             indptr.back(), stored.nonzeros);
  const auto indices = file.read_rows<std::int32_t>(kIndices, base, indptr.back() - base).values;
  require_entries(file, kValues, stored.nonzeros);
  const auto values = file.read_rows<float>(kValues, base, indptr.back() - base).values;
  Matrix features(count, stored.width);
  const Rows view = features.view();
  for (std::int64_t r = 0; r < count; ++r) {
    const std::int64_t begin = indptr[static_cast<std::size_t>(r)] - base;
    const std::int64_t end = indptr[static_cast<std::size_t>(r) + 1] - base;
    NJ_REQUIRE(begin <= end && end <= static_cast<std::int64_t>(indices.size()),
               "{}: {}: row {} spans entries {} to {} of {}", file.path(), kIndptr, first + r, begin + base, end + base,
               stored.nonzeros);
    std::int32_t previous = -1;
    for (std::int64_t e = begin; e < end; ++e) {
      const std::int32_t column = indices[static_cast<std::size_t>(e)];
      NJ_REQUIRE(column > previous && column < stored.width,
                 "{}: {}: row {} has column {} (columns must be ascending, in [0, {}))", file.path(), kIndices,
                 first + r, column, stored.width);
      view.row(r)[column] = values[static_cast<std::size_t>(e)];
      previous = column;
    }
  }
  return features;
}

}  // namespace nj
