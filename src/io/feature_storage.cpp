#include "nj/io/feature_storage.hpp"

#include <algorithm>
#include <limits>

#include "nj/core/enum_names.hpp"
#include "nj/core/error.hpp"
#include "nj/graph/dataset.hpp"

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

std::int64_t count_nonzeros(ConstRows rows) {
  return std::count_if(rows.data, rows.data + rows.size(), [](float x) { return x != 0.0F; });
}

// A stored entry takes a value and a column id (8 bytes) where the dense matrix takes 4 a cell.
bool sparse_takes_less(std::int64_t nonzeros, std::int64_t rows, std::int64_t cols) {
  const std::int64_t sparse_bytes = 8 * nonzeros + 8 * (rows + 1);
  return rows * cols > 0 && sparse_bytes <= 4 * rows * cols / 2;
}

std::int64_t count_nonzeros(const FeatureBlocks& features) {
  std::int64_t nonzeros = 0;
  features.for_each_block(feature_block_rows(features.cols),
                          [&](std::int64_t, ConstRows block) { nonzeros += count_nonzeros(block); });
  return nonzeros;
}

// Dense rows, chunked; each block is written in whole chunks where it holds several.
void write_dense(hdf5::File& file, const FeatureBlocks& features, hsize_t rows_per_chunk, const std::string& where) {
  file.create<float>(kDenseFeaturesPath, {static_cast<hsize_t>(features.rows), static_cast<hsize_t>(features.cols)},
                     rows_per_chunk);
  const auto chunk = static_cast<std::int64_t>(rows_per_chunk);
  std::int64_t block_rows = feature_block_rows(features.cols);
  if (chunk > 0 && block_rows > chunk) block_rows -= block_rows % chunk;
  features.for_each_block(block_rows, [&](std::int64_t first, ConstRows block) {
    if (!where.empty()) require_finite_features(block, where, {}, first);
    file.write_rows<float>(kDenseFeaturesPath, first, std::span(block.data, static_cast<std::size_t>(block.size())));
  });
}

// Compressed sparse rows of `nonzeros` entries, a block's entries at a time.
void write_sparse(hdf5::File& file, const FeatureBlocks& features, std::int64_t nonzeros, const std::string& where) {
  file.create_group(kSparseGroup);
  const std::vector<std::int64_t> shape = {features.rows, features.cols};
  file.write<std::int64_t>(kShape, shape, {2});
  constexpr hsize_t kEntriesPerChunk = hsize_t{1} << 20;
  const auto entries = static_cast<hsize_t>(nonzeros);
  file.create<std::int64_t>(kIndptr, {static_cast<hsize_t>(features.rows) + 1}, kEntriesPerChunk / 2);  // 4 MiB
  file.create<std::int32_t>(kIndices, {entries}, std::min(entries, kEntriesPerChunk));
  file.create<float>(kValues, {entries}, std::min(entries, kEntriesPerChunk));
  std::int64_t written = 0;
  std::vector<std::int64_t> indptr;
  std::vector<std::int32_t> indices;
  std::vector<float> values;
  features.for_each_block(feature_block_rows(features.cols), [&](std::int64_t first, ConstRows block) {
    if (!where.empty()) require_finite_features(block, where, {}, first);
    // Sized to this block, so that no array grows by doubling beside the one it outgrew.
    const auto block_entries = static_cast<std::size_t>(count_nonzeros(block));
    indptr.clear();
    indices.clear();
    values.clear();
    indptr.reserve(static_cast<std::size_t>(block.rows));
    indices.reserve(block_entries);
    values.reserve(block_entries);
    for (std::int64_t r = 0; r < block.rows; ++r) {
      indptr.push_back(written + static_cast<std::int64_t>(indices.size()));
      const float* row = block.row(r);
      for (std::int64_t c = 0; c < block.cols; ++c) {
        if (row[c] == 0.0F) continue;
        indices.push_back(static_cast<std::int32_t>(c));
        values.push_back(row[c]);
      }
    }
    NJ_EXPECTS(written + static_cast<std::int64_t>(indices.size()) <= nonzeros,
               "the feature rows gave more non-zero entries than their count, {}", nonzeros);
    file.write_rows<std::int64_t>(kIndptr, first, indptr);
    file.write_rows<std::int32_t>(kIndices, written, indices);
    file.write_rows<float>(kValues, written, values);
    written += static_cast<std::int64_t>(indices.size());
  });
  NJ_EXPECTS(written == nonzeros, "the feature rows gave {} non-zero entries, not their count {}", written, nonzeros);
  file.write_rows<std::int64_t>(kIndptr, features.rows, std::span(&written, 1));
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
  return sparse_takes_less(count_nonzeros(features.view()), features.rows(), features.cols());
}

bool write_features(hdf5::File& file, const FeatureBlocks& features, FeatureStorage storage, hsize_t rows_per_chunk,
                    const std::string& where) {
  const std::int64_t nonzeros = storage == FeatureStorage::kDense ? -1
                                : features.nonzeros >= 0          ? features.nonzeros
                                                                  : count_nonzeros(features);
  const bool sparse = storage == FeatureStorage::kSparse ||
                      (storage == FeatureStorage::kAuto && sparse_takes_less(nonzeros, features.rows, features.cols));
  if (sparse) {
    write_sparse(file, features, nonzeros, where);
  } else {
    write_dense(file, features, rows_per_chunk, where);
  }
  return sparse;
}

void write_features(hdf5::File& file, const Matrix& features, FeatureStorage storage, hsize_t rows_per_chunk) {
  write_features(file, blocks_of(features), storage, rows_per_chunk, "");
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
