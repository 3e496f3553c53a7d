#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "nj/io/dataset_file.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;
using test::TempDir;
std::string data(const std::string& relative) { return shell_quote((test::data_dir() / relative).string()); }

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// Runs `nj convert`, expecting success, and reads back the file it wrote.
Dataset convert(const TempDir& dir, const std::string& arguments) {
  const auto output = dir.file("out.h5");
  const auto result = test::run_nj("convert " + arguments + " --output " + shell_quote(output));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return read_dataset(output);
}

// Runs `nj convert`, expecting failure with a one-line message; returns that line.
std::string convert_error(const TempDir& dir, const std::string& arguments) {
  return test::expect_one_line_error(
      test::run_nj("convert " + arguments + " --output " + shell_quote(dir.file("out.h5"))));
}

std::int64_t nonzeros(const Matrix& m) {
  return std::count_if(m.span().begin(), m.span().end(), [](float x) { return x != 0.0F; });
}

eid_t self_loops(const CsrGraph& graph) {
  eid_t loops = 0;
  for (vid_t v = 0; v < graph.num_vertices(); ++v) {
    const auto sources = graph.in_neighbors(v);
    loops += std::count(sources.begin(), sources.end(), v);
  }
  return loops;
}

// A 6-vertex OGB node-property-prediction folder: vertex 5 is isolated (only num-node-list knows it), vertex
// 2 unlabelled, vertex 4 has a self-loop.
std::string write_ogb_folder(const TempDir& dir, const std::vector<std::string>& split_schemes) {
  const auto root = dir.path() / "ogbn-tiny";
  std::filesystem::create_directories(root / "raw");
  test::write_gzip((root / "raw/edge.csv.gz").string(), "0,1\n1,2\n2,0\n3,4\n4,4\n");
  test::write_gzip((root / "raw/num-node-list.csv.gz").string(), "6\n");
  test::write_gzip((root / "raw/node-feat.csv.gz").string(), "0.5,-1\n1,2\n0,0\n-0.25,4e2\n7,8\n9,10\n");
  test::write_gzip((root / "raw/node-label.csv.gz").string(), "0\n1\nnan\n2\n1\n0\n");
  for (const auto& scheme : split_schemes) {
    const auto split = root / "split" / scheme;
    std::filesystem::create_directories(split);
    test::write_gzip((split / "train.csv.gz").string(), "0\n1\n");
    test::write_gzip((split / "valid.csv.gz").string(), "3\n");
    test::write_gzip((split / "test.csv.gz").string(), "4\n5\n");
  }
  return root.string();
}

TEST(ConvertCli, CoraPlainExport) {
  NJ_SKIP_WITHOUT_DATA();
  const TempDir dir;
  const auto cora = convert(dir, "--format plain " + data("cora"));
  EXPECT_EQ(cora.name, "cora");
  EXPECT_EQ(cora.num_vertices(), 2708);
  EXPECT_EQ(cora.graph.num_edges(), 10556);
  EXPECT_EQ(cora.features.cols(), 1433);
  EXPECT_EQ(nonzeros(cora.features), 49216);
  EXPECT_EQ(cora.num_classes, 7);
  EXPECT_EQ(count(cora.train_mask), 140);
  EXPECT_EQ(count(cora.val_mask), 500);
  EXPECT_EQ(count(cora.test_mask), 1000);
  EXPECT_TRUE(cora.symmetrized);  // edges.txt lists both directions
  EXPECT_EQ(cora.self_loops, SelfLoopPolicy::kKept);
  EXPECT_EQ(self_loops(cora.graph), 0);
}

TEST(ConvertCli, SlashdotSnapEdgeList) {
  NJ_SKIP_WITHOUT_DATA();
  const TempDir dir;
  const auto slashdot = data("snap/soc-Slashdot0902.txt.gz");
  const auto directed = convert(dir, "--format edgelist " + slashdot);
  EXPECT_EQ(directed.name, "soc-Slashdot0902");
  EXPECT_EQ(directed.num_vertices(), 82168);
  EXPECT_EQ(directed.graph.num_edges(), 948464);
  EXPECT_EQ(self_loops(directed.graph), 78303);
  EXPECT_FALSE(directed.symmetrized);
  EXPECT_EQ(directed.self_loops, SelfLoopPolicy::kKept);
  // Structure only: one class, one column of ones, a random split over all vertices.
  EXPECT_EQ(directed.num_classes, 1);
  EXPECT_EQ(directed.features.cols(), 1);
  EXPECT_EQ(count(directed.train_mask) + count(directed.val_mask) + count(directed.test_mask), 82168);

  // The 504,230 unique undirected pairs of the README exclude the self-loops (with them there are 582,533,
  // i.e. each of the 78,303 self-loop lines is a distinct vertex), so each pair gives two edges.
  const auto undirected =
      convert(dir, "--format edgelist " + slashdot + " --undirected --self-loops remove --duplicates remove");
  EXPECT_EQ(undirected.num_vertices(), 82168);
  EXPECT_EQ(undirected.graph.num_edges(), 2 * 504230);
  EXPECT_EQ(self_loops(undirected.graph), 0);
  EXPECT_TRUE(undirected.symmetrized);
  EXPECT_EQ(undirected.self_loops, SelfLoopPolicy::kRemoved);
}

TEST(ConvertCli, EmailEuCoreWithDepartmentLabels) {
  NJ_SKIP_WITHOUT_DATA();
  const TempDir dir;
  const auto email = convert(dir, "--format edgelist " + data("snap/email-Eu-core.txt.gz") + " --labels " +
                                      data("snap/email-Eu-core-department-labels.txt"));
  EXPECT_EQ(email.num_vertices(), 1005);
  EXPECT_EQ(email.graph.num_edges(), 25571);
  EXPECT_EQ(email.num_classes, 42);
  EXPECT_EQ(std::count(email.labels.begin(), email.labels.end(), -1), 0);
  EXPECT_EQ(count(email.train_mask), 603);
  EXPECT_EQ(count(email.val_mask), 201);
  EXPECT_EQ(count(email.test_mask), 201);
}

TEST(ConvertCli, OgbFolderRoundTrip) {
  const TempDir dir;
  const auto folder = write_ogb_folder(dir, {"time"});
  const auto ogb = convert(dir, "--format ogb " + shell_quote(folder));
  EXPECT_EQ(ogb.name, "ogbn-tiny");
  EXPECT_EQ(ogb.graph.offsets, (std::vector<eid_t>{0, 1, 2, 3, 3, 5, 5}));
  EXPECT_EQ(ogb.graph.sources, (std::vector<vid_t>{2, 0, 1, 3, 4}));
  EXPECT_FALSE(ogb.symmetrized);
  EXPECT_EQ(ogb.self_loops, SelfLoopPolicy::kKept);
  const std::vector<float> features = {0.5F, -1, 1, 2, 0, 0, -0.25F, 400, 7, 8, 9, 10};
  EXPECT_EQ(std::vector<float>(ogb.features.span().begin(), ogb.features.span().end()), features);
  EXPECT_EQ(ogb.labels, (std::vector<std::int32_t>{0, 1, -1, 2, 1, 0}));
  EXPECT_EQ(ogb.num_classes, 3);
  EXPECT_EQ(ogb.train_mask, (std::vector<std::uint8_t>{1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(ogb.val_mask, (std::vector<std::uint8_t>{0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(ogb.test_mask, (std::vector<std::uint8_t>{0, 0, 0, 0, 1, 1}));

  const auto undirected = convert(dir, "--format ogb " + shell_quote(folder) + " --undirected --self-loops remove");
  EXPECT_EQ(undirected.graph.offsets, (std::vector<eid_t>{0, 2, 4, 6, 7, 8, 8}));
  EXPECT_EQ(undirected.graph.sources, (std::vector<vid_t>{1, 2, 0, 2, 0, 1, 4, 3}));
  EXPECT_TRUE(undirected.symmetrized);
  EXPECT_EQ(undirected.self_loops, SelfLoopPolicy::kRemoved);

  // Its edges sorted on disk in runs of two (16 bytes of the 32 --memory gives): the same dataset.
  const auto output = dir.file("sorted.h5");
  const auto sorted = test::run_nj("--log-level debug convert --format ogb " + shell_quote(folder) +
                                   " --undirected --self-loops remove --memory 32 --output " + shell_quote(output));
  ASSERT_EQ(sorted.exit_code, 0) << sorted.output;
  EXPECT_TRUE(std::regex_search(sorted.output, std::regex(R"(edges sorted in [2-9] runs)"))) << sorted.output;
  test::expect_same_dataset(read_dataset(output), undirected);
}

// The community order is stored where finding it (its phase of docs/convert.md, 6 MiB and more) fits within --memory.
TEST(ConvertCli, StoresTheCommunityOrderWhereFindingItFitsWithinMemory) {
  const TempDir dir;
  const auto folder = shell_quote(write_ogb_folder(dir, {"time"}));
  EXPECT_EQ(convert(dir, "--format ogb " + folder + " --memory 64M").community_order.size(), 6U);
  const auto output = dir.file("small.h5");
  const auto small = test::run_nj("convert --format ogb " + folder + " --memory 4M --output " + shell_quote(output));
  ASSERT_EQ(small.exit_code, 0) << small.output;
  EXPECT_NE(small.output.find("community order not stored: finding it would hold"), std::string::npos) << small.output;
  EXPECT_TRUE(read_dataset(output).community_order.empty());
}

TEST(ConvertCli, OgbSplitSchemeMustBeChosenAmongSeveral) {
  const TempDir dir;
  const auto folder = shell_quote(write_ogb_folder(dir, {"time", "random"}));
  EXPECT_NE(convert_error(dir, "--format ogb " + folder).find("several split schemes (random, time)"),
            std::string::npos);
  EXPECT_EQ(count(convert(dir, "--format ogb " + folder + " --ogb-split random").train_mask), 2);
}

TEST(ConvertCli, RejectsFeatureFileWithWrongRowCount) {
  const TempDir dir;
  write_text(dir.file("edges.txt"), "0 1\n1 2\n2 3\n");
  write_text(dir.file("features.txt"), "1 0\n0 1\n1 1\n");
  const auto message = convert_error(dir, "--format edgelist " + shell_quote(dir.file("edges.txt")) + " --features " +
                                              shell_quote(dir.file("features.txt")));
  EXPECT_NE(message.find(dir.file("features.txt") + ": 3 feature rows for 4 vertices"), std::string::npos) << message;
}

TEST(ConvertCli, RejectsEdgeEndpointOutOfRange) {
  const TempDir dir;
  write_text(dir.file("meta.txt"), "3 0 1 2\n");
  write_text(dir.file("edges.txt"), "0 1\n1 3\n");
  const auto message = convert_error(dir, "--format plain " + shell_quote(dir.path().string()));
  EXPECT_NE(message.find(dir.file("edges.txt") + ":2: vertex id 3 is outside 0..2"), std::string::npos) << message;
  const auto flagged =
      convert_error(dir, "--format edgelist " + shell_quote(dir.file("edges.txt")) + " --num-vertices 2");
  EXPECT_NE(flagged.find(dir.file("edges.txt") + ":2: vertex id 3 is outside 0..1"), std::string::npos) << flagged;
}

TEST(ConvertCli, RejectsLabelNotBelowNumClasses) {
  const TempDir dir;
  write_text(dir.file("edges.txt"), "0 1\n2 3\n");
  write_text(dir.file("labels.txt"), "0\n1\n2\n3\n");
  const auto message = convert_error(dir, "--format edgelist " + shell_quote(dir.file("edges.txt")) + " --labels " +
                                              shell_quote(dir.file("labels.txt")) + " --num-classes 3");
  EXPECT_NE(message.find(dir.file("labels.txt") + ":4: label 3 is not below the number of classes, 3"),
            std::string::npos)
      << message;
}

TEST(ConvertCli, RejectsOgbFolderWithoutSplit) {
  const TempDir dir;
  const auto folder = write_ogb_folder(dir, {});
  const auto message = convert_error(dir, "--format ogb " + shell_quote(folder));
  EXPECT_NE(message.find(folder + "/split: missing split"), std::string::npos) << message;
  // A random split needs no split folder.
  EXPECT_EQ(convert(dir, "--format ogb " + shell_quote(folder) + " --split-ratio 0.4,0.2,0.2").num_vertices(), 6);
}

TEST(ConvertCli, RejectsNonNumericTokenInEdgeList) {
  const TempDir dir;
  write_text(dir.file("edges.txt"), "# src dst\n0 1\n1 x7\n");
  const auto message = convert_error(dir, "--format edgelist " + shell_quote(dir.file("edges.txt")));
  EXPECT_NE(message.find(dir.file("edges.txt") + ":3: 'x7' is not a valid vertex id"), std::string::npos) << message;
}

// Runs a shell command; returns its exit status and fills `output` with what it printed.
int run_shell(const std::string& command, const TempDir& dir, std::string& output) {
  const auto log = dir.file("command.log");
  const int status = std::system((command + " > " + shell_quote(log) + " 2>&1").c_str());
  std::ostringstream text;
  text << std::ifstream(log).rdbuf();
  output = text.str();
  return status;
}

const std::string kPlanetoidScript = "/usr/bin/python3 '" NJ_SOURCE_DIR "/scripts/planetoid_to_h5.py' ";

#define NJ_SKIP_WITHOUT_PYTHON_H5PY()                                                                  \
  do {                                                                                                 \
    if (std::system("/usr/bin/python3 -c 'import h5py, numpy, scipy' > /dev/null 2>&1") != 0) {        \
      GTEST_SKIP() << "Debian's /usr/bin/python3 with numpy, scipy and h5py is needed for the script"; \
    }                                                                                                  \
  } while (false)

TEST(PlanetoidScript, MatchesThePlainCoraExport) {
  NJ_SKIP_WITHOUT_DATA();
  NJ_SKIP_WITHOUT_PYTHON_H5PY();
  const TempDir dir;
  const auto script_output = dir.file("planetoid.h5");
  std::string printed;
  ASSERT_EQ(run_shell(kPlanetoidScript + data("planetoid-raw") + " cora " + shell_quote(script_output), dir, printed),
            0)
      << printed;
  const auto from_script = read_dataset(script_output);
  const auto from_plain = convert(dir, "--format plain " + data("cora") + " --self-loops remove");
  EXPECT_EQ(from_script.name, from_plain.name);
  test::expect_same_dataset(from_script, from_plain);
}

TEST(PlanetoidScript, RefusesPubmedWithoutAllx) {
  NJ_SKIP_WITHOUT_DATA();
  NJ_SKIP_WITHOUT_PYTHON_H5PY();
  const TempDir dir;
  std::string printed;
  EXPECT_NE(
      run_shell(kPlanetoidScript + data("planetoid-raw") + " pubmed " + shell_quote(dir.file("p.h5")), dir, printed),
      0);
  EXPECT_NE(printed.find("ind.pubmed.allx: missing"), std::string::npos) << printed;
}

}  // namespace
}  // namespace nj
