// What nj train's log looks like: colour only where a user sees a terminal, the level set before or after the
// subcommand with the summary line kept at quiet levels, epochs counted from 1 wherever they appear, and each field
// of the epoch line reading as what it means.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "nj/io/dataset_file.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

// An ANSI colour sequence ("\033[32m"), as spdlog colours a level's name; the progress bar's erase ("\r\033[K") is
// not one.
bool coloured(const std::string& output) {
  static const std::regex colour("\033\\[[0-9;]*m");
  return std::regex_search(output, colour);
}

std::vector<int> numbers(const std::string& text, const std::regex& pattern) {
  std::vector<int> found;
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it)
    found.push_back(std::stoi((*it)[1]));
  return found;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class LogCli : public ::testing::Test {
 protected:
  void SetUp() override { write_dataset(dataset_, test::random_dataset(200, 800, 8, 3, 2)); }
  std::string train(const std::string& options) const { return "train " + shell_quote(dataset_) + " " + options; }

  test::TempDir dir_;
  std::string dataset_ = dir_.file("data.h5");
};

TEST_F(LogCli, ColourOnATerminalOnlyUnlessAskedAndNeverWithNoColor) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "script(1) is not installed";
  const std::string run = train("--epochs 1");
  EXPECT_FALSE(coloured(test::run_nj(run).output)) << "a pipe is not a terminal";
  EXPECT_TRUE(coloured(test::run_nj(run + " --color always").output));
  EXPECT_TRUE(coloured(test::run_nj_in_terminal(run).output));
  EXPECT_FALSE(coloured(test::run_nj_in_terminal(run + " --color never").output));
  const auto no_color =
      test::run_shell("NO_COLOR=1 script -qec \"'" + std::string(NJ_BINARY) + "' " + run + "\" /dev/null </dev/null");
  ASSERT_EQ(no_color.exit_code, 0) << no_color.output;
  EXPECT_FALSE(coloured(no_color.output)) << no_color.output;
  EXPECT_TRUE(coloured(test::run_nj(run + " --color always", "NO_COLOR=1").output)) << "--color always wins";
  test::expect_one_line_error(test::run_nj(run + " --color sometimes"));
}

TEST_F(LogCli, TheLevelFollowsTheSubcommandAndQuietLevelsStillEndWithTheSummary) {
  const std::regex summary(R"((?:^|\n)done: final test \S+ \| best val \S+ at epoch (\d+))");
  for (const std::string level : {"warn", "error", "off"}) {
    SCOPED_TRACE(level);
    const auto result = test::run_nj(train("--epochs 2 --log-level " + level));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_EQ(result.output.find("[info]"), std::string::npos) << result.output;
    EXPECT_EQ(numbers(result.output, summary).size(), 1U) << result.output;
  }
  const auto before = test::run_nj("--log-level warn " + train("--epochs 2"));
  ASSERT_EQ(before.exit_code, 0) << before.output;
  EXPECT_EQ(before.output.find("[info]"), std::string::npos) << before.output;
  EXPECT_EQ(numbers(before.output, summary).size(), 1U) << before.output;
  // At the default level too, the summary is the result, not a log line.
  const auto info = test::run_nj(train("--epochs 2 --log-level info"));
  EXPECT_NE(info.output.find("[info] epoch    2"), std::string::npos) << info.output;
  EXPECT_EQ(numbers(info.output, summary).size(), 1U) << info.output;
  EXPECT_EQ(info.output.find("[info] done:"), std::string::npos) << info.output;
}

TEST_F(LogCli, EpochsAreCountedFromOneInTheLogTheMetricsTheSummaryAndTheCheckpoint) {
  const std::string metrics = dir_.file("m.jsonl");
  const std::string checkpoint = dir_.file("c.h5");
  const auto result = test::run_nj(
      train("--epochs 3 --metrics-out " + shell_quote(metrics) + " --save-checkpoint " + shell_quote(checkpoint)));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::vector<int> logged = numbers(result.output, std::regex(R"(epoch +(\d+) \| loss)"));
  EXPECT_EQ(logged, (std::vector<int>{1, 2, 3})) << result.output;
  std::vector<int> recorded;
  nlohmann::json summary;
  std::istringstream lines(file_text(metrics));
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["type"] == "epoch") recorded.push_back(record["epoch"].get<int>());
    if (record["type"] == "summary") summary = record;
  }
  EXPECT_EQ(recorded, logged);
  const std::vector<int> best = numbers(result.output, std::regex(R"(best val \S+ at epoch (\d+))"));
  ASSERT_EQ(best.size(), 1U) << result.output;
  EXPECT_EQ(summary["best_val_epoch"], best.front());
  const auto info = test::run_nj("info --json " + shell_quote(checkpoint));
  ASSERT_EQ(info.exit_code, 0) << info.output;
  const auto held = nlohmann::json::parse(info.output);
  EXPECT_EQ(held["epochs_done"], 3);
  EXPECT_EQ(held["best_val_epoch"], best.front());
}

TEST_F(LogCli, EachFieldOfTheEpochLineReadsAsWhatItMeans) {
  const auto reuse = test::run_nj(train("--epochs 1 --device-memory 32K"));
  ASSERT_EQ(reuse.exit_code, 0) << reuse.output;
  const std::string bytes = R"([\d.]+[KMGB]?)";  // format_bytes: 780B, 52.3K
  const std::regex line(
      R"(epoch    1 \| loss \d\.\d{4} \| train \d\.\d{4} val \d\.\d{4} test \d\.\d{4} \| \d+\.\d{3} s \| )" +
      ("h2d " + bytes + R"( \(\+ graph )" + bytes + ", slots and ids " + bytes + ", parameters " + bytes +
       R"(\) d2h )" + bytes + R"( \(\+ parameters )" + bytes + R"(\) \| hit \d+\.\d% \| )") +
      R"(rows computed 1\.00x \| peak [\d.]+[KMG]? \| wait \d+\.\d{3} s\n)");
  EXPECT_TRUE(std::regex_search(reuse.output, line)) << reuse.output;
  // The recompute baseline computes rows again for every subgraph whose closure holds them.
  const auto recompute = test::run_nj(train("--epochs 1 --device-memory 48K --execution recompute"));
  ASSERT_EQ(recompute.exit_code, 0) << recompute.output;
  std::smatch ratio;
  ASSERT_TRUE(std::regex_search(recompute.output, ratio, std::regex(R"(\| rows computed (\d+\.\d\d)x \|)")))
      << recompute.output;
  EXPECT_GT(std::stod(ratio[1]), 1.0) << recompute.output;
}

// mpirun gives its ranks a pseudo-terminal even where its own output goes to a file: a rank is no terminal a user
// sees.
TEST(MultiRankLogCli, RanksWriteNoColourIntoAFileUnlessAsked) {
  NJ_SKIP_WITHOUT_MPIRUN();
  const test::TempDir dir;
  const std::string dataset = dir.file("data.h5");
  write_dataset(dataset, test::random_dataset(200, 800, 8, 3, 2));
  for (const std::string colour : {"", " --color always"}) {
    SCOPED_TRACE(colour);
    const std::string log = dir.file("log.txt");
    const auto result = test::run_nj_ranks(
        2, "train " + shell_quote(dataset) + " --epochs 1 --threads 1" + colour + " >" + shell_quote(log));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const std::string text = file_text(log);
    EXPECT_NE(text.find("epoch    1 |"), std::string::npos) << text;
    EXPECT_EQ(coloured(text), !colour.empty()) << text;
  }
}

}  // namespace
}  // namespace nj
