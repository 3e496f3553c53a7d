#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nj/core/bytes.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/hdf5.hpp"
#include "nj/io/shard_file.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

class PartitionCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto generated = test::run_nj(
        "generate --vertices 600 --edges 6000 --features 6 --classes 3 --seed 2 --name tiny -o " + shell_quote(data_));
    ASSERT_EQ(generated.exit_code, 0) << generated.output;
  }

  test::CommandResult partition(const std::string& arguments) {
    return test::run_nj("partition " + shell_quote(data_) + " " + arguments + " -o " + shell_quote(output_));
  }

  test::TempDir dir_;
  std::string data_ = dir_.file("tiny.h5");
  std::string output_ = dir_.file("parts");
};

TEST_F(PartitionCli, WritesOneShardPerPartAndAManifest) {
  const auto run = partition("--parts 3");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const auto* expected : {"into 3 parts by metis (seed 0)", "edge cut: ", "balance (max / mean): vertices ",
                               "part 2: ", "mirror fraction ", "wrote 3 shards and manifest.json"}) {
    EXPECT_NE(run.output.find(expected), std::string::npos) << "missing '" << expected << "' in\n" << run.output;
  }
  const PartitionManifest manifest = read_manifest(output_);
  EXPECT_EQ(manifest.partition.parts, 3);
  EXPECT_EQ(manifest.partition.method, "metis");
  EXPECT_EQ(manifest.dataset_path, data_);
  std::int64_t owned = 0;
  for (int p = 0; p < 3; ++p) {
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(output_) / shard_file_name(p)));
    owned += load_part(output_, p, 3).num_owned();
  }
  EXPECT_EQ(owned, 600);
}

TEST_F(PartitionCli, MethodAndSeedAreRecorded) {
  const auto run = partition("--parts 2 --method random --seed 7");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const PartitionManifest manifest = read_manifest(output_);
  EXPECT_EQ(manifest.partition.method, "random");
  EXPECT_EQ(manifest.partition.seed, 7U);
  EXPECT_EQ(manifest.partition.owned, (std::vector<std::int64_t>{300, 300}));
}

TEST_F(PartitionCli, InfoReadsAShardAndTheManifest) {
  ASSERT_EQ(partition("--parts 3").exit_code, 0);
  const auto shard_path = (std::filesystem::path(output_) / "part-1.h5").string();
  const auto text = test::run_nj("info " + shell_quote(shard_path));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("part 1 of 3 of tiny (metis, seed 0)"), std::string::npos) << text.output;
  const auto shard_json = test::run_nj("info --json " + shell_quote(shard_path));
  ASSERT_EQ(shard_json.exit_code, 0) << shard_json.output;
  const auto shard = nlohmann::json::parse(shard_json.output);
  const Shard expected = read_shard(shard_path);
  EXPECT_EQ(shard["kind"], "nj-shard");
  EXPECT_EQ(shard["part"], 1);
  EXPECT_EQ(shard["parts"], 3);
  EXPECT_EQ(shard["num_owned"], expected.num_owned());
  EXPECT_EQ(shard["num_mirrors"], expected.local.num_mirrors());
  EXPECT_EQ(shard["global_vertices"], 600);

  const auto folder = test::run_nj("info " + shell_quote(output_));
  ASSERT_EQ(folder.exit_code, 0) << folder.output;
  EXPECT_NE(folder.output.find("3 parts by metis, seed 0"), std::string::npos) << folder.output;
  EXPECT_NE(folder.output.find("part-2.h5: "), std::string::npos) << folder.output;
  const auto manifest_json =
      test::run_nj("info --json " + shell_quote((std::filesystem::path(output_) / "manifest.json").string()));
  ASSERT_EQ(manifest_json.exit_code, 0) << manifest_json.output;
  const auto manifest = nlohmann::json::parse(manifest_json.output);
  EXPECT_EQ(manifest["kind"], "nj-partition");
  EXPECT_EQ(manifest["parts"], 3);
  EXPECT_EQ(manifest["per_part"].size(), 3U);
  EXPECT_EQ(manifest["dataset"]["num_vertices"], 600);
}

TEST_F(PartitionCli, FewerPartsIntoTheSameFolderRemoveTheStaleShards) {
  ASSERT_EQ(partition("--parts 4").exit_code, 0);
  std::ofstream(std::filesystem::path(output_) / "notes.txt") << "mine\n";
  const auto run = partition("--parts 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("removed 2 shard files of an earlier partition into more parts"), std::string::npos)
      << run.output;
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(std::filesystem::exists(std::filesystem::path(output_) / shard_file_name(p)), p < 2) << p;
  }
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(output_) / "notes.txt"));
  EXPECT_EQ(read_manifest(output_).partition.parts, 2);
}

TEST_F(PartitionCli, BadInputIsOneErrorLine) {
  EXPECT_EQ(test::expect_one_line_error(partition("--parts 0")),
            "nj: error: tiny: cannot split 600 vertices into 0 parts (parts must be between 1 and the number of "
            "vertices)\n");
  EXPECT_NE(test::expect_one_line_error(partition("--parts 601")).find("into 601 parts"), std::string::npos);
  const auto missing = dir_.file("missing.h5");
  EXPECT_EQ(test::expect_one_line_error(
                test::run_nj("partition " + shell_quote(missing) + " --parts 2 -o " + shell_quote(output_))),
            "nj: error: " + missing + ": no such file\n");
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(output_) / "manifest.json"));
  EXPECT_EQ(test::expect_one_line_error(test::run_nj("partition " + shell_quote(data_) + " --parts 2")),
            "nj: error: partitioning needs a dataset file, --parts and --output\n");
}

// --forecast prints what each rank would hold, for the dataset's graph or one that --shape describes, and partitions
// nothing; partition_memory_test.py checks the figures against what ranks hold.
TEST_F(PartitionCli, ForecastPrintsEachRankCountsPeakAndPartitionsNothing) {
  const auto from_file = test::run_nj("partition " + shell_quote(data_) + " --forecast 1,3 --parts 3");
  ASSERT_EQ(from_file.exit_code, 0) << from_file.output;
  const std::regex line(
      R"((\d) ranks, 3 parts: each rank holds (\S+) at its peak \(reading the slice \S+, the )"
      R"(undirected graph \S+, assigning parts \S+, sending the rows \S+, building the shards \S+\))");
  std::smatch one;
  std::smatch three;
  const std::string out = from_file.output;
  ASSERT_TRUE(std::regex_search(out, one, line)) << out;
  const std::string rest = one.suffix();
  ASSERT_TRUE(std::regex_search(rest, three, line)) << out;
  EXPECT_EQ(one[1], "1");
  EXPECT_EQ(three[1], "3");
  EXPECT_LT(parse_byte_size(three[2]), parse_byte_size(one[2]));
  EXPECT_FALSE(std::filesystem::exists(output_));

  const DatasetHeader header = read_dataset_header(data_);
  const auto from_shape = test::run_nj(fmt::format("partition --forecast 1,3 --parts 3 --shape {},{},{}",
                                                   header.num_vertices, header.num_edges, header.feature_width));
  ASSERT_EQ(from_shape.exit_code, 0) << from_shape.output;
  EXPECT_EQ(from_shape.output, out);

  EXPECT_EQ(
      test::expect_one_line_error(test::run_nj("partition " + shell_quote(data_) + " --forecast 2 --shape 10,20,3")),
      "nj: error: --forecast takes a dataset file or --shape, one of them\n");
  EXPECT_EQ(test::expect_one_line_error(test::run_nj("partition --forecast 2 --shape 10,20")),
            "nj: error: --shape takes three numbers, VERTICES,EDGES,FEATURES, not 2\n");
  EXPECT_EQ(test::expect_one_line_error(test::run_nj("partition --forecast 2")),
            "nj: error: --forecast takes a dataset file or --shape, one of them\n");
  EXPECT_EQ(test::expect_one_line_error(test::run_nj("partition --forecast 4 --parts 0 --shape 100,200,3")),
            "nj: error: --forecast 4 with 0 parts: parts and ranks must be between 1 and the graph's 100 vertices\n");
}

}  // namespace
}  // namespace nj

namespace nj {
namespace {

// A dataset whose features are mostly zero is stored sparse, nj info says so, and its shards keep the storage.
TEST(SparseFeaturesCli, InfoShowsTheStorageAndShardsKeepIt) {
  test::TempDir dir;
  Dataset data = test::random_dataset(300, 1500, 40, 3, 8);
  float* values = data.features.data();
  for (std::int64_t i = 0; i < data.features.size(); ++i) {
    if (i % 29 != 0) values[i] = 0.0F;
  }
  const std::string path = dir.file("sparse.h5");
  write_dataset(path, data);
  const auto info = test::run_nj("info " + shell_quote(path));
  ASSERT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find("feature storage: sparse, "), std::string::npos) << info.output;
  const std::string folder = dir.file("parts");
  ASSERT_EQ(test::run_nj("partition " + shell_quote(path) + " --parts 2 -o " + shell_quote(folder)).exit_code, 0);
  std::int64_t rows = 0;
  for (int p = 0; p < 2; ++p) {
    const std::string shard_path = (std::filesystem::path(folder) / shard_file_name(p)).string();
    EXPECT_TRUE(hdf5::File::open_read(shard_path).exists("/features_sparse")) << shard_path;
    const Shard shard = load_part(folder, p, 2);
    for (vid_t v = 0; v < shard.num_owned(); ++v) {
      const gid_t g = shard.local.global_id[static_cast<std::size_t>(v)];
      ASSERT_TRUE(
          std::equal(shard.features.view().row(v), shard.features.view().row(v) + 40, data.features.view().row(g)));
      ++rows;
    }
    const auto shard_info = test::run_nj("info --json " + shell_quote(shard_path));
    EXPECT_NE(shard_info.output.find("\"feature_storage\": \"sparse\""), std::string::npos) << shard_info.output;
  }
  EXPECT_EQ(rows, 300);
  // Forced: generate's dense Gaussian features stored sparse, and read back the same.
  const std::string generated = dir.file("generated.h5");
  const std::string forced = dir.file("forced.h5");
  ASSERT_EQ(
      test::run_nj("generate --vertices 200 --edges 800 --features 5 --seed 3 -o " + shell_quote(generated)).exit_code,
      0);
  ASSERT_EQ(test::run_nj("generate --vertices 200 --edges 800 --features 5 --seed 3 --feature-storage sparse -o " +
                         shell_quote(forced))
                .exit_code,
            0);
  EXPECT_FALSE(hdf5::File::open_read(generated).exists("/features_sparse"));
  EXPECT_TRUE(hdf5::File::open_read(forced).exists("/features_sparse"));
  test::expect_same_dataset(read_dataset(generated), read_dataset(forced));
}

}  // namespace
}  // namespace nj
