#include <gtest/gtest.h>

#include <filesystem>

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

TEST(GenerateCli, BadOptionIsOneErrorLine) {
  const test::TempDir dir;
  const auto line =
      test::expect_one_line_error(test::run_nj("generate --classes 1 -o " + test::shell_quote(dir.file("g.h5"))));
  EXPECT_EQ(line, "nj: error: --classes must be at least 2, got 1\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("g.h5")));
}

}  // namespace
}  // namespace nj
