#pragma once
// The project's one dataset file format (HDF5); docs/dataset-format.md is its specification.
#include <string>

#include "nj/graph/dataset.hpp"
#include "nj/io/feature_storage.hpp"

namespace nj {

inline constexpr std::int64_t kDatasetFormatVersion = 1;

// The features dense or sparse as `features` says (FeatureStorage::kAuto: by their density).
void write_dataset(const std::string& path, const Dataset& dataset, FeatureStorage features = FeatureStorage::kAuto);
// Reads and validates; every error names the file, the object inside it and what is wrong.
Dataset read_dataset(const std::string& path);

// A dataset read without its feature values: what planning needs (its replay of an epoch moves no data), without
// the largest part of the file. The features' shape is validated; `dataset.features` is empty.
struct DatasetWithoutFeatures {
  Dataset dataset;
  std::int64_t feature_width = 0;
};
DatasetWithoutFeatures read_dataset_without_features(const std::string& path);

}  // namespace nj
