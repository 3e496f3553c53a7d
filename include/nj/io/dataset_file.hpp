#pragma once
// The project's one dataset file format (HDF5); docs/dataset-format.md is its specification.
#include <string>

#include "nj/graph/dataset.hpp"
#include "nj/io/feature_storage.hpp"
#include "nj/io/hdf5.hpp"

namespace nj {

inline constexpr std::int64_t kDatasetFormatVersion = 1;

// The features dense or sparse as `features` says (FeatureStorage::kAuto: by their density).
void write_dataset(const std::string& path, const Dataset& dataset, FeatureStorage features = FeatureStorage::kAuto);
// All of a dataset file but /graph/indptr and /graph/indices, which a writer of a graph larger than memory streams
// into `file` itself (nj/io/sorted_edge_list.hpp): the vertex data, checked, and the root attributes, with
// `num_edges` for the graph's edges. `dataset.graph` gives only the vertex count, and `features` the features, written
// a block at a time. Returns whether they were stored sparse.
bool write_dataset_vertex_data(hdf5::File& file, const Dataset& dataset, std::int64_t num_edges,
                               const FeatureBlocks& features, FeatureStorage storage = FeatureStorage::kAuto);
// Reads and validates; every error names the file, the object inside it and what is wrong.
Dataset read_dataset(const std::string& path);

// A dataset read without its feature values: what planning needs (its replay of an epoch moves no data), without
// the largest part of the file. The features' shape is validated; `dataset.features` is empty.
struct DatasetWithoutFeatures {
  Dataset dataset;
  std::int64_t feature_width = 0;
};
DatasetWithoutFeatures read_dataset_without_features(const std::string& path);

// What a dataset file says of the whole graph, read without its arrays: what every rank of a parallel partition reads
// before its rows.
struct DatasetHeader {
  std::string name;
  std::int64_t num_vertices = 0;
  std::int64_t num_edges = 0;
  std::int32_t num_classes = 0;
  std::int64_t feature_width = 0;
  bool features_stored_sparse = false;
  bool symmetrized = false;
  SelfLoopPolicy self_loops = SelfLoopPolicy::kKept;
};
DatasetHeader read_dataset_header(const std::string& path);

// Vertices [first, first + rows) of a dataset and all of their in-edges, read as hyperslabs, so that ranks that each
// read a slice of the file never hold the whole graph. Sources are global ids. Checked as read_dataset checks the
// whole file, as far as a slice tells (an empty training split is the caller's to find).
struct DatasetRows {
  DatasetHeader header;
  std::int64_t first = 0;
  std::vector<eid_t> offsets;  // rows + 1, from 0
  std::vector<gid_t> sources;
  std::vector<gid_t> vertex_ids;  // the rows' names (Dataset::vertex_ids); empty where the file names none
  std::vector<std::int32_t> labels;
  std::vector<std::uint8_t> train_mask;
  std::vector<std::uint8_t> val_mask;
  std::vector<std::uint8_t> test_mask;

  std::int64_t rows() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
};
DatasetRows read_dataset_rows(const std::string& path, std::int64_t first, std::int64_t rows);
// Their feature rows, dense however the file stores them; read apart, so that a caller can hold them after it has
// let the graph go.
Matrix read_dataset_feature_rows(const std::string& path, std::int64_t first, std::int64_t rows);

// A dataset file written by slices of rows, as ranks that each hold one write it in turn. create_dataset_file makes
// every array at its full size, the features dense, with the root attributes; write_dataset_rows then fills vertices
// [rows.first, rows.first + rows.rows()), their in-edges from edge `first_edge` on, and the /graph/indptr entry that
// ends the slice. Every vertex must be written once for the file to be whole.
void create_dataset_file(hdf5::File& file, const DatasetHeader& header);
void write_dataset_rows(hdf5::File& file, const DatasetRows& rows, std::int64_t first_edge, const Matrix& features);

}  // namespace nj
