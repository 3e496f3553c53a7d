#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "nj/graph/shard.hpp"
#include "nj/io/dataset_file.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

class InfoCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto generated =
        test::run_nj("generate --vertices 600 --edges 6000 --features 12 --classes 4 --seed 5 --name small-world -o " +
                     test::shell_quote(path_));
    ASSERT_EQ(generated.exit_code, 0) << generated.output;
  }

  test::TempDir dir_;
  std::string path_ = dir_.file("tiny.h5");
};

TEST_F(InfoCli, PrintsTheCounts) {
  const Dataset d = read_dataset(path_);
  const auto info = test::run_nj("info " + test::shell_quote(path_));
  ASSERT_EQ(info.exit_code, 0) << info.output;
  // The dataset's own name, not its file's, and each count on its line.
  for (const auto& expected :
       {std::string("\nname:            small-world\n"), std::string("\nvertices:        600\n"),
        fmt::format("\nedges:           {} directed (symmetrized: yes, self-loops: removed)", d.graph.num_edges()),
        std::string("12 per vertex"), std::string("train 60, val 60, test 480")}) {
    EXPECT_NE(info.output.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << info.output;
  }
}

TEST_F(InfoCli, JsonHasTheSameCounts) {
  const Dataset d = read_dataset(path_);
  const auto info = test::run_nj("info --json " + test::shell_quote(path_));
  ASSERT_EQ(info.exit_code, 0) << info.output;
  const auto json = nlohmann::json::parse(info.output);
  EXPECT_EQ(json["name"], "small-world");
  EXPECT_EQ(json["num_vertices"], 600);
  EXPECT_EQ(json["num_edges"], d.graph.num_edges());
  EXPECT_EQ(json["feature_width"], 12);
  EXPECT_EQ(json["num_classes"], 4);
  EXPECT_EQ(json["class_counts"].size(), 4U);
  EXPECT_EQ(json["splits"]["train"], 60);
  EXPECT_EQ(json["file_bytes"], std::filesystem::file_size(path_));
}

TEST_F(InfoCli, SaysWhatACheckpointHolds) {
  const std::string checkpoint = dir_.file("gat.h5");
  const auto trained = test::run_nj("train " + test::shell_quote(path_) +
                                    " --model gat --heads 2 --hidden 4 --epochs 3 --lr 0.02 --save-checkpoint " +
                                    test::shell_quote(checkpoint));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto text = test::run_nj("info " + test::shell_quote(checkpoint));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  const Dataset data = read_dataset(path_);
  const std::int64_t edges = data.graph.num_edges();
  const std::uint64_t structure = owned_edges_hash(whole_local_graph(data.graph));
  for (const std::string& expected : std::vector<std::string>{
           "checkpoint:      format 3, 3 epochs done, 3 Adam steps\n",
           "model:           gat, 2 layers, hidden 4, heads 2, output heads 1, activation elu, dropout 0.5, attention "
           "dropout 0.6, seed 0\n",
           "dataset:         'small-world': 600 vertices, ",
           fmt::format("graph:           'small-world': 600 vertices, {} edges, structure {:016x}\n", edges, structure),
           "partitioning:    one rank, the whole graph\n",
           "optimizer:       Adam betas 0.9 0.999, eps 1e-08, weight decay 0.0005 on all layers, trained at lr 0.02\n",
           "best validation: ", "parameters:      "}) {
    EXPECT_NE(text.output.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << text.output;
  }
  const auto json = test::run_nj("info --json " + test::shell_quote(checkpoint));
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const auto held = nlohmann::json::parse(json.output);
  EXPECT_EQ(held["kind"], "nj-checkpoint");
  EXPECT_EQ(held["epochs_done"], 3);
  EXPECT_EQ(held["model"]["kind"], "gat");
  EXPECT_EQ(held["model"]["heads"], 2);
  EXPECT_FLOAT_EQ(held["lr"].get<float>(), 0.02F);
  EXPECT_EQ(held["parameters"].size(), 8U);  // per layer: the weight, the two attention vectors and the bias
  EXPECT_EQ(held["graph"], nlohmann::json({{"name", "small-world"},
                                           {"vertices", 600},
                                           {"edges", edges},
                                           {"structure", fmt::format("{:016x}", structure)}}));
}

TEST_F(InfoCli, SaysThatACheckpointOfAnOlderFormatRecordsNoGraph) {
  const auto text =
      test::run_nj("info " + test::shell_quote(std::string(NJ_SOURCE_DIR) + "/tests/fixtures/format2/appnp.h5"));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  for (const std::string expected : {"checkpoint:      format 2, 3 epochs done",
                                     "graph:           not recorded (checkpoints record it from format 3)\n",
                                     "layer0.weight 6x8, layer1.bias 1x3, layer1.weight 8x3\n"}) {
    EXPECT_NE(text.output.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << text.output;
  }
}

TEST_F(InfoCli, TruncatedFileGivesOneErrorLine) {
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) / 2);
  const auto line = test::expect_one_line_error(test::run_nj("info " + test::shell_quote(path_)));
  EXPECT_NE(line.find(path_), std::string::npos) << line;
}

}  // namespace
}  // namespace nj
