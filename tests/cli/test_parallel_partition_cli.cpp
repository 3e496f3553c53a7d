// nj generate and nj partition under mpirun as a user runs them: ranks write a generated dataset between them, ranks
// that each read a slice of it partition it with PT-Scotch and write the shards, which the reader accepts and on which
// as many ranks train the function one process trains.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>

#include "nj/graph/generate.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/hdf5.hpp"
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
  const auto generated = test::run_nj_ranks(
      4, "generate --vertices 3000 --edges 30000 --features 16 --classes 4 --seed 4 -o " + shell_quote(dataset));
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  test::expect_same_dataset(
      read_dataset(dataset),
      generate_dataset({.vertices = 3000, .edges = 30000, .features = 16, .classes = 4, .seed = 4}));
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

TEST(MultiRankPartitionCli, GenerateOnSeveralRanksRefusesWhatNeedsOneProcessAndAMissingFolderAtOnce) {
  NJ_SKIP_WITHOUT_MPIRUN();
  test::TempDir dir;
  const auto dataset = dir.file("graph.h5");
  const auto declined =
      test::run_nj_ranks(2, "generate --vertices 300 --edges 2000 --no-community-order -o " + dataset);
  EXPECT_EQ(declined.exit_code, 0) << "--no-community-order asks for what the ranks do: " << declined.output;
  std::filesystem::remove(dataset);
  for (const auto& [option, error] : {std::pair{"--feature-storage sparse", "--feature-storage sparse applies to one"},
                                      std::pair{"--community-order", "--community-order needs the whole graph"},
                                      std::pair{"--homophily 2", "--homophily must be in [0, 1]"}}) {
    const auto result =
        test::run_nj_ranks(2, "generate --vertices 300 --edges 2000 " + std::string(option) + " -o " + dataset);
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(test::the_error_line(result).find(error), std::string::npos) << result.output;
    EXPECT_FALSE(std::filesystem::exists(dataset)) << option;
    EXPECT_FALSE(std::filesystem::exists(dataset + ".partial")) << option;
  }
  // Before any rank draws an edge.
  const auto nowhere = test::run_nj_ranks(2, "generate --vertices 300 --edges 2000 -o " + dir.file("none/graph.h5"));
  EXPECT_EQ(nowhere.exit_code, 1) << nowhere.output;
  EXPECT_NE(test::the_error_line(nowhere).find("the folder " + dir.file("none") + " does not exist"), std::string::npos)
      << nowhere.output;
}

}  // namespace
}  // namespace nj

namespace nj {
namespace {

// A vertex's id in the raw files: 2^33 apart and more, ascending with the vertex, far above 2^32.
gid_t spread(std::int64_t v) { return (v << 33) + 7 * v + 1; }

// Rows of `name` in an inference file, in file order.
template <typename T>
std::vector<T> read_inference(const std::string& path, const std::string& name) {
  return hdf5::read_vector<T>(hdf5::File::open_read(path), name, -1);
}

// A graph whose raw files name its vertices by ids above 2^32 goes through convert (relabelled, the ids kept as the
// vertices' names), partition (METIS in one process, PT-Scotch on 2 ranks), train (2 ranks train the losses of one
// process) and infer (every rank's rows come back under the raw ids, with the predictions of one process).
TEST(SixtyFourBitCli, IdsAboveTwoToTheThirtyTwoGoFromTheRawFilesToInference) {
  NJ_SKIP_WITHOUT_MPIRUN();
  test::TempDir dir;
  GeneratorOptions options;
  options.vertices = 1500;
  options.edges = 12000;
  options.features = 8;
  options.classes = 3;
  options.seed = 6;
  const Dataset source = generate_dataset(options);
  {
    std::ofstream edges(dir.file("edges.txt"));
    std::ofstream features(dir.file("features.txt"));
    std::ofstream labels(dir.file("labels.txt"));
    std::ofstream train(dir.file("train.txt"));
    std::ofstream val(dir.file("val.txt"));
    std::ofstream test(dir.file("test.txt"));
    // --relabel names the vertices an edge names: those without an edge are left out of every file.
    for (vid_t v = 0; v < source.num_vertices(); ++v) {
      if (source.graph.in_degree(v) == 0) continue;  // the generated graph is symmetric
      for (const vid_t s : source.graph.in_neighbors(v)) edges << spread(s) << ' ' << spread(v) << '\n';
      for (std::int64_t c = 0; c < source.features.cols(); ++c) features << source.features.row(v)[c] << ' ';
      features << '\n';
      labels << spread(v) << ' ' << source.labels[static_cast<std::size_t>(v)] << '\n';
      const auto i = static_cast<std::size_t>(v);
      (source.train_mask[i] != 0 ? train : source.val_mask[i] != 0 ? val : test) << spread(v) << '\n';
    }
  }
  const auto dataset = dir.file("spread.h5");
  const auto converted =
      test::run_nj("convert --format edgelist " + shell_quote(dir.file("edges.txt")) + " --relabel --features " +
                   shell_quote(dir.file("features.txt")) + " --labels " + shell_quote(dir.file("labels.txt")) +
                   " --train " + shell_quote(dir.file("train.txt")) + " --val " + shell_quote(dir.file("val.txt")) +
                   " --test " + shell_quote(dir.file("test.txt")) + " --memory 1M -o " + shell_quote(dataset));
  ASSERT_EQ(converted.exit_code, 0) << converted.output;
  std::vector<gid_t> raw_ids;
  for (vid_t v = 0; v < source.num_vertices(); ++v) {
    if (source.graph.in_degree(v) > 0) raw_ids.push_back(spread(v));
  }
  ASSERT_EQ(read_dataset(dataset).vertex_ids, raw_ids);

  const auto metis = dir.file("metis");
  const auto scotch = dir.file("scotch");
  ASSERT_EQ(test::run_nj("partition " + shell_quote(dataset) + " --parts 2 --method metis -o " + shell_quote(metis))
                .exit_code,
            0);
  const auto partitioned =
      test::run_nj_ranks(2, "partition " + shell_quote(dataset) + " --parts 2 -o " + shell_quote(scotch));
  ASSERT_EQ(partitioned.exit_code, 0) << partitioned.output;
  for (const auto& folder : {metis, scotch}) {
    for (int part = 0; part < 2; ++part) {
      for (const gid_t id : load_part(folder, part, 2).local.global_id) {
        ASSERT_TRUE(std::binary_search(raw_ids.begin(), raw_ids.end(), id)) << folder << ": global id " << id;
      }
    }
  }

  const std::string common = " --epochs 4 --threads 1 --hidden 8";
  const auto one =
      test::run_nj("train " + shell_quote(dataset) + common + " --metrics-out " + shell_quote(dir.file("one.jsonl")) +
                   " --save-checkpoint " + shell_quote(dir.file("one.ckpt")));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto expected = losses_of(dir.file("one.jsonl"));
  for (const auto& folder : {metis, scotch}) {
    const auto ranks = test::run_nj_ranks(2, "train --partitions " + shell_quote(folder) + common + " --metrics-out " +
                                                 shell_quote(dir.file("two.jsonl")));
    ASSERT_EQ(ranks.exit_code, 0) << ranks.output;
    const auto got = losses_of(dir.file("two.jsonl"));
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t e = 0; e < got.size(); ++e)
      EXPECT_NEAR(got[e], expected[e], 1e-5) << folder << ", epoch " << e + 1;
  }

  const auto inferred = test::run_nj("infer " + shell_quote(dir.file("one.ckpt")) + " " + shell_quote(dataset) +
                                     " -o " + shell_quote(dir.file("one-out.h5")));
  ASSERT_EQ(inferred.exit_code, 0) << inferred.output;
  const auto on_ranks = test::run_nj_ranks(2, "infer " + shell_quote(dir.file("one.ckpt")) + " --partitions " +
                                                  shell_quote(scotch) + " -o " + shell_quote(dir.file("two-out.h5")));
  ASSERT_EQ(on_ranks.exit_code, 0) << on_ranks.output;
  EXPECT_EQ(read_inference<gid_t>(dir.file("one-out.h5"), "/vertex_ids"), raw_ids);
  EXPECT_EQ(read_inference<gid_t>(dir.file("two-out.h5"), "/vertex_ids"), raw_ids);
  EXPECT_EQ(read_inference<std::int32_t>(dir.file("two-out.h5"), "/predictions"),
            read_inference<std::int32_t>(dir.file("one-out.h5"), "/predictions"));
}

}  // namespace
}  // namespace nj
