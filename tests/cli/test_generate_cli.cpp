#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "nj/graph/vertex_order.hpp"
#include "nj/io/dataset_file.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

TEST(GenerateCli, WritesAReadableDatasetWithTheRequestedShape) {
  const test::TempDir dir;
  const auto path = dir.file("g.h5");
  const auto run = test::run_nj(
      "generate --vertices 300 --edges 3000 --features 5 --classes 3 --train-fraction 0.5 "
      "--val-fraction 0.2 -o " +
      path);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Dataset d = read_dataset(path);
  EXPECT_EQ(d.name, "synthetic");
  EXPECT_EQ(d.num_vertices(), 300);
  EXPECT_EQ(d.features.cols(), 5);
  EXPECT_EQ(d.num_classes, 3);
  EXPECT_EQ(count(d.train_mask), 150);
  EXPECT_EQ(count(d.val_mask), 60);
}

// The file carries the community order a single-process run would search for, unless told not to; nj plan reads
// it and plans the same as without it (nj train reads it through whole_graph_shard, VertexOrder tests).
TEST(GenerateCli, StoresTheCommunityOrderThatRunsRead) {
  const test::TempDir dir;
  const std::string options = "generate --vertices 400 --edges 4000 --features 4 --classes 3 --seed 2 -o ";
  const auto stored = dir.file("stored.h5");
  const auto searched = dir.file("searched.h5");
  ASSERT_EQ(test::run_nj(options + stored).exit_code, 0);
  ASSERT_EQ(test::run_nj(options + searched + " --no-community-order").exit_code, 0);
  Dataset d = read_dataset(searched);
  EXPECT_TRUE(d.community_order.empty());
  store_community_order(d);
  EXPECT_EQ(read_dataset(stored).community_order, d.community_order);
  EXPECT_NE(test::run_nj("info " + stored).output.find("community order: stored"), std::string::npos);

  const auto plan = [](const std::string& path) {
    const auto run = test::run_nj("--log-level debug plan " + path + " --device-memory 64K");
    EXPECT_EQ(run.exit_code, 0) << run.output;
    return run.output;
  };
  const std::string with_order = plan(stored);
  const std::string without = plan(searched);
  EXPECT_NE(with_order.find("the stored community order used"), std::string::npos) << with_order;
  EXPECT_EQ(with_order.find("communities: round"), std::string::npos) << with_order;
  EXPECT_EQ(without.find("the stored community order used"), std::string::npos) << without;
  // The same plan: the table of predicted transfers is the output's last line.
  const auto last_line = [](const std::string& out) {
    const auto end = out.find_last_not_of('\n');
    return out.substr(out.rfind('\n', end) + 1, end - out.rfind('\n', end));
  };
  EXPECT_EQ(last_line(with_order), last_line(without));
  EXPECT_NE(last_line(with_order).find("st-aware"), std::string::npos) << with_order;
}

TEST(GenerateCli, BadOptionIsOneErrorLine) {
  const test::TempDir dir;
  const auto line =
      test::expect_one_line_error(test::run_nj("generate --classes 1 -o " + test::shell_quote(dir.file("g.h5"))));
  EXPECT_EQ(line, "nj: error: --classes must be at least 2, got 1\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("g.h5")));
}

}  // namespace
}  // namespace nj
