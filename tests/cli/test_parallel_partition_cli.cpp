// nj partition under mpirun as a user runs it: ranks that each read a slice of the dataset file partition it with
// PT-Scotch and write the shards, which the reader accepts and on which as many ranks train the function one process
// trains.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>

#include "nj/io/shard_file.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

std::vector<double> losses_of(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  std::vector<double> losses;
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["type"] == "epoch") losses.push_back(record["loss"].get<double>());
  }
  return losses;
}

TEST(MultiRankPartitionCli, FourRanksPartitionWithScotchAndTrainAsOneProcess) {
  NJ_SKIP_WITHOUT_MPIRUN();
  test::TempDir dir;
  const auto dataset = dir.file("graph.h5");
  const auto parts = dir.file("parts");
  const auto generated = test::run_nj("generate --vertices 3000 --edges 30000 --features 16 --classes 4 --seed 4 -o " +
                                      shell_quote(dataset));
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  // --method auto: PT-Scotch, since the job has several ranks.
  const auto partitioned =
      test::run_nj_ranks(4, "partition " + shell_quote(dataset) + " --parts 4 -o " + shell_quote(parts));
  ASSERT_EQ(partitioned.exit_code, 0) << partitioned.output;
  EXPECT_NE(partitioned.output.find("by scotch on 4 ranks"), std::string::npos) << partitioned.output;
  static const std::regex peak_line(R"(rank (\d): peak resident memory (\S+))");
  int peaks = 0;
  for (std::sregex_iterator it(partitioned.output.begin(), partitioned.output.end(), peak_line), end; it != end; ++it) {
    std::cout << "partitioning, rank " << (*it)[1] << ": peak resident memory " << (*it)[2] << '\n';
    ++peaks;
  }
  EXPECT_EQ(peaks, 4) << partitioned.output;

  const PartitionManifest manifest = read_manifest(parts);
  EXPECT_EQ(manifest.partition.method, "scotch");
  EXPECT_EQ(manifest.partition.parts, 4);
  EXPECT_LE(manifest.partition.vertex_imbalance(), 1.05);
  std::int64_t owned = 0;
  for (int part = 0; part < 4; ++part) owned += load_part(parts, part, 4).num_owned();  // each passes the checks
  EXPECT_EQ(owned, 3000);

  const std::string common = " --epochs 5 --threads 1 --metrics-out ";
  const auto single = test::run_nj("train " + shell_quote(dataset) + common + shell_quote(dir.file("one.jsonl")));
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto multi =
      test::run_nj_ranks(4, "train --partitions " + shell_quote(parts) + common + shell_quote(dir.file("four.jsonl")));
  ASSERT_EQ(multi.exit_code, 0) << multi.output;
  const auto expected = losses_of(dir.file("one.jsonl"));
  const auto got = losses_of(dir.file("four.jsonl"));
  ASSERT_EQ(expected.size(), 5U);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t e = 0; e < got.size(); ++e) EXPECT_NEAR(got[e], expected[e], 1e-5) << "epoch " << e + 1;
}

TEST(MultiRankPartitionCli, AMethodThatNeedsTheWholeGraphIsAUsageErrorOnSeveralRanks) {
  NJ_SKIP_WITHOUT_MPIRUN();
  test::TempDir dir;
  const auto dataset = dir.file("graph.h5");
  ASSERT_EQ(test::run_nj("generate --vertices 300 --edges 2000 -o " + shell_quote(dataset)).exit_code, 0);
  for (const std::string method : {"metis", "random"}) {
    const auto result = test::run_nj_ranks(
        2, "partition " + shell_quote(dataset) + " --parts 2 --method " + method + " -o " + shell_quote(dir.file("p")));
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(test::the_error_line(result).find("--method " + method + " runs in one process"), std::string::npos)
        << result.output;
    EXPECT_FALSE(std::filesystem::exists(dir.file("p"))) << "a rank wrote shards";
  }
}

}  // namespace
}  // namespace nj
