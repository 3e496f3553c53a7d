// nj train under mpirun as a user runs it: one rank's failure ends the job, each of four ranks holds a fraction
// of what one process holds, errors are one line, and several ranks print the losses one process prints.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

nlohmann::json summary_of(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  std::string last;
  for (std::string line; std::getline(in, line);) last = line;
  const auto record = nlohmann::json::parse(last);
  EXPECT_EQ(record["type"], "summary") << metrics_path;
  return record;
}

// The loss of every epoch line as printed (4 decimals).
std::vector<std::string> printed_losses(const std::string& output) {
  static const std::regex epoch_loss(R"(epoch +\d+ \| loss (\S+))");
  std::vector<std::string> losses;
  for (std::sregex_iterator it(output.begin(), output.end(), epoch_loss), end; it != end; ++it) {
    losses.push_back((*it)[1]);
  }
  return losses;
}

// Under mpirun the output holds nj's error line and mpirun's own report of the abort. The line must appear
// exactly once and whole: several ranks printing the same error repeat it, or interleave it mid-line.
class MultiRankCli : public ::testing::Test {
 protected:
  void SetUp() override {
    NJ_SKIP_WITHOUT_MPIRUN();
    const auto generated = test::run_nj(
        "generate --vertices 2000 --edges 20000 --features 16 --classes 4 --seed 3 -o " + shell_quote(dataset_));
    ASSERT_EQ(generated.exit_code, 0) << generated.output;
  }

  void partition(int parts) {
    const auto result = test::run_nj("partition " + shell_quote(dataset_) + " --parts " + std::to_string(parts) +
                                     " --method metis -o " + shell_quote(parts_));
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }

  test::TempDir dir_;
  std::string dataset_ = dir_.file("small.h5");
  std::string parts_ = dir_.file("parts");
};

// `nj plan` on a partition folder says per rank what `nj train --partitions` then moves: rank 0's host-device
// bytes, as its metrics record them, and the exchange's bytes, summed over the ranks, in all and per layer and
// direction. Within a budget, and without one at hidden 16 on the 16 features, where the first layer sums its
// inputs (it sends them, and no gradients).
TEST_F(MultiRankCli, PlanOfAPartitionFolderIsWhatTrainingMoves) {
  partition(2);
  for (const std::string options :
       {" --execution reuse --device-memory 256K --hidden 8", " --execution reuse --hidden 16"}) {
    SCOPED_TRACE(options);
    const auto planned = test::run_nj("--log-level warn plan " + shell_quote(parts_) + options + " --json");
    ASSERT_EQ(planned.exit_code, 0) << planned.output;
    const auto plan = nlohmann::json::parse(planned.output);
    ASSERT_EQ(plan["ranks"].size(), 2U) << plan;
    std::int64_t planned_exchange = 0;
    for (const auto& rank : plan["ranks"]) planned_exchange += rank["exchange_bytes_sent"].get<std::int64_t>();
    EXPECT_GT(planned_exchange, 0);
    for (const auto& rank : plan["ranks"]) {
      EXPECT_GT(rank["owned_reading_mirrors"], 0) << rank;
      EXPECT_LE(rank["owned_reading_mirrors"], rank["owned"]) << rank;
    }

    const auto metrics = dir_.file("m.jsonl");
    const auto trained =
        test::run_nj_ranks(2, "train --partitions " + shell_quote(parts_) + options +
                                  " --epochs 2 --eval-every 0 --threads 1 --metrics-out " + shell_quote(metrics));
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    std::ifstream in(metrics);
    int epochs = 0;
    for (std::string line; std::getline(in, line);) {
      const auto record = nlohmann::json::parse(line);
      if (record["type"] != "epoch") continue;
      ++epochs;
      for (const auto& [key, forecast] : plan["ranks"][0]["execution"].items()) {
        EXPECT_EQ(record["execution"][key], forecast) << key;
      }
      std::int64_t exchanged = 0;
      for (const auto& layer : record["over_ranks"]["exchange"]) {
        exchanged +=
            layer["forward"]["bytes_sent"].get<std::int64_t>() + layer["backward"]["bytes_sent"].get<std::int64_t>();
        // Layer by layer and direction, too.
        const auto l = layer["layer"].get<std::size_t>() - 1;
        for (const auto& [direction, key] : {std::pair{"forward", "forward_bytes"}, {"backward", "backward_bytes"}}) {
          std::int64_t planned_bytes = 0;
          for (const auto& rank : plan["ranks"]) planned_bytes += rank["exchange"][l][key].get<std::int64_t>();
          EXPECT_EQ(layer[direction]["bytes_sent"], planned_bytes) << "layer " << l + 1 << " " << direction;
        }
      }
      EXPECT_EQ(exchanged, planned_exchange);
    }
    EXPECT_EQ(epochs, 2);
  }
}

// A rank killed outright (SIGKILL, no chance to abort) in the middle of training: every other rank must end,
// non-zero, within 30 seconds, and none may be left running.
TEST_F(MultiRankCli, AKilledRankEndsEveryOtherRankWithinThirtySeconds) {
  const std::string marker = dir_.file("killed-run.jsonl");
  std::ofstream(dir_.file("kill.sh")) << R"sh(
job_marker="$1"; shift
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 \
  timeout 120 mpirun -np 4 --oversubscribe "$@" --metrics-out "$job_marker" </dev/null >/dev/null 2>&1 &
job=$!
# Training runs once rank 0 has written an epoch.
for _ in $(seq 600); do grep -q '"type":"epoch"' "$job_marker" 2>/dev/null && break; sleep 0.1; done
victim=$(pgrep -f -- "--metrics-out $job_marker" | while read -r pid; do
  [ "$(ps -o comm= -p "$pid")" = nj ] && echo "$pid"; done | sed -n 2p)
[ -n "$victim" ] || { echo "no rank to kill"; exit 2; }
kill -9 "$victim"
start=$(date +%s%N)
wait "$job"; status=$?
echo "status $status after $(( ($(date +%s%N) - start) / 1000000 )) ms"
sleep 1
pgrep -f -- "--metrics-out $job_marker" >/dev/null && echo "ranks left"
exit 0
)sh";
  const auto result =
      test::run_shell("bash " + shell_quote(dir_.file("kill.sh")) + " " + shell_quote(marker) + " '" + NJ_BINARY +
                      "' train " + shell_quote(dataset_) + " --epochs 100000 --eval-every 0 --threads 1");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  static const std::regex ended(R"(status (\d+) after (\d+) ms)");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(result.output, match, ended)) << result.output;
  EXPECT_NE(std::stoi(match[1]), 0) << "the job must fail";
  EXPECT_LT(std::stoi(match[2]), 30000) << result.output;
  EXPECT_EQ(result.output.find("ranks left"), std::string::npos) << result.output;
}

TEST_F(MultiRankCli, InjectedFailureEndsEveryRankWithinSeconds) {
  const auto start = std::chrono::steady_clock::now();
  // Enough epochs that ranks left waiting on rank 1 would still be running when the limit kills the job.
  const auto result = test::run_nj_ranks(
      3, "train " + shell_quote(dataset_) + " --epochs 500 --threads 1 --inject-failure 1:2", std::chrono::seconds(60));
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed.count(), 30.0) << result.output;
  EXPECT_NE(result.exit_code, 124) << "the job was still running after 60 s:\n" << result.output;
  EXPECT_EQ(test::the_error_line(result), "nj: error: rank 1: injected failure in epoch 2");
  // Rank 1 fails before the epoch's all-reduce, so no rank gets past epoch 1.
  EXPECT_EQ(printed_losses(result.output).size(), 1U) << result.output;
}

TEST_F(MultiRankCli, FailureWhileTheSubgraphExecutorExchangesEndsEveryRank) {
  // Within a device budget the ranks exchange inside the pass: rank 2 fails with the backward exchange ahead.
  const auto result = test::run_nj_ranks(
      3, "train " + shell_quote(dataset_) + " --epochs 500 --threads 1 --device-memory 2M --inject-failure 2:3",
      std::chrono::seconds(60));
  EXPECT_NE(result.exit_code, 124) << "the job was still running after 60 s:\n" << result.output;
  EXPECT_EQ(test::the_error_line(result), "nj: error: rank 2: injected failure in epoch 3");
}

TEST_F(MultiRankCli, ASetUpFailureOnOneRankIsReportedOnceByThatRank) {
  partition(3);
  std::filesystem::remove(std::filesystem::path(parts_) / "part-2.h5");
  const auto result =
      test::run_nj_ranks(3, "train --partitions " + shell_quote(parts_) + " --threads 1", std::chrono::seconds(60));
  EXPECT_NE(result.exit_code, 124) << "the job hung:\n" << result.output;
  const auto line = test::the_error_line(result);
  EXPECT_TRUE(line.starts_with("nj: error: rank 2: ")) << line;
  EXPECT_NE(line.find("part-2.h5"), std::string::npos) << line;
}

TEST_F(MultiRankCli, ShardsOfDifferentPartitionsAreAnError) {
  const auto other = dir_.file("other");
  for (const auto& [folder, seed] : {std::pair{parts_, 1}, std::pair{other, 2}}) {
    const auto result = test::run_nj("partition " + shell_quote(dataset_) + " --parts 2 --method random --seed " +
                                     std::to_string(seed) + " -o " + shell_quote(folder));
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  std::filesystem::copy_file(std::filesystem::path(other) / "part-1.h5", std::filesystem::path(parts_) / "part-1.h5",
                             std::filesystem::copy_options::overwrite_existing);
  const auto result =
      test::run_nj_ranks(2, "train --partitions " + shell_quote(parts_) + " --threads 1", std::chrono::seconds(60));
  EXPECT_NE(test::the_error_line(result).find("different partitions"), std::string::npos) << result.output;
}

TEST_F(MultiRankCli, OnlyGeneratingPartitioningTrainingAndInferenceRunAsSeveralRanks) {
  const auto edges = dir_.file("edges.txt");
  std::ofstream(edges) << "0 1\n1 2\n";
  const auto written = dir_.file("written.h5");
  const auto result =
      test::run_nj_ranks(2, "convert --format edgelist " + shell_quote(edges) + " -o " + shell_quote(written));
  EXPECT_NE(test::the_error_line(result).find("nj convert runs as one process"), std::string::npos) << result.output;
  EXPECT_FALSE(std::filesystem::exists(written)) << "a rank wrote the dataset";
}

TEST_F(MultiRankCli, PartCountOtherThanRanksIsOneLineNamingBoth) {
  partition(2);
  const auto result = test::run_nj_ranks(3, "train --partitions " + shell_quote(parts_) + " --threads 1");
  const auto line = test::the_error_line(result);
  EXPECT_NE(line.find("2 parts"), std::string::npos) << line;
  EXPECT_NE(line.find("3 ranks"), std::string::npos) << line;
}

TEST_F(MultiRankCli, RecomputeOnSeveralRanksIsOneLine) {
  const auto result = test::run_nj_ranks(2, "train " + shell_quote(dataset_) + " --execution recompute --threads 1");
  EXPECT_NE(test::the_error_line(result).find("recompute"), std::string::npos) << result.output;
}

TEST_F(MultiRankCli, DatasetAndPartitionsTogetherOrNeitherIsAnError) {
  partition(2);
  const auto both = test::run_nj("train " + shell_quote(dataset_) + " --partitions " + shell_quote(parts_));
  EXPECT_NE(test::expect_one_line_error(both).find("--partitions"), std::string::npos);
  const auto neither = test::run_nj("train --epochs 1");
  EXPECT_NE(test::expect_one_line_error(neither).find("--partitions"), std::string::npos);
}

TEST_F(MultiRankCli, TwoRanksPrintTheLossesOfOneProcessAndRecordThePartition) {
  partition(2);
  // In memory (auto, without a budget), and within a budget: each rank's subgraphs cut in its community-ordered ids.
  for (const std::string executor : {"", " --execution reuse --device-memory 256K --hidden 8"}) {
    SCOPED_TRACE(executor);
    const std::string common = executor + " --epochs 5 --threads 1 --metrics-out ";
    const auto single =
        test::run_nj("train " + shell_quote(dataset_) + common + shell_quote(dir_.file("single.jsonl")));
    ASSERT_EQ(single.exit_code, 0) << single.output;
    const auto expected = printed_losses(single.output);
    ASSERT_EQ(expected.size(), 5U) << single.output;

    // From the shards of nj partition, partitioned in memory by every rank, and by default in parallel.
    const std::vector<std::array<std::string, 3>> runs = {
        {"--partitions " + shell_quote(parts_), dir_.file("shards.jsonl"), "metis"},
        {shell_quote(dataset_) + " --partition-method metis", dir_.file("in-memory.jsonl"), "metis"},
        {shell_quote(dataset_), dir_.file("parallel.jsonl"), "scotch"}};
    for (const auto& [input, metrics, method] : runs) {
      SCOPED_TRACE(input);
      const auto result = test::run_nj_ranks(2, "train " + input + common + shell_quote(metrics));
      ASSERT_EQ(result.exit_code, 0) << result.output;
      EXPECT_EQ(printed_losses(result.output), expected) << result.output;
      const auto partition = summary_of(metrics)["partition"];
      EXPECT_EQ(partition["method"], method) << partition;
      EXPECT_EQ(partition["parts"], 2) << partition;
      EXPECT_EQ(partition["ranks"], 2) << partition;
      EXPECT_GT(partition["edge_cut"].get<std::int64_t>(), 0) << partition;
    }
  }
}

// Each of four ranks loads only its shard: its owned quarter of the vertices, their in-edges and the rows of its
// mirrors. Features dominate (128 floats a vertex), and METIS keeps the mirrors near the owned count on this
// graph, so a rank's peak above its starting resident memory stays well under half of one process's.
TEST(MultiRankMemory, FourRanksPeakAtMostFortyPercentOfOneProcess) {
  NJ_SKIP_WITHOUT_MPIRUN();
  test::TempDir dir;
  const auto dataset = dir.file("big.h5");
  const auto parts = dir.file("parts");
  const auto generated = test::run_nj(
      "generate --vertices 200000 --edges 2000000 --features 128 --classes 16 --seed 1 -o " + shell_quote(dataset));
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  const auto partitioned =
      test::run_nj("partition " + shell_quote(dataset) + " --parts 4 --method metis -o " + shell_quote(parts));
  ASSERT_EQ(partitioned.exit_code, 0) << partitioned.output;

  const auto single_metrics = dir.file("single.jsonl");
  const auto single = test::run_nj("train " + shell_quote(dataset) + " --epochs 1 --threads 1 --metrics-out " +
                                   shell_quote(single_metrics));
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto multi_metrics = dir.file("multi.jsonl");
  const auto multi = test::run_nj_ranks(4, "train --partitions " + shell_quote(parts) +
                                               " --epochs 1 --threads 1 --metrics-out " + shell_quote(multi_metrics));
  ASSERT_EQ(multi.exit_code, 0) << multi.output;

  const double one_process = summary_of(single_metrics)["host_peak_above_baseline_bytes"]["max"].get<double>();
  const double four_ranks = summary_of(multi_metrics)["host_peak_above_baseline_bytes"]["max"].get<double>();
  ASSERT_GT(one_process, 0.0);
  EXPECT_LE(four_ranks, 0.4 * one_process)
      << "largest rank peak " << four_ranks / 1e6 << " MB, one process " << one_process / 1e6 << " MB";
}

}  // namespace
}  // namespace nj
