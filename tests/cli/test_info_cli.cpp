#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "nj/io/dataset_file.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

class InfoCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto generated =
        test::run_nj("generate --vertices 600 --edges 6000 --features 12 --classes 4 --seed 5 --name tiny -o " +
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
  for (const auto& expected : {std::string("tiny"), std::string("600"),
                               fmt::format("{} directed (symmetrized: yes, self-loops: removed)", d.graph.num_edges()),
                               std::string("12 per vertex"), std::string("train 60, val 60, test 480")}) {
    EXPECT_NE(info.output.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << info.output;
  }
}

TEST_F(InfoCli, JsonHasTheSameCounts) {
  const Dataset d = read_dataset(path_);
  const auto info = test::run_nj("info --json " + test::shell_quote(path_));
  ASSERT_EQ(info.exit_code, 0) << info.output;
  const auto json = nlohmann::json::parse(info.output);
  EXPECT_EQ(json["name"], "tiny");
  EXPECT_EQ(json["num_vertices"], 600);
  EXPECT_EQ(json["num_edges"], d.graph.num_edges());
  EXPECT_EQ(json["feature_width"], 12);
  EXPECT_EQ(json["num_classes"], 4);
  EXPECT_EQ(json["class_counts"].size(), 4U);
  EXPECT_EQ(json["splits"]["train"], 60);
  EXPECT_EQ(json["file_bytes"], std::filesystem::file_size(path_));
}

TEST_F(InfoCli, TruncatedFileGivesOneErrorLine) {
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) / 2);
  const auto line = test::expect_one_line_error(test::run_nj("info " + test::shell_quote(path_)));
  EXPECT_NE(line.find(path_), std::string::npos) << line;
}

}  // namespace
}  // namespace nj
