#include "nj/io/plain_text.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numbers>
#include <random>

#include "nj/core/printable.hpp"
#include "nj/io/input_limits.hpp"

namespace nj {
namespace {

namespace fs = std::filesystem;

// One line of a feature file: `col:value` entries or dense values (a line with neither is a zero row).
struct FeatureLine {
  std::vector<std::pair<std::int64_t, float>> entries;
  std::vector<float> dense;
  bool is_dense = false;
};

void read_feature_line(std::string_view line, std::int64_t declared_width, const TextReader& at, FeatureLine& read) {
  read.entries.clear();
  read.dense.clear();
  read.is_dense = false;
  if (line.find(':') != std::string_view::npos) {
    Fields fields(line, kWhitespace);
    std::string_view pair;
    while (fields.next(pair)) {
      const auto colon = pair.find(':');
      if (colon == std::string_view::npos) at.fail("expected `column:value`, found '{}'", printable(pair));
      const auto col = parse_integer(pair.substr(0, colon), at, "feature column");
      if (col < 0) at.fail("negative feature column {}", col);
      if (declared_width > 0 && col >= declared_width) {
        at.fail("feature column {} is outside the {} declared columns", col, declared_width);
      }
      read.entries.emplace_back(col, parse_float(pair.substr(colon + 1), at, "feature value"));
    }
  } else if (line.find_first_not_of(kWhitespace) != std::string_view::npos) {
    Fields fields(line, kWhitespaceOrComma);
    std::string_view field;
    while (fields.next(field)) read.dense.push_back(parse_float(field, at, "feature value"));
    read.is_dense = true;
  }
}

// Writes a line's values into its row of `cols` zeros; of an entry named twice, the last counts.
void fill_row(const FeatureLine& read, float* row) {
  std::copy(read.dense.begin(), read.dense.end(), row);
  for (const auto& [col, value] : read.entries) row[col] = value;
}

// What a first pass over a feature file finds: its shape, checked as it is read.
struct FeatureFileShape {
  std::int64_t rows = 0;
  std::int64_t sparse_width = 0;  // largest column + 1
  std::int64_t dense_width = -1;  // -1 until the first dense row
  std::int64_t nonzeros = 0;      // of the vertices' rows, as fill_row leaves them
};

// The entries of a line that fill_row leaves non-zero: of a column named twice, the last value counts.
std::int64_t nonzeros_of(FeatureLine& read) {
  std::int64_t count = std::count_if(read.dense.begin(), read.dense.end(), [](float x) { return x != 0.0F; });
  std::stable_sort(read.entries.begin(), read.entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < read.entries.size(); ++i) {
    const bool last = i + 1 == read.entries.size() || read.entries[i + 1].first != read.entries[i].first;
    count += last && read.entries[i].second != 0.0F ? 1 : 0;
  }
  return count;
}

FeatureFileShape scan_feature_file(const std::string& path, vid_t num_vertices, std::int64_t width) {
  FeatureFileShape shape;
  TextReader reader(path);
  FeatureLine read;
  std::string_view line;
  while (reader.next_line(line)) {
    if (shape.rows++ >= num_vertices) continue;  // only counted, for the error below
    read_feature_line(line, width, reader, read);
    for (const auto& entry : read.entries) shape.sparse_width = std::max(shape.sparse_width, entry.first + 1);
    shape.nonzeros += nonzeros_of(read);
    if (!read.is_dense) continue;
    const auto values = static_cast<std::int64_t>(read.dense.size());
    if (shape.dense_width >= 0 && values != shape.dense_width) {
      reader.fail("{} feature values, but the rows before have {}", values, shape.dense_width);
    }
    shape.dense_width = values;
  }
  NJ_REQUIRE(shape.rows == num_vertices, "{}: {} feature rows for {} vertices (line i holds vertex i)", path,
             shape.rows, num_vertices);
  return shape;
}

std::int32_t parse_label(std::string_view field, const TextReader& at, std::int32_t num_classes) {
  if (field == "nan" || field == "NaN") return -1;
  const auto label = parse_integer(field, at, "label");
  if (label < -1) at.fail("negative label {} (-1 or nan mark an unlabelled vertex)", label);
  if (num_classes > 0 && label >= num_classes) {
    at.fail("label {} is not below the number of classes, {}", label, num_classes);
  }
  if (label > std::numeric_limits<std::int32_t>::max()) at.fail("label {} is too large", label);
  return static_cast<std::int32_t>(label);
}

// Separate generators for separate purposes, so that a feature draw never mirrors a split draw.
std::mt19937_64 generator(std::uint64_t seed, std::uint32_t purpose) {
  std::seed_seq sequence{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32U), purpose};
  return std::mt19937_64(sequence);
}
constexpr std::uint32_t kFeaturePurpose = 1;
constexpr std::uint32_t kSplitPurpose = 2;

// Uniform in (0, 1]; written out because the standard distributions differ between library implementations.
double uniform_open_zero(std::mt19937_64& rng) { return static_cast<double>((rng() >> 11U) + 1) * 0x1.0p-53; }

std::string plain_file(const fs::path& folder, const char* name) {
  const auto path = folder / name;
  return fs::is_regular_file(path) ? path.string() : std::string();
}

void attach_split(Dataset& dataset, const VertexDataOptions& options, const VertexIds& ids) {
  const bool split_files = !options.train.empty() || !options.val.empty() || !options.test.empty();
  NJ_REQUIRE(!(split_files && options.split_ratio), "split files and a split ratio exclude each other");
  if (!split_files) {
    random_split(dataset, options.split_ratio.value_or(SplitRatio{}), options.seed);
    return;
  }
  NJ_REQUIRE(!options.train.empty() && !options.val.empty() && !options.test.empty(),
             "give train, val and test split files together (train '{}', val '{}', test '{}')", options.train,
             options.val, options.test);
  dataset.train_mask = read_split(options.train, ids, dataset.labels);
  dataset.val_mask = read_split(options.val, ids, dataset.labels);
  dataset.test_mask = read_split(options.test, ids, dataset.labels);
}

}  // namespace

FeatureBlocks feature_file_blocks(const std::string& path, vid_t num_vertices, std::int64_t width) {
  const FeatureFileShape shape = scan_feature_file(path, num_vertices, width);
  // A column index in a `col:value` pair, or a declared width, sets the width of every row.
  const auto cols = width > 0 ? width : std::max(shape.dense_width, shape.sparse_width);
  NJ_REQUIRE(cols > 0, "{}: no feature values", path);
  NJ_REQUIRE(shape.dense_width < 0 || shape.dense_width == cols, "{}: dense rows of {} values in {} feature columns",
             path, shape.dense_width, cols);
  const auto rows = static_cast<std::int64_t>(num_vertices);
  return {
      .rows = rows,
      .cols = cols,
      .for_each_block =
          [path, rows, cols](std::int64_t block_rows, const FeatureBlockSink& sink) {
            Matrix block(std::min(block_rows, rows), cols);
            TextReader reader(path);
            FeatureLine read;
            std::string_view line;
            for (std::int64_t first = 0; first < rows; first += block.rows()) {
              const std::int64_t count = std::min(block.rows(), rows - first);
              block.fill(0.0F);
              for (std::int64_t r = 0; r < count; ++r) {
                NJ_REQUIRE(reader.next_line(line), "{}: ends at line {}, before its {} rows: changed since it was read",
                           path, reader.line_number(), rows);
                read_feature_line(line, cols, reader, read);
                if (read.is_dense && static_cast<std::int64_t>(read.dense.size()) != cols) {
                  reader.fail("{} feature values, not {}: the file changed since it was read", read.dense.size(), cols);
                }
                fill_row(read, block.row(r));
              }
              sink(first, block.view().slice(0, count));
            }
          },
      .nonzeros = shape.nonzeros};
}

Matrix read_features(const std::string& path, vid_t num_vertices, std::int64_t width) {
  const FeatureBlocks blocks = feature_file_blocks(path, num_vertices, width);
  require_input_memory(blocks.cols, static_cast<std::int64_t>(sizeof(float)) * num_vertices, path,
                       fmt::format("{} x {} features", num_vertices, blocks.cols));
  return gather(blocks);
}

std::vector<std::int32_t> read_labels(const std::string& path, const VertexIds& ids, std::int32_t num_classes) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(ids.count()), -1);
  TextReader reader(path);
  std::string_view line;
  std::int64_t num_lines = 0;
  bool pairs = false;
  while (reader.next_record(line)) {
    Fields fields(line, kWhitespaceOrComma);
    std::string_view first;
    std::string_view second;
    std::string_view extra;
    fields.next(first);
    const bool pair = fields.next(second);
    if (fields.next(extra)) reader.fail("expected `label` or `vertex label`, found '{}'", printable(line));
    if (num_lines++ == 0) pairs = pair;
    if (pair != pairs) {
      reader.fail("'{}' breaks the file's format of {}", printable(line),
                  pairs ? "`vertex label` pairs" : "one label per line");
    }
    if (pairs) {
      const auto vertex = static_cast<std::size_t>(ids.resolve(first, reader));
      if (labels[vertex] != -1) reader.fail("vertex {} is labelled twice", printable(first));
      labels[vertex] = parse_label(second, reader, num_classes);
    } else if (num_lines <= ids.count()) {
      labels[static_cast<std::size_t>(num_lines - 1)] = parse_label(first, reader, num_classes);
    }
  }
  NJ_REQUIRE(pairs || num_lines == ids.count(), "{}: {} labels for {} vertices (line i holds vertex i)", path,
             num_lines, ids.count());
  return labels;
}

std::vector<std::uint8_t> read_split(const std::string& path, const VertexIds& ids,
                                     const std::vector<std::int32_t>& labels) {
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(ids.count()), 0);
  TextReader reader(path);
  std::string_view line;
  while (reader.next_record(line)) {
    Fields fields(line, kWhitespaceOrComma);
    std::string_view field;
    fields.next(field);
    const auto vertex = static_cast<std::size_t>(ids.resolve(field, reader));
    if (labels[vertex] < 0) reader.fail("vertex {} is in the split but has no label", printable(field));
    if (fields.next(field)) reader.fail("expected one vertex id per line, found '{}'", printable(line));
    mask[vertex] = 1;
  }
  return mask;
}

FeatureBlocks random_feature_blocks(vid_t num_vertices, std::int64_t width, std::uint64_t seed) {
  const auto rows = static_cast<std::int64_t>(num_vertices);
  return {.rows = rows,
          .cols = width,
          .for_each_block = [rows, width, seed](std::int64_t block_rows, const FeatureBlockSink& sink) {
            auto rng = generator(seed, kFeaturePurpose);  // drawn row after row, so the blocks do not change the values
            Matrix block(std::min(block_rows, rows), width);
            for (std::int64_t first = 0; first < rows; first += block.rows()) {
              const Rows filled = block.view().slice(0, std::min(block.rows(), rows - first));
              for (float* x = filled.data; x != filled.data + filled.size(); ++x) {  // Box-Muller
                const double radius = std::sqrt(-2.0 * std::log(uniform_open_zero(rng)));
                *x = static_cast<float>(radius * std::cos(2.0 * std::numbers::pi * uniform_open_zero(rng)));
              }
              sink(first, filled);
            }
          }};
}

Matrix random_features(vid_t num_vertices, std::int64_t width, std::uint64_t seed) {
  return gather(random_feature_blocks(num_vertices, width, seed));
}

void random_split(Dataset& dataset, const SplitRatio& ratio, std::uint64_t seed) {
  const double total = ratio.train + ratio.val + ratio.test;
  NJ_REQUIRE(ratio.train > 0 && ratio.val >= 0 && ratio.test >= 0 && total <= 1.0 + 1e-9,
             "split ratio {},{},{}: each part must be non-negative, train positive, and the sum at most 1", ratio.train,
             ratio.val, ratio.test);
  std::vector<vid_t> labelled;
  for (vid_t v = 0; v < dataset.num_vertices(); ++v) {
    if (dataset.labels[static_cast<std::size_t>(v)] >= 0) labelled.push_back(v);
  }
  auto rng = generator(seed, kSplitPurpose);
  for (std::size_t i = labelled.size(); i > 1; --i) std::swap(labelled[i - 1], labelled[rng() % i]);  // Fisher-Yates

  const auto n = labelled.size();
  auto share = [n](double part, std::size_t left) {
    return std::min(static_cast<std::size_t>(std::llround(part * static_cast<double>(n))), left);
  };
  const auto train = share(ratio.train, n);
  const auto val = share(ratio.val, n - train);
  // Ratios summing to 1 leave no vertex out to rounding.
  const auto test = std::abs(total - 1.0) < 1e-9 ? n - train - val : share(ratio.test, n - train - val);
  NJ_REQUIRE(train > 0, "split ratio {} of {} labelled vertices leaves the train split empty", ratio.train,
             labelled.size());

  const auto size = static_cast<std::size_t>(dataset.num_vertices());
  dataset.train_mask.assign(size, 0);
  dataset.val_mask.assign(size, 0);
  dataset.test_mask.assign(size, 0);
  for (std::size_t i = 0; i < train + val + test; ++i) {
    auto& mask = i < train ? dataset.train_mask : i < train + val ? dataset.val_mask : dataset.test_mask;
    mask[static_cast<std::size_t>(labelled[i])] = 1;
  }
}

FeatureBlocks attach_vertex_data(Dataset& dataset, const VertexDataOptions& options, const VertexIds& ids) {
  const vid_t n = dataset.num_vertices();
  if (options.labels.empty()) {
    dataset.labels.assign(static_cast<std::size_t>(n), 0);
    dataset.num_classes = std::max(options.num_classes, 1);
  } else {
    dataset.labels = read_labels(options.labels, ids, options.num_classes);
    const auto largest = *std::max_element(dataset.labels.begin(), dataset.labels.end());
    NJ_REQUIRE(largest >= 0, "{}: no vertex has a label", options.labels);
    dataset.num_classes = options.num_classes > 0 ? options.num_classes : largest + 1;
  }

  FeatureBlocks features = !options.features.empty() ? feature_file_blocks(options.features, n, options.feature_width)
                           : options.random_features > 0
                               ? random_feature_blocks(n, options.random_features, options.seed)
                               : constant_blocks(n, 1, 1.0F);

  attach_split(dataset, options, ids);

  // Said last, so that a conversion that fails prints its error alone.
  if (options.labels.empty()) spdlog::info("no labels: every vertex gets label 0 (a structure-only dataset)");
  if (options.features.empty() && options.random_features == 0) {
    spdlog::info("no features: every vertex gets one feature column of ones");
  }
  return features;
}

Dataset build_dataset(const EdgeList& edges, const ConvertOptions& options) {
  Dataset dataset;
  dataset.name = options.name;
  set_graph(dataset, edges, options.graph);
  const FeatureBlocks features = attach_vertex_data(dataset, options.data, edges.ids);
  require_input_memory(features.cols, static_cast<std::int64_t>(sizeof(float)) * features.rows,
                       options.data.features.empty() ? options.name : options.data.features,
                       fmt::format("{} x {} features", features.rows, features.cols));
  dataset.features = gather(features);
  return dataset;
}

Dataset read_plain_folder(const std::string& folder, ConvertOptions options) {
  const fs::path dir(folder);
  NJ_REQUIRE(fs::is_directory(dir), "{}: not a folder (a plain dataset is a folder with meta.txt and edges.txt)",
             folder);
  const auto meta_path = (dir / "meta.txt").string();
  const auto meta = read_header_integers(meta_path, 4);  // N F C E
  NJ_REQUIRE(
      meta[0] > 0 && meta[1] >= 0 && meta[2] > 0 && meta[2] <= std::numeric_limits<std::int32_t>::max() && meta[3] >= 0,
      "{}: expected `vertices feature-width classes edges` with positive vertices and classes", meta_path);
  require_vertex_count(meta[0], meta_path);
  options.ids = {.num_vertices = meta[0]};
  auto& data = options.data;
  if (data.features.empty() && data.random_features == 0) {
    data.features = plain_file(dir, "features.txt");
    if (!data.features.empty()) data.feature_width = meta[1];
  }
  if (data.labels.empty()) data.labels = plain_file(dir, "labels.txt");
  if (data.num_classes == 0) data.num_classes = static_cast<std::int32_t>(meta[2]);
  if (data.wants_own_split()) {
    data.train = plain_file(dir, "train.txt");
    data.val = plain_file(dir, "val.txt");
    data.test = plain_file(dir, "test.txt");
  }

  const auto edges = read_edge_list((dir / "edges.txt").string(), options.ids);
  NJ_REQUIRE(static_cast<std::int64_t>(edges.src.size()) == meta[3], "{}: declares {} edges but edges.txt has {}",
             meta_path, meta[3], edges.src.size());
  return build_dataset(edges, options);
}

}  // namespace nj
