// SIGTERM and SIGINT in the middle of training, as Slurm, mpirun and a user's Ctrl-C send them: the epoch under
// way is finished, every rank stops after the same one, a checkpoint is written, one line says where training
// stopped, and a rerun with --resume ends with the weights of a run that was never stopped, bit for bit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

// Starts the command after the first three arguments (which writes its metrics to $1) in the background, waits
// until it has finished two epochs, sends signal $2 to $3 (job: the command's process; rank: one rank of the
// job), and prints the command's output, then "status N" once it has ended. A job still running after two
// minutes is killed.
constexpr const char* kInterruptScript = R"sh(
metrics="$1"; signal="$2"; target="$3"; shift 3
"$@" </dev/null &
job=$!
( trap 'kill "$sleeper"; exit' TERM; sleep 120 & sleeper=$!; wait "$sleeper"; kill -9 "$job" ) >/dev/null 2>&1 &
watchdog=$!
for _ in $(seq 1200); do
  epochs=$(grep -c '"type":"epoch"' "$metrics" 2>/dev/null)
  [ "${epochs:-0}" -ge 2 ] && break
  sleep 0.1
done
victim=$job
if [ "$target" = rank ]; then
  victim=$(pgrep -f -- "--metrics-out $metrics" | while read -r pid; do
    [ "$(ps -o comm= -p "$pid")" = nj ] && echo "$pid"; done | sed -n 2p)
fi
kill -s "$signal" "$victim"
wait "$job"
status=$?
kill "$watchdog" 2>/dev/null
echo "status $status"
)sh";

struct Interruption {
  int ranks;
  const char* signal;  // as kill -s names it
  const char* target;  // "job" or "rank"
};

void PrintTo(const Interruption& c, std::ostream* out) {
  *out << c.ranks << " ranks, SIG" << c.signal << " to the " << c.target;
}

// The loss of every epoch in a metrics file, the last record of each epoch where a resumed run repeated some.
std::map<int, double> losses_by_epoch(const std::string& metrics) {
  std::map<int, double> losses;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["type"] == "epoch") losses[record["epoch"].get<int>()] = record["loss"].get<double>();
  }
  return losses;
}

class InterruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto generated = test::run_nj(
        "generate --vertices 1500 --edges 12000 --features 16 --classes 4 --seed 5 -o " + shell_quote(dataset_));
    ASSERT_EQ(generated.exit_code, 0) << generated.output;
    std::ofstream(script_) << kInterruptScript;
  }

  // nj train on `ranks` ranks.
  std::string launch(int ranks, const std::string& options) const {
    const std::string train =
        fmt::format("{} train {} --threads 1 {}", shell_quote(NJ_BINARY), shell_quote(dataset_), options);
    if (ranks == 1) return train;
    return fmt::format(
        "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 "
        "mpirun -np {} --oversubscribe {}",
        ranks, train);
  }

  // Runs training on `ranks` ranks until `signal` reaches `target`; returns the output, with "status N" last.
  test::CommandResult interrupt(int ranks, const std::string& signal, const std::string& target,
                                const std::string& options) const {
    const std::string training =
        launch(ranks, fmt::format("--epochs 100000 --metrics-out {} {}", shell_quote(metrics_), options));
    return test::run_shell(
        fmt::format("bash {} {} {} {} {}", shell_quote(script_), shell_quote(metrics_), signal, target, training));
  }

  static int status_of(const test::CommandResult& result) {
    static const std::regex status(R"(status (\d+)\s*$)");
    std::smatch match;
    EXPECT_TRUE(std::regex_search(result.output, match, status)) << result.output;
    return match.empty() ? -1 : std::stoi(match[1]);
  }

  // The epoch the one `interrupted at epoch E; ...` line names, checked to end with `rest`.
  static int interrupted_epoch(const test::CommandResult& result, const std::string& rest) {
    static const std::regex line(R"(nj: interrupted at epoch (\d+); ([^\n]*))");
    const auto begin = std::sregex_iterator(result.output.begin(), result.output.end(), line);
    EXPECT_EQ(std::distance(begin, std::sregex_iterator()), 1) << result.output;
    if (begin == std::sregex_iterator()) return -1;
    EXPECT_EQ((*begin)[2], rest) << result.output;
    EXPECT_EQ(result.output.find("done: "), std::string::npos) << result.output;
    return std::stoi((*begin)[1]);
  }

  test::TempDir dir_;
  std::string dataset_ = dir_.file("graph.h5");
  std::string script_ = dir_.file("interrupt.sh");
  std::string metrics_ = dir_.file("interrupted.jsonl");
  std::string folder_ = dir_.file("checkpoints");
};

class InterruptResumeCli : public InterruptionTest, public ::testing::WithParamInterface<Interruption> {
 protected:
  void SetUp() override {
    if (GetParam().ranks > 1) NJ_SKIP_WITHOUT_MPIRUN();
    InterruptionTest::SetUp();
  }
  test::CommandResult train(const std::string& options) const {
    const std::string arguments = "train " + shell_quote(dataset_) + " --threads 1 " + options;
    const int ranks = GetParam().ranks;
    return ranks == 1 ? test::run_nj(arguments) : test::run_nj_ranks(ranks, arguments, std::chrono::seconds(240));
  }
};

TEST_P(InterruptResumeCli, TheEpochFinishesACheckpointIsWrittenAndResumingEndsWithTheSameWeights) {
  const Interruption& c = GetParam();
  const auto stopped = interrupt(c.ranks, c.signal, c.target, "--checkpoint-dir " + shell_quote(folder_));
  const int status = status_of(stopped);
  if (c.ranks == 1) {
    EXPECT_EQ(status, 143) << stopped.output;
  } else {
    EXPECT_NE(status, 0) << stopped.output;
  }
  const int epoch = interrupted_epoch(stopped, "rerun with --resume");
  ASSERT_GE(epoch, 2) << stopped.output;
  const std::string checkpoint = fmt::format("{}/checkpoint-{:06d}.h5", folder_, epoch);
  ASSERT_TRUE(std::filesystem::exists(checkpoint)) << stopped.output;
  // Every rank stopped after the same epoch: the metrics rank 0 wrote end there.
  EXPECT_EQ(losses_by_epoch(metrics_).rbegin()->first, epoch);

  const std::string epochs = " --epochs " + std::to_string(epoch + 2);
  const auto resumed = train("--checkpoint-dir " + shell_quote(folder_) + " --resume --save-checkpoint " +
                             shell_quote(dir_.file("resumed.h5")) + " --metrics-out " + shell_quote(metrics_) + epochs);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + checkpoint), std::string::npos) << resumed.output;
  const std::string straight_metrics = dir_.file("straight.jsonl");
  const auto straight = train("--save-checkpoint " + shell_quote(dir_.file("straight.h5")) + " --metrics-out " +
                              shell_quote(straight_metrics) + epochs);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  for (const char* group : {"/params", "/adam_m", "/adam_v"}) {
    const auto diff = test::run_shell("h5diff " + shell_quote(dir_.file("straight.h5")) + " " +
                                      shell_quote(dir_.file("resumed.h5")) + " " + group + " " + group);
    EXPECT_EQ(diff.exit_code, 0) << group << ": " << diff.output;
  }
  EXPECT_EQ(losses_by_epoch(metrics_), losses_by_epoch(straight_metrics));
}

INSTANTIATE_TEST_SUITE_P(Launchers, InterruptResumeCli,
                         // mpirun kills its job on SIGTERM but passes SIGUSR1 on to every rank.
                         ::testing::Values(Interruption{1, "TERM", "job"}, Interruption{2, "USR1", "job"},
                                           Interruption{2, "TERM", "rank"}),
                         [](const auto& test_info) {
                           return std::to_string(test_info.param.ranks) + "ranks_" + test_info.param.signal + "_to_" +
                                  test_info.param.target;
                         });

class InterruptCli : public InterruptionTest {};

TEST_F(InterruptCli, CtrlCWithoutACheckpointFolderSaysNothingWasSavedAndExits130) {
  const auto stopped = interrupt(1, "INT", "job", "");
  EXPECT_EQ(status_of(stopped), 130) << stopped.output;
  interrupted_epoch(stopped, "nothing was saved (with --checkpoint-dir, a rerun with --resume would go on from here)");
  EXPECT_NE(stopped.output.find("nj: stopping at the end of this epoch"), std::string::npos) << stopped.output;
}

TEST_F(InterruptCli, WithSaveCheckpointTheFileIsWrittenAndNamed) {
  const std::string file = dir_.file("stopped.h5");
  const auto stopped = interrupt(1, "TERM", "job", "--save-checkpoint " + shell_quote(file));
  EXPECT_EQ(status_of(stopped), 143) << stopped.output;
  const int epoch = interrupted_epoch(stopped, "rerun with --load-checkpoint " + file);
  const auto info = test::run_nj("info --json " + shell_quote(file));
  ASSERT_EQ(info.exit_code, 0) << info.output;
  EXPECT_EQ(nlohmann::json::parse(info.output)["epochs_done"], epoch);
}

}  // namespace
}  // namespace nj
