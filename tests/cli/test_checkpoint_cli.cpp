// Going on from a checkpoint as a user does: options the model does not use do not matter, another learning rate is
// fine-tuning, model options not given come from the checkpoint, and a checkpoint with nothing left to train says
// so and succeeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nj/io/dataset_file.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

class CheckpointCli : public ::testing::Test {
 protected:
  void SetUp() override { write_dataset(dataset_, test::random_dataset(200, 800, 8, 3, 2)); }
  test::CommandResult train(const std::string& options) const {
    return test::run_nj("train " + shell_quote(dataset_) + " --threads 1 " + options);
  }
  test::TempDir dir_;
  std::string dataset_ = dir_.file("data.h5");
  std::string folder_ = dir_.file("checkpoints");
  std::string checkpoint_ = dir_.file("c.h5");
};

TEST_F(CheckpointCli, AGcnCheckpointIgnoresTheOptionsOnlyAGatUses) {
  ASSERT_EQ(train("--epochs 2 --checkpoint-dir " + shell_quote(folder_)).exit_code, 0);
  const auto resumed = train("--epochs 3 --heads 4 --output-heads 2 --attention-dropout 0.1 --checkpoint-dir " +
                             shell_quote(folder_) + " --resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + folder_ + "/checkpoint-000002.h5: 2 epochs done"), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find("epoch    3 |"), std::string::npos) << resumed.output;
}

TEST_F(CheckpointCli, AnotherLearningRateIsFineTuningAndTheLogSaysSo) {
  ASSERT_EQ(train("--epochs 2 --save-checkpoint " + shell_quote(checkpoint_)).exit_code, 0);
  const auto tuned = train("--epochs 4 --lr 0.001 --load-checkpoint " + shell_quote(checkpoint_));
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  EXPECT_NE(tuned.output.find(checkpoint_ + ": trained at lr 0.01, going on at lr 0.001 (fine-tuning)"),
            std::string::npos)
      << tuned.output;
  const auto same = train("--epochs 4 --load-checkpoint " + shell_quote(checkpoint_));
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_EQ(same.output.find("fine-tuning"), std::string::npos) << same.output;
}

TEST_F(CheckpointCli, ModelOptionsNotGivenComeFromTheCheckpoint) {
  const std::string metrics = dir_.file("m.jsonl");
  ASSERT_EQ(train("--model gat --heads 2 --hidden 4 --dropout 0.3 --epochs 2 --checkpoint-dir " + shell_quote(folder_))
                .exit_code,
            0);
  for (const std::string& from : {"--load-checkpoint " + shell_quote(folder_ + "/checkpoint-000002.h5"),
                                  "--checkpoint-dir " + shell_quote(folder_) + " --resume"}) {
    SCOPED_TRACE(from);
    const auto resumed = train("--epochs 3 --metrics-out " + shell_quote(metrics) + " " + from);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("model: the options not given are the checkpoint's: gat, 2 layers, hidden 4, heads "
                                  "2, output heads 1, activation elu, dropout 0.3, attention dropout 0.6, seed 0"),
              std::string::npos)
        << resumed.output;
    std::ifstream in(metrics);
    std::string last;
    for (std::string line; std::getline(in, line);) last = line;
    EXPECT_EQ(nlohmann::json::parse(last)["model"]["kind"], "gat");
  }
  // One given on the command line is this run's, and refused where it differs.
  const auto other =
      train("--epochs 3 --model gcn --load-checkpoint " + shell_quote(folder_ + "/checkpoint-000002.h5"));
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("written by a different run: model: checkpoint has 'gat"), std::string::npos)
      << other.output;
}

// --load-checkpoint refuses a checkpoint trained on another graph, saying what differs, unless --allow-other-graph
// is given (fine-tuning, transfer): then one warning says so, and the dataset and partitioning are not compared.
TEST_F(CheckpointCli, AnotherGraphsCheckpointIsRefusedUnlessAllowed) {
  ASSERT_EQ(train("--epochs 2 --save-checkpoint " + shell_quote(checkpoint_)).exit_code, 0);
  const Dataset data = read_dataset(dataset_);
  const std::string trained_on = checkpoint_ + " was trained on graph 'random' (200 vertices, " +
                                 std::to_string(data.graph.num_edges()) + " edges)";
  const std::string shifted = dir_.file("shifted.h5");
  write_dataset(shifted, test::with_edges_shifted(data));
  const auto load = [&](const std::string& path, const std::string& options) {
    return test::run_nj("train " + shell_quote(path) + " --threads 1 --epochs 3 --load-checkpoint " +
                        shell_quote(checkpoint_) + " " + options);
  };
  EXPECT_EQ(test::the_error_line(load(shifted, "")),
            "nj: error: " + trained_on +
                ", not on this graph of the same name and counts: the structure differs; give --allow-other-graph to "
                "use it anyway");
  Dataset other = test::random_dataset(150, 600, 8, 3, 4);
  other.name = "other";
  const std::string other_path = dir_.file("other.h5");
  write_dataset(other_path, other);
  const std::string difference = trained_on + ", not on graph 'other' (150 vertices, " +
                                 std::to_string(other.graph.num_edges()) +
                                 " edges): the name, vertex count and edge count differ";
  EXPECT_EQ(test::the_error_line(load(other_path, "")),
            "nj: error: " + difference + "; give --allow-other-graph to use it anyway");
  const auto allowed = load(other_path, "--allow-other-graph");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.output;
  EXPECT_NE(allowed.output.find(difference + "; using it anyway (--allow-other-graph)\n"), std::string::npos)
      << allowed.output;
  EXPECT_NE(allowed.output.find("resumed from " + checkpoint_ + ": 2 epochs done, continuing at epoch 3"),
            std::string::npos)
      << allowed.output;
  // Allowed or not, the model must be the checkpoint's.
  EXPECT_NE(test::the_error_line(load(other_path, "--allow-other-graph --hidden 32"))
                .find("written by a different run: model: "),
            std::string::npos);
}

// A checkpoint nj wrote before format 3 records no graph: it is taken with a warning that it cannot be checked, and
// its arrays, named by the layers as the model built them, go on training.
TEST_F(CheckpointCli, AFormatTwoCheckpointGoesOnWithAWarning) {
  const std::string fixtures = std::string(NJ_SOURCE_DIR) + "/tests/fixtures/format2/";
  const auto run = test::run_nj("train " + shell_quote(fixtures + "graph.h5") + " --threads 1 --epochs 4 " +
                                "--load-checkpoint " + shell_quote(fixtures + "gin.h5"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("gin.h5: records no graph (a checkpoint of format 2 or older): cannot check that it was "
                            "trained on this one"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("gin.h5: 3 epochs done, continuing at epoch 4"), std::string::npos) << run.output;
}

TEST_F(CheckpointCli, NothingLeftToTrainIsOneLineAndSuccess) {
  ASSERT_EQ(train("--epochs 3 --save-checkpoint " + shell_quote(checkpoint_)).exit_code, 0);
  for (const std::string epochs : {"3", "2"}) {
    SCOPED_TRACE(epochs);
    const auto again = train("--epochs " + epochs + " --load-checkpoint " + shell_quote(checkpoint_) +
                             " --metrics-out " + shell_quote(dir_.file("m.jsonl")));
    ASSERT_EQ(again.exit_code, 0) << again.output;
    const std::string line =
        "nothing to train: " + checkpoint_ + " has 3 epochs done, and --epochs asks for " + epochs + " (give more";
    EXPECT_NE(again.output.find(line), std::string::npos) << again.output;
    EXPECT_EQ(again.output.find("epoch    "), std::string::npos) << again.output;
    EXPECT_EQ(again.output.find("done: "), std::string::npos) << again.output;
    EXPECT_EQ(again.output.find("continuing at"), std::string::npos) << again.output;
    EXPECT_FALSE(std::filesystem::exists(dir_.file("m.jsonl")));
  }
  const auto quiet = train("--epochs 3 --log-level warn --load-checkpoint " + shell_quote(checkpoint_));
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_TRUE(quiet.output.starts_with("nothing to train: ")) << quiet.output;
  EXPECT_EQ(std::count(quiet.output.begin(), quiet.output.end(), '\n'), 1) << quiet.output;
}

}  // namespace
}  // namespace nj
