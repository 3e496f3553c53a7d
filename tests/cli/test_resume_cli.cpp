// Checkpoints and --resume as a user's job meets them: killed in the middle of an epoch or of a checkpoint
// write, on one rank or two, in memory or within a device budget, then resumed, it ends with the weights an
// uninterrupted run ends with, bit for bit; and a checkpoint of a different run is refused, saying what differs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nj/io/dataset_file.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

struct ResumeCase {
  int ranks;
  const char* execution;  // extra nj train options
};

void PrintTo(const ResumeCase& c, std::ostream* out) { *out << c.ranks << " ranks," << c.execution; }

std::vector<nlohmann::json> epoch_records(const std::string& metrics) {
  std::vector<nlohmann::json> records;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line);
    if (record["type"] == "epoch") records.push_back(std::move(record));
  }
  return records;
}

// h5diff without a tolerance: the parameters and Adam's moments of two checkpoints, bit for bit.
std::string checkpoint_differences(const std::string& a, const std::string& b) {
  std::string differences;
  for (const char* group : {"/params", "/adam_m", "/adam_v"}) {
    const auto result =
        test::run_shell("h5diff " + shell_quote(a) + " " + shell_quote(b) + " " + group + " " + group + " 2>&1");
    if (result.exit_code != 0) differences += group + std::string(": ") + result.output;
  }
  return differences;
}

class ResumeCli : public ::testing::TestWithParam<ResumeCase> {
 protected:
  void SetUp() override {
    if (GetParam().ranks > 1) NJ_SKIP_WITHOUT_MPIRUN();
    const auto generated = test::run_nj(
        "generate --vertices 1500 --edges 12000 --features 16 --classes 4 --seed 5 -o " + shell_quote(dataset_));
    ASSERT_EQ(generated.exit_code, 0) << generated.output;
  }

  test::CommandResult train(const std::string& options) const {
    const std::string arguments = "train " + shell_quote(dataset_) + " --epochs 6 --checkpoint-every 2 --threads 1 " +
                                  GetParam().execution + " " + options;
    return GetParam().ranks == 1 ? test::run_nj(arguments)
                                 : test::run_nj_ranks(GetParam().ranks, arguments, std::chrono::seconds(120));
  }

  // The uninterrupted run: its final checkpoint and its epochs' records.
  void train_straight() {
    const auto result = train("--checkpoint-dir " + shell_quote(dir_.file("straight")) + " --save-checkpoint " +
                              shell_quote(straight_) + " --metrics-out " + shell_quote(straight_metrics_));
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }

  // Resumes the killed run's folder to the end and compares it with the straight run.
  void resume_and_compare(const std::string& expected_source) {
    const auto result = train("--checkpoint-dir " + shell_quote(folder_) + " --resume --save-checkpoint " +
                              shell_quote(resumed_) + " --metrics-out " + shell_quote(resumed_metrics_));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("resumed from " + expected_source), std::string::npos) << result.output;
    EXPECT_EQ(checkpoint_differences(straight_, resumed_), "");
    // The resumed run appends to the killed run's log: together, every epoch's loss as the straight run had it.
    const auto straight = epoch_records(straight_metrics_);
    const auto resumed = epoch_records(resumed_metrics_);
    ASSERT_EQ(straight.size(), 6U);
    ASSERT_GE(resumed.size(), 6U);
    for (std::size_t e = 0; e < straight.size(); ++e) {
      const auto& last_record_of_epoch = *std::find_if(
          resumed.rbegin(), resumed.rend(), [&](const auto& r) { return r["epoch"] == straight[e]["epoch"]; });
      EXPECT_EQ(last_record_of_epoch["loss"], straight[e]["loss"]) << "epoch " << e;
    }
  }

  int last_rank() const { return GetParam().ranks - 1; }

  test::TempDir dir_;
  std::string dataset_ = dir_.file("graph.h5");
  std::string folder_ = dir_.file("checkpoints");
  std::string straight_ = dir_.file("straight.h5");
  std::string resumed_ = dir_.file("resumed.h5");
  std::string straight_metrics_ = dir_.file("straight.jsonl");
  std::string resumed_metrics_ = dir_.file("resumed.jsonl");
};

TEST_P(ResumeCli, ARunKilledInTheMiddleOfAnEpochResumesToTheSameWeights) {
  train_straight();
  // The last rank dies (SIGKILL) in epoch 5, after the checkpoint of epoch 4.
  const auto killed =
      train("--checkpoint-dir " + shell_quote(folder_) + " --metrics-out " + shell_quote(resumed_metrics_) +
            " --inject-failure " + std::to_string(last_rank()) + ":5:kill");
  ASSERT_NE(killed.exit_code, 0) << killed.output;
  EXPECT_TRUE(std::filesystem::exists(folder_ + "/checkpoint-000004.h5")) << killed.output;
  EXPECT_FALSE(std::filesystem::exists(folder_ + "/checkpoint-000006.h5")) << killed.output;
  resume_and_compare(folder_ + "/checkpoint-000004.h5");
}

TEST_P(ResumeCli, AKillDuringACheckpointWriteLeavesThePreviousCheckpointUsable) {
  train_straight();
  const auto killed = train("--checkpoint-dir " + shell_quote(folder_) + " --metrics-out " +
                            shell_quote(resumed_metrics_) + " --inject-failure 0:4:kill-in-checkpoint");
  ASSERT_NE(killed.exit_code, 0) << killed.output;
  EXPECT_TRUE(std::filesystem::exists(folder_ + "/checkpoint-000004.h5.partial")) << killed.output;
  EXPECT_FALSE(std::filesystem::exists(folder_ + "/checkpoint-000004.h5")) << killed.output;
  resume_and_compare(folder_ + "/checkpoint-000002.h5");
}

INSTANTIATE_TEST_SUITE_P(RanksAndExecutions, ResumeCli,
                         ::testing::Values(ResumeCase{1, ""}, ResumeCase{1, "--device-memory 256K"}, ResumeCase{2, ""},
                                           ResumeCase{2, "--device-memory 256K"}),
                         [](const auto& test_info) {
                           return std::to_string(test_info.param.ranks) + "ranks_" +
                                  (test_info.param.execution[0] == '\0' ? "in_memory" : "budget");
                         });

class ResumeRefusalCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto generated = test::run_nj("generate --vertices 300 --edges 1500 --features 8 --classes 3 --seed 2 -o " +
                                        shell_quote(dataset_));
    ASSERT_EQ(generated.exit_code, 0) << generated.output;
  }
  std::string train(const std::string& options) const {
    return "train " + shell_quote(dataset_) + " --epochs 2 --checkpoint-dir " + shell_quote(folder_) + " " + options;
  }
  test::TempDir dir_;
  std::string dataset_ = dir_.file("graph.h5");
  std::string folder_ = dir_.file("checkpoints");
};

TEST_F(ResumeRefusalCli, ADifferentModelOrOptimizerIsRefusedSayingWhichAndHow) {
  ASSERT_EQ(test::run_nj(train("--hidden 16")).exit_code, 0);
  const auto line = test::the_error_line(test::run_nj(train("--hidden 32 --weight-decay 0.1 --resume")));
  EXPECT_NE(line.find("checkpoint-000002.h5: written by a different run: model: checkpoint has 'gcn, 2 layers, "
                      "hidden 16"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("this run has 'gcn, 2 layers, hidden 32"), std::string::npos) << line;
  EXPECT_NE(line.find("; optimizer: checkpoint has 'Adam betas 0.9 0.999, eps 1e-08, weight decay 0.0005"),
            std::string::npos)
      << line;
}

TEST_F(ResumeRefusalCli, ADifferentDatasetIsRefused) {
  ASSERT_EQ(test::run_nj(train("")).exit_code, 0);
  const auto line = test::the_error_line(test::run_nj(train("--feature-norm row --resume")));
  EXPECT_NE(line.find("dataset: checkpoint has "), std::string::npos) << line;
}

// A graph of the same name and counts is another run's where its edges differ: --resume must be the same run, and
// no option allows another graph there.
TEST_F(ResumeRefusalCli, AnotherStructureIsRefused) {
  ASSERT_EQ(test::run_nj(train("")).exit_code, 0);
  write_dataset(dataset_, test::with_edges_shifted(read_dataset(dataset_)));
  const auto line = test::the_error_line(test::run_nj(train("--epochs 3 --resume --allow-other-graph")));
  EXPECT_NE(line.find("checkpoint-000002.h5: written by a different run: graph structure: checkpoint has '"),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find("dataset:"), std::string::npos) << line;
}

TEST_F(ResumeRefusalCli, ADifferentPartitioningIsRefused) {
  NJ_SKIP_WITHOUT_MPIRUN();
  ASSERT_EQ(test::run_nj_ranks(2, train("--threads 1"), std::chrono::seconds(120)).exit_code, 0);
  const auto line = test::the_error_line(test::run_nj(train("--resume")));
  EXPECT_NE(line.find("partitioning: checkpoint has '2 ranks, scotch partition"), std::string::npos) << line;
  EXPECT_NE(line.find("this run has 'one rank, the whole graph'"), std::string::npos) << line;
}

TEST_F(ResumeRefusalCli, ResumeNeedsAFolderAndStartsAfreshInAnEmptyOne) {
  test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset_) + " --resume"));
  test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset_) + " --checkpoint-every 2"));
  const auto fresh = test::run_nj(train("--resume"));
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  EXPECT_NE(fresh.output.find("resume: no checkpoint in " + folder_ + ": starting at epoch 1"), std::string::npos)
      << fresh.output;
  // The finished run's checkpoint: resuming it trains nothing more.
  const auto again = test::run_nj(train("--resume"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("2 epochs done"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("epoch    1 |"), std::string::npos) << again.output;
}

}  // namespace
}  // namespace nj
