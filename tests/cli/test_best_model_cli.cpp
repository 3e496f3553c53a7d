// Keeping the best model and stopping early, as a user runs them: --keep-best keeps the checkpoint of the best
// validation epoch, whose inference reproduces that epoch's accuracies; --early-stop stops where the metrics say,
// and a rerun with --resume of a run that stopped stops again.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "nj/io/dataset_file.hpp"
#include "nj/io/hdf5.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

struct Metrics {
  std::vector<nlohmann::json> epochs;
  nlohmann::json summary;
};

Metrics read_metrics(const std::string& path) {
  Metrics m;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["type"] == "epoch") m.epochs.push_back(record);
    if (record["type"] == "summary") m.summary = record;
  }
  return m;
}

class BestModelCli : public ::testing::Test {
 protected:
  void SetUp() override { write_dataset(dataset_, test::random_dataset(400, 2400, 16, 3, 21)); }
  test::CommandResult train(const std::string& options) const {
    return test::run_nj("train " + shell_quote(dataset_) + " --threads 1 --hidden 8 --lr 0.05 --checkpoint-dir " +
                        shell_quote(folder_) + " --metrics-out " + shell_quote(metrics_) + " " + options);
  }
  test::TempDir dir_;
  std::string dataset_ = dir_.file("data.h5");
  std::string folder_ = dir_.file("checkpoints");
  std::string metrics_ = dir_.file("m.jsonl");
};

TEST_F(BestModelCli, KeepBestKeepsTheBestValidationEpochWhoseInferenceReproducesIt) {
  const auto run = train("--epochs 25 --keep-best");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Metrics m = read_metrics(metrics_);
  ASSERT_EQ(m.epochs.size(), 25U);
  // The best epoch by the metrics themselves: the first of the highest validation accuracy.
  std::size_t best = 0;
  for (std::size_t e = 0; e < m.epochs.size(); ++e) {
    if (m.epochs[e]["val_acc"].get<double>() > m.epochs[best]["val_acc"].get<double>()) best = e;
  }
  ASSERT_LT(best + 1, 25U) << "the data should peak before the last epoch, or the test checks nothing";
  EXPECT_EQ(m.summary["kept"]["epoch"], best + 1);
  EXPECT_EQ(m.summary["kept"]["checkpoint"], folder_ + "/best.h5");
  const std::string out = dir_.file("best-pred.h5");
  const auto inferred = test::run_nj("infer " + shell_quote(folder_ + "/best.h5") + " " + shell_quote(dataset_) +
                                     " --threads 1 -o " + shell_quote(out));
  ASSERT_EQ(inferred.exit_code, 0) << inferred.output;
  const auto file = hdf5::File::open_read(out);
  EXPECT_EQ(file.int_attribute("epochs"), static_cast<std::int64_t>(best + 1));
  EXPECT_EQ(file.float_attribute("val_accuracy"), m.epochs[best]["val_acc"].get<double>());
  EXPECT_EQ(file.float_attribute("test_accuracy"), m.epochs[best]["test_acc"].get<double>());
  EXPECT_NE(run.output.find("kept as best.h5"), std::string::npos) << run.output;
}

TEST_F(BestModelCli, EarlyStopStopsWhereTheMetricsSayAndAResumedRunStopsAgain) {
  const auto run = train("--epochs 300 --early-stop 4 --eval-every 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Metrics m = read_metrics(metrics_);
  ASSERT_LT(m.epochs.size(), 300U);
  EXPECT_EQ(m.summary["stopped"], "early stop");
  EXPECT_EQ(m.summary["epochs_done"], m.epochs.size());
  // The last four evaluations (every second epoch) found nothing better than the best before them, and the
  // evaluations before the best did not run out of patience.
  double best = -1.0;
  int without_better = 0;
  for (const auto& e : m.epochs) {
    if (e["val_acc"].is_null()) continue;
    ASSERT_LT(without_better, 4) << "it should have stopped at epoch " << e["epoch"];
    const double val = e["val_acc"].get<double>();
    without_better = val > best ? 0 : without_better + 1;
    best = std::max(best, val);
  }
  EXPECT_EQ(without_better, 4);
  EXPECT_EQ(m.epochs.size() % 2, 0U);
  EXPECT_NE(
      run.output.find(fmt::format("stopped early after epoch {}: no better val in 4 evaluations", m.epochs.size())),
      std::string::npos)
      << run.output;
  EXPECT_TRUE(std::filesystem::exists(folder_ + fmt::format("/checkpoint-{:06d}.h5", m.epochs.size())));

  const auto again = train("--epochs 300 --early-stop 4 --eval-every 2 --resume");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.output.find("epoch  "), std::string::npos) << "no epoch is trained again\n" << again.output;
  EXPECT_NE(again.output.find("stopped early after epoch"), std::string::npos) << again.output;
}

TEST_F(BestModelCli, KeepBestNeedsAFolderAndEarlyStopEvaluations) {
  EXPECT_NE(test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset_) + " --keep-best"))
                .find("--keep-best needs --checkpoint-dir"),
            std::string::npos);
  EXPECT_NE(
      test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset_) + " --early-stop 3 --eval-every 0"))
          .find("--early-stop counts evaluations: it needs --eval-every above 0"),
      std::string::npos);
}

}  // namespace
}  // namespace nj

namespace nj {
namespace {

// On two ranks, as on one: rank 0 keeps the best checkpoint and every rank stops at the same evaluation.
using MultiRankBestModelCli = BestModelCli;

TEST_F(MultiRankBestModelCli, TwoRanksKeepTheBestAndStopEarlyTogether) {
  if (!test::have_mpirun()) GTEST_SKIP() << "no mpirun";
  const auto run = test::run_nj_ranks(2, "train " + shell_quote(dataset_) +
                                             " --threads 1 --hidden 8 --lr 0.05 --epochs 300 --early-stop 3 "
                                             "--keep-best --checkpoint-dir " +
                                             shell_quote(folder_) + " --metrics-out " + shell_quote(metrics_));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Metrics m = read_metrics(metrics_);
  EXPECT_EQ(m.summary["stopped"], "early stop");
  ASSERT_FALSE(m.summary["best_val_epoch"].is_null());
  EXPECT_EQ(m.summary["kept"]["epoch"], m.summary["best_val_epoch"]);
  EXPECT_EQ(m.summary["epochs_done"].get<std::size_t>(), m.summary["best_val_epoch"].get<std::size_t>() + 3);
  const auto best = hdf5::File::open_read(folder_ + "/best.h5");
  EXPECT_EQ(best.int_attribute("epochs_done"), m.summary["best_val_epoch"].get<std::int64_t>());
}

}  // namespace
}  // namespace nj
