#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "nj/io/edge_list.hpp"
#include "nj/io/plain_text.hpp"
#include "nj/io/text_reader.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::TempDir;

std::string write_text(const TempDir& dir, const std::string& name, const std::string& text) {
  const auto path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<std::string> all_lines(const std::string& path) {
  TextReader reader(path);
  std::vector<std::string> lines;
  std::string_view line;
  while (reader.next_line(line)) lines.emplace_back(line);
  return lines;
}

// Runs `body` and returns the InputError message it throws ("" if none).
template <typename Body>
std::string input_error(Body body) {
  try {
    body();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TextReader, StripsLineEndingsAndKeepsEmptyLines) {
  const TempDir dir;
  const auto path = write_text(dir, "a.txt", "first\r\nsecond\n\nlast without newline");
  EXPECT_EQ(all_lines(path), (std::vector<std::string>{"first", "second", "", "last without newline"}));
}

TEST(TextReader, ReadsLinesLongerThanOneChunk) {
  const TempDir dir;
  const std::string long_line(300000, 'x');
  const auto path = write_text(dir, "long.txt", long_line + "\nshort\n");
  EXPECT_EQ(all_lines(path), (std::vector<std::string>{long_line, "short"}));
}

TEST(TextReader, ReadsGzipFilesTransparently) {
  // Megabytes of lines, so that the reader refills its buffer many times and lines straddle the refills.
  const TempDir dir;
  std::string text;
  const int lines = 200000;
  for (int i = 0; i < lines; ++i) text += std::to_string(i) + " " + std::to_string(i + 1) + "\n";
  const auto path = dir.file("edges.txt.gz");
  ASSERT_NO_FATAL_FAILURE(test::write_gzip(path, text));
  TextReader reader(path);
  std::string_view line;
  int read = 0;
  while (reader.next_line(line)) {
    ASSERT_EQ(line, std::to_string(read) + " " + std::to_string(read + 1)) << "line " << read + 1;
    ++read;
  }
  EXPECT_EQ(read, lines);
  EXPECT_EQ(reader.line_number(), lines);
}

TEST(TextReader, NamesAMissingFile) {
  EXPECT_EQ(input_error([] { TextReader reader("/nonexistent/edges.txt"); }), "/nonexistent/edges.txt: no such file");
}

TEST(TextReader, ParseErrorsNameFileLineAndField) {
  const TempDir dir;
  const auto path = write_text(dir, "n.txt", "1\n2x\n");
  TextReader reader(path);
  std::string_view line;
  reader.next_line(line);
  EXPECT_EQ(parse_integer(line, reader, "vertex id"), 1);
  reader.next_line(line);
  EXPECT_EQ(input_error([&] { parse_integer(line, reader, "vertex id"); }), path + ":2: '2x' is not a valid vertex id");
  EXPECT_FLOAT_EQ(parse_float("-2.5e-1", reader, "value"), -0.25F);
}

TEST(TextReader, FieldsSplitAtRunsOfSeparators) {
  Fields fields("  a\t\tb, c ,", kWhitespaceOrComma);
  std::vector<std::string_view> seen;
  std::string_view field;
  while (fields.next(field)) seen.push_back(field);
  EXPECT_EQ(seen, (std::vector<std::string_view>{"a", "b", "c"}));
  EXPECT_TRUE(is_blank_or_comment(" \t"));
  EXPECT_TRUE(is_blank_or_comment("  # Nodes: 4"));
  EXPECT_TRUE(is_blank_or_comment("% matrix market"));
  EXPECT_FALSE(is_blank_or_comment(" 0 1"));
}

TEST(EdgeList, SkipsCommentsAndBlankLinesAndIgnoresFurtherColumns) {
  const TempDir dir;
  const auto path = write_text(dir, "e.txt", "# FromNodeId\tToNodeId\n% comment\n\n0\t1\t0.5\n3 2\n1,3\n");
  const auto edges = read_edge_list(path, {});
  EXPECT_EQ(edges.ids.count(), 4);
  EXPECT_EQ(edges.src, (std::vector<vid_t>{0, 3, 1}));
  EXPECT_EQ(edges.dst, (std::vector<vid_t>{1, 2, 3}));
}

TEST(EdgeList, ShiftsOneBasedIdsAndRejectsZero) {
  const TempDir dir;
  const auto edges = read_edge_list(write_text(dir, "e.txt", "1 2\n3 1\n"), {.one_based = true});
  EXPECT_EQ(edges.ids.count(), 3);
  EXPECT_EQ(edges.src, (std::vector<vid_t>{0, 2}));
  EXPECT_EQ(edges.dst, (std::vector<vid_t>{1, 0}));
  const auto zero = write_text(dir, "zero.txt", "1 2\n0 1\n");
  EXPECT_EQ(input_error([&] { read_edge_list(zero, {.one_based = true}); }),
            zero + ":2: vertex id 0, but ids are 1-based");
}

TEST(EdgeList, RelabelsTheSortedDistinctIds) {
  const TempDir dir;
  const auto edges = read_edge_list(write_text(dir, "e.txt", "100 7\n7 55\n"), {.relabel = true});
  EXPECT_EQ(edges.ids.count(), 3);  // 7 -> 0, 55 -> 1, 100 -> 2
  EXPECT_EQ(edges.src, (std::vector<vid_t>{2, 0}));
  EXPECT_EQ(edges.dst, (std::vector<vid_t>{0, 1}));
  EXPECT_EQ(edges.ids.find(55), 1);
  EXPECT_EQ(edges.ids.find(8), -1);
}

TEST(EdgeList, RejectsNonNumericNegativeAndOutOfRangeIds) {
  const TempDir dir;
  const auto word = write_text(dir, "word.txt", "0 1\n# c\n2 node7\n");
  EXPECT_EQ(input_error([&] { read_edge_list(word, {}); }), word + ":3: 'node7' is not a valid vertex id");
  const auto negative = write_text(dir, "negative.txt", "0 -1\n");
  EXPECT_EQ(input_error([&] { read_edge_list(negative, {}); }), negative + ":1: negative vertex id -1");
  const auto beyond = write_text(dir, "beyond.txt", "0 1\n1 4\n");
  EXPECT_EQ(input_error([&] { read_edge_list(beyond, {.num_vertices = 4}); }),
            beyond + ":2: vertex id 4 is outside 0..3 (the graph has 4 vertices)");
  const auto single = write_text(dir, "single.txt", "0\n");
  EXPECT_EQ(input_error([&] { read_edge_list(single, {}); }),
            single + ":1: expected two vertex ids `src dst`, found '0'");
}

TEST(EdgeList, SetGraphRecordsSymmetryAndSelfLoopPolicy) {
  const TempDir dir;
  const auto directed = read_edge_list(write_text(dir, "d.txt", "0 1\n1 1\n"), {});
  Dataset dataset;
  set_graph(dataset, directed, {});
  EXPECT_FALSE(dataset.symmetrized);
  EXPECT_EQ(dataset.self_loops, SelfLoopPolicy::kKept);
  EXPECT_EQ(dataset.graph.num_edges(), 2);
  set_graph(dataset, directed, {.symmetrize = true, .self_loops = SelfLoops::kRemove});
  EXPECT_TRUE(dataset.symmetrized);
  EXPECT_EQ(dataset.self_loops, SelfLoopPolicy::kRemoved);
  EXPECT_EQ(dataset.graph.num_edges(), 2);
  // An input that lists both directions is symmetric without being symmetrized.
  set_graph(dataset, read_edge_list(write_text(dir, "s.txt", "0 1\n1 0\n"), {}), {});
  EXPECT_TRUE(dataset.symmetrized);
}

TEST(PlainText, ReadsSparseDenseAndEmptyFeatureRows) {
  const TempDir dir;
  const auto path = write_text(dir, "f.txt", "0:1.5 2:-2\n\n1 2 3\n0.5,0,1\n");
  const auto features = read_features(path, 4, 0);
  ASSERT_EQ(features.cols(), 3);
  const std::vector<float> expected = {1.5F, 0, -2, 0, 0, 0, 1, 2, 3, 0.5F, 0, 1};
  EXPECT_EQ(std::vector<float>(features.span().begin(), features.span().end()), expected);
  EXPECT_THROW(read_features(path, 4, 5), InputError);  // dense rows must fill a declared width
}

// The rows of every block, in order, as one matrix.
Matrix rows_in_blocks(const FeatureBlocks& blocks, std::int64_t block_rows) {
  std::vector<float> values;
  std::int64_t next = 0;
  blocks.for_each_block(block_rows, [&](std::int64_t first, ConstRows block) {
    EXPECT_EQ(first, next);
    EXPECT_LE(block.rows, block_rows);
    EXPECT_EQ(block.cols, blocks.cols);
    values.insert(values.end(), block.data, block.data + block.size());
    next += block.rows;
  });
  EXPECT_EQ(next, blocks.rows);
  return Matrix(next, blocks.cols, std::move(values));
}

// A conversion writes features a block at a time: the blocks of a feature file are its rows, whatever their size.
TEST(PlainText, FeatureFileBlocksOfAnySizeAreTheRowsReadWhole) {
  const TempDir dir;
  const auto path = write_text(dir, "f.txt", "0:1.5 2:-2 0:3\n\n1 2 3\n0.5,0,1\n1:0 2:7\n");
  const Matrix whole = read_features(path, 5, 0);
  const std::vector<float> expected = {3, 0,    -2, 0, 0, 0, 1, 2,
                                       3, 0.5F, 0,  1, 0, 0, 7};  // the last entry of a column counts
  ASSERT_EQ(std::vector<float>(whole.span().begin(), whole.span().end()), expected);
  const FeatureBlocks blocks = feature_file_blocks(path, 5, 0);
  EXPECT_EQ(blocks.nonzeros, std::count_if(expected.begin(), expected.end(), [](float x) { return x != 0.0F; }));
  for (const std::int64_t block_rows : {1, 2, 3, 5, 100}) {
    const Matrix read = rows_in_blocks(blocks, block_rows);
    EXPECT_EQ(std::vector<float>(read.span().begin(), read.span().end()), expected) << block_rows << " rows a block";
  }
}

// Read twice, a feature file that changed in between is an error naming it, not rows filled with zeros.
TEST(PlainText, AFeatureFileThatChangesBetweenItsPassesIsAnError) {
  const TempDir dir;
  const auto path = write_text(dir, "f.txt", "1 2\n3 4\n");
  const FeatureBlocks blocks = feature_file_blocks(path, 2, 0);
  write_text(dir, "f.txt", "1 2\n");
  EXPECT_EQ(input_error([&] { rows_in_blocks(blocks, 2); }),
            path + ": ends at line 1, before its 2 rows: changed since it was read");
  write_text(dir, "f.txt", "1 2\n3 4 5\n");
  EXPECT_EQ(input_error([&] { rows_in_blocks(blocks, 2); }),
            path + ":2: 3 feature values, not 2: the file changed since it was read");
}

TEST(PlainText, RandomFeatureBlocksDrawTheSameValuesWhateverTheirSize) {
  const Matrix whole = random_features(37, 5, 9);
  for (const std::int64_t block_rows : {1, 4, 37}) {
    const Matrix drawn = rows_in_blocks(random_feature_blocks(37, 5, 9), block_rows);
    EXPECT_EQ(std::vector<float>(drawn.span().begin(), drawn.span().end()),
              std::vector<float>(whole.span().begin(), whole.span().end()))
        << block_rows << " rows a block";
  }
}

TEST(PlainText, RejectsFeatureRowsThatDoNotFit) {
  const TempDir dir;
  const auto path = write_text(dir, "f.txt", "0:1\n1:1\n");
  EXPECT_EQ(input_error([&] { read_features(path, 3, 0); }),
            path + ": 2 feature rows for 3 vertices (line i holds vertex i)");
  EXPECT_EQ(read_features(path, 2, 4).cols(), 4);
  EXPECT_EQ(input_error([&] { read_features(path, 2, 1); }),
            path + ":2: feature column 1 is outside the 1 declared columns");
  const auto ragged = write_text(dir, "ragged.txt", "1 2\n1 2 3\n");
  EXPECT_EQ(input_error([&] { read_features(ragged, 2, 0); }),
            ragged + ":2: 3 feature values, but the rows before have 2");
}

TEST(PlainText, ReadsLabelsOnePerLineOrAsPairs) {
  const TempDir dir;
  const auto ids = VertexIds::dense(4, false);
  EXPECT_EQ(read_labels(write_text(dir, "l.txt", "2\nnan\n0\n-1\n"), ids, 0),
            (std::vector<std::int32_t>{2, -1, 0, -1}));
  EXPECT_EQ(read_labels(write_text(dir, "p.txt", "3 1\r\n0 2\r\n"), ids, 3), (std::vector<std::int32_t>{2, -1, -1, 1}));
  const auto short_file = write_text(dir, "short.txt", "1\n2\n");
  EXPECT_EQ(input_error([&] { read_labels(short_file, ids, 0); }),
            short_file + ": 2 labels for 4 vertices (line i holds vertex i)");
  const auto too_large = write_text(dir, "large.txt", "0\n1\n2\n3\n");
  EXPECT_EQ(input_error([&] { read_labels(too_large, ids, 3); }),
            too_large + ":4: label 3 is not below the number of classes, 3");
}

TEST(PlainText, SplitFilesNameLabelledVertices) {
  const TempDir dir;
  const auto ids = VertexIds::dense(3, true);
  const std::vector<std::int32_t> labels = {0, -1, 1};
  EXPECT_EQ(read_split(write_text(dir, "s.txt", "3\n1\n"), ids, labels), (std::vector<std::uint8_t>{1, 0, 1}));
  const auto unlabelled = write_text(dir, "u.txt", "2\n");
  EXPECT_EQ(input_error([&] { read_split(unlabelled, ids, labels); }),
            unlabelled + ":1: vertex 2 is in the split but has no label");
}

TEST(PlainText, RandomSplitIsDeterministicAndCoversOnlyLabelledVertices) {
  Dataset dataset;
  dataset.graph.offsets.assign(121, 0);
  dataset.labels.assign(120, 1);
  for (std::size_t v = 100; v < 120; ++v) dataset.labels[v] = -1;
  random_split(dataset, {}, 7);
  EXPECT_EQ(count(dataset.train_mask), 60);
  EXPECT_EQ(count(dataset.val_mask), 20);
  EXPECT_EQ(count(dataset.test_mask), 20);
  for (std::size_t v = 0; v < 120; ++v) {
    EXPECT_EQ(dataset.train_mask[v] + dataset.val_mask[v] + dataset.test_mask[v], v < 100 ? 1 : 0) << v;
  }
  const auto first = dataset.train_mask;
  random_split(dataset, {}, 7);
  EXPECT_EQ(dataset.train_mask, first);
  random_split(dataset, {}, 8);
  EXPECT_NE(dataset.train_mask, first);
  random_split(dataset, {.train = 0.5, .val = 0.1, .test = 0.1}, 7);
  EXPECT_EQ(count(dataset.train_mask) + count(dataset.val_mask) + count(dataset.test_mask), 70);
  EXPECT_THROW(random_split(dataset, {.train = 0.8, .val = 0.2, .test = 0.2}, 7), InputError);
}

TEST(PlainText, RandomFeaturesAreStandardNormalAndSeeded) {
  const auto features = random_features(1000, 20, 3);
  double sum = 0;
  double squares = 0;
  for (const float x : features.span()) {
    sum += x;
    squares += static_cast<double>(x) * x;
  }
  const auto n = static_cast<double>(features.size());
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(squares / n, 1.0, 0.05);
  EXPECT_EQ(random_features(1000, 20, 3)(999, 19), features(999, 19));
  EXPECT_NE(random_features(1000, 20, 4)(999, 19), features(999, 19));
}

TEST(PlainText, ReadsAPlainFolderAndChecksMeta) {
  const TempDir dir;
  write_text(dir, "meta.txt", "3 2 2 4\n");
  write_text(dir, "edges.txt", "0 1\n1 0\n1 2\n2 1\n");
  write_text(dir, "features.txt", "0:1\n\n1:0.5\n");
  write_text(dir, "labels.txt", "0\n1\n1\n");
  write_text(dir, "train.txt", "0\n");
  write_text(dir, "val.txt", "1\n");
  write_text(dir, "test.txt", "2\n");
  auto dataset = read_plain_folder(dir.path().string(), {.name = "tiny"});
  EXPECT_EQ(dataset.num_vertices(), 3);
  EXPECT_EQ(dataset.graph.num_edges(), 4);
  EXPECT_TRUE(dataset.symmetrized);
  EXPECT_EQ(dataset.features.cols(), 2);
  EXPECT_EQ(dataset.features(2, 1), 0.5F);
  EXPECT_EQ(dataset.num_classes, 2);
  EXPECT_EQ(dataset.test_mask, (std::vector<std::uint8_t>{0, 0, 1}));
  EXPECT_NO_THROW(dataset.validate("tiny"));

  write_text(dir, "meta.txt", "3 2 2 5\n");
  EXPECT_EQ(input_error([&] { read_plain_folder(dir.path().string(), {}); }),
            dir.file("meta.txt") + ": declares 5 edges but edges.txt has 4");
}

}  // namespace
}  // namespace nj
