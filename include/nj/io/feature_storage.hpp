#pragma once
// How a dataset or shard file stores its feature matrix: dense at /features, chunked by rows, or, where most of it is
// zero (bag-of-words features), as compressed sparse rows under /features_sparse. Readers get a dense matrix either
// way. docs/dataset-format.md ("Sparse features") specifies the layout.
#include <cstdint>
#include <string>

#include "nj/core/matrix.hpp"
#include "nj/io/feature_blocks.hpp"
#include "nj/io/hdf5.hpp"

namespace nj {

enum class FeatureStorage {
  kAuto,    // sparse where its arrays take at most half the dense bytes (about 1/4 of the entries non-zero)
  kDense,   // /features
  kSparse,  // /features_sparse
};
FeatureStorage parse_feature_storage(const std::string& text);  // auto, dense or sparse
// Where a file stores dense features: a float dataset of rows x columns.
inline constexpr const char* kDenseFeaturesPath = "/features";
const char* to_string(FeatureStorage storage);

// Whether `storage` writes `features` sparse.
bool stores_sparse(const Matrix& features, FeatureStorage storage);
// Writes the features in the chosen storage (dense rows are chunked `rows_per_chunk` at a time), a block at a time, so
// that it holds one block of them (with its sparse entries) and not the whole. Sparse or auto storage passes over the
// blocks once more first, to count their non-zero entries. A value that is not finite is an error naming `where`, the
// vertex and the column; with `where` empty, the caller has checked them. Returns whether they were stored sparse.
bool write_features(hdf5::File& file, const FeatureBlocks& features, FeatureStorage storage, hsize_t rows_per_chunk,
                    const std::string& where);
// A matrix its writer has checked.
void write_features(hdf5::File& file, const Matrix& features, FeatureStorage storage, hsize_t rows_per_chunk);

// What a file stores, read without the values.
struct StoredFeatures {
  std::int64_t rows = 0;
  std::int64_t width = 0;
  bool sparse = false;
  std::int64_t nonzeros = 0;  // stored entries of a sparse matrix
  const char* object() const { return sparse ? "/features_sparse" : "/features"; }
};
// Throws InputError naming the file and object where neither storage is there, or its shape is wrong.
StoredFeatures stored_features(const hdf5::File& file);
// The features, dense; every error names the file and the object (column ids out of range or not ascending within a
// row, offsets that do not add up).
Matrix read_features(const hdf5::File& file);
// Rows [first, first + count) of them, dense, reading only those rows (and, stored sparse, only their entries).
Matrix read_feature_rows(const hdf5::File& file, std::int64_t first, std::int64_t count);

}  // namespace nj
