#pragma once
// The plain-text vertex data formats, and the datasets assembled from them:
//  - feature files: line i is vertex i, either `col:value` pairs (an empty line is a zero row) or dense
//    values separated by whitespace or commas; each line is read as the one or the other by whether it
//    holds a ':';
//  - label files: one label per line (line i is vertex i), or `vertex label` pairs (unlisted vertices are
//    unlabelled); `nan` and -1 mean unlabelled;
//  - split files: one vertex id per line;
//  - plain folders (meta.txt, edges.txt, features.txt, labels.txt, train/val/test.txt), the export format
//    of the shared Planetoid data.
// Where a dataset lacks features, labels or a split, the defaults documented in docs/convert.md apply.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nj/core/matrix.hpp"
#include "nj/graph/dataset.hpp"
#include "nj/io/edge_list.hpp"
#include "nj/io/feature_blocks.hpp"

namespace nj {

struct SplitRatio {
  double train = 0.6;
  double val = 0.2;
  double test = 0.2;
};

// Where the vertex data comes from (empty path: not given) and how to fill in what is not given.
struct VertexDataOptions {
  std::string features;
  std::string labels;
  std::string train;
  std::string val;
  std::string test;
  std::int64_t feature_width = 0;    // 0: taken from the feature file
  std::int32_t num_classes = 0;      // 0: the largest label + 1
  std::int64_t random_features = 0;  // without a feature file: > 0 gives that many N(0, 1) columns, else ones
  // A random split over the labelled vertices; when set, a dataset's own split files are not used.
  std::optional<SplitRatio> split_ratio;
  std::uint64_t seed = 0;

  // True when neither split files nor a ratio are given, so that a dataset's own split files apply.
  bool wants_own_split() const { return !split_ratio && train.empty() && val.empty() && test.empty(); }
};

struct ConvertOptions {
  std::string name{};
  VertexIdOptions ids{};
  EdgeListOptions graph{};
  VertexDataOptions data{};
};

// A feature file's rows, read a block at a time; the first pass over the file, made here, checks it and finds its
// width (`width` > 0 declares it).
FeatureBlocks feature_file_blocks(const std::string& path, vid_t num_vertices, std::int64_t width);
Matrix read_features(const std::string& path, vid_t num_vertices, std::int64_t width);
// Labels of all vertices (-1 where unlabelled); num_classes > 0 makes a label at or above it an error.
std::vector<std::int32_t> read_labels(const std::string& path, const VertexIds& ids, std::int32_t num_classes);
// A mask of the listed vertices, each of which must be labelled.
std::vector<std::uint8_t> read_split(const std::string& path, const VertexIds& ids,
                                     const std::vector<std::int32_t>& labels);

// Standard-normal features, a pure function of (seed, num_vertices, width), drawn again at each pass.
FeatureBlocks random_feature_blocks(vid_t num_vertices, std::int64_t width, std::uint64_t seed);
Matrix random_features(vid_t num_vertices, std::int64_t width, std::uint64_t seed);
// Shuffles the labelled vertices by seed and cuts them into train, val and test by ratio.
void random_split(Dataset& dataset, const SplitRatio& ratio, std::uint64_t seed);

// Fills the labels, num_classes and the masks of a dataset whose graph is set, and returns its features, to be read
// (or drawn) a block at a time.
FeatureBlocks attach_vertex_data(Dataset& dataset, const VertexDataOptions& options, const VertexIds& ids);

// The dataset of these edges and the vertex data named in the options.
Dataset build_dataset(const EdgeList& edges, const ConvertOptions& options);
// A plain folder; files named in options.data take the place of the folder's own.
Dataset read_plain_folder(const std::string& folder, ConvertOptions options);

}  // namespace nj
