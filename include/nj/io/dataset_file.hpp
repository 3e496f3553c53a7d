#pragma once
// The project's one dataset file format (HDF5); docs/dataset-format.md is its specification.
#include <string>

#include "nj/graph/dataset.hpp"

namespace nj {

inline constexpr std::int64_t kDatasetFormatVersion = 1;

void write_dataset(const std::string& path, const Dataset& dataset);
// Reads and validates; every error names the file, the object inside it and what is wrong.
Dataset read_dataset(const std::string& path);

}  // namespace nj
