// The mistakes a user makes on the command line and in a configuration file, each answered by one line that says
// what was given and what to do: two datasets, a folder for a file, a misspelled flag or command, a train command
// line handed to nj plan, and a TOML file with tables, repeated keys or bad syntax.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "nj/io/dataset_file.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

class MistakesCli : public ::testing::Test {
 protected:
  void SetUp() override { write_dataset(dataset_, test::random_dataset(200, 800, 8, 3, 2)); }

  // A folder holding the files whose names tell its kind.
  std::string folder(const std::string& name, const std::vector<std::string>& files) const {
    const auto path = dir_.path() / name;
    std::filesystem::create_directories(path);
    for (const std::string& file : files) {
      std::filesystem::create_directories((path / file).parent_path());
      std::ofstream(path / file) << "\n";
    }
    return path.string();
  }

  std::string write_config(const std::string& name, const std::string& text) const {
    const std::string path = dir_.file(name);
    std::ofstream(path) << text;
    return path;
  }

  test::TempDir dir_;
  std::string dataset_ = dir_.file("data.h5");
};

TEST_F(MistakesCli, ADatasetGivenBothAsTheArgumentAndWithDatasetIsAnError) {
  const std::string other = dir_.file("other.h5");
  std::filesystem::copy_file(dataset_, other);
  for (const char* command : {"train", "plan"}) {
    const auto line = test::expect_one_line_error(
        test::run_nj(std::string(command) + " " + shell_quote(dataset_) + " --dataset " + shell_quote(other)));
    EXPECT_NE(line.find("two datasets: " + dataset_ + " as the argument and " + other + " with --dataset"),
              std::string::npos)
        << line;
  }
  // Either way alone is a dataset.
  EXPECT_EQ(test::run_nj("train --dataset " + shell_quote(dataset_) + " --epochs 1").exit_code, 0);
}

TEST_F(MistakesCli, AFolderInPlaceOfADatasetFileSaysWhatItHoldsAndWhatToRun) {
  const std::string plain = folder("cora", {"meta.txt", "edges.txt", "features.txt"});
  const std::string ogb = folder("ogbn-tiny", {"raw/edge.csv.gz"});
  const std::string empty = folder("empty", {});
  const std::string parts = dir_.file("parts");
  ASSERT_EQ(test::run_nj("partition " + shell_quote(dataset_) + " --parts 2 -o " + shell_quote(parts)).exit_code, 0);

  const std::string convert_plain = "convert it with nj convert --format plain " + plain + " --output FILE.h5";
  for (const std::string command : {"train", "plan", "info", "partition"}) {
    SCOPED_TRACE(command);
    const std::string extra = command == "partition" ? " --parts 2 -o " + shell_quote(dir_.file("p")) : "";
    const auto on = [&](const std::string& path) {
      return test::expect_one_line_error(test::run_nj(command + " " + shell_quote(path) + extra));
    };
    EXPECT_NE(on(plain).find(plain +
                             " is a folder of a plain-text export (meta.txt, edges.txt, ...), not a dataset "
                             "file: " +
                             convert_plain),
              std::string::npos);
    EXPECT_NE(on(ogb).find("convert it with nj convert --format ogb " + ogb + " --output FILE.h5"), std::string::npos);
    EXPECT_NE(on(empty).find(empty + " is a folder with no dataset file nj knows in it"), std::string::npos);
  }
  EXPECT_NE(test::expect_one_line_error(test::run_nj("train " + shell_quote(parts)))
                .find(parts + " is a partition folder (manifest.json), not a dataset file: use --partitions " + parts),
            std::string::npos);
  EXPECT_NE(test::expect_one_line_error(
                test::run_nj("partition " + shell_quote(parts) + " --parts 2 -o " + shell_quote(dir_.file("p"))))
                .find("is a partition folder (manifest.json), already split"),
            std::string::npos);
  EXPECT_NE(test::expect_one_line_error(test::run_nj("train --partitions " + shell_quote(dataset_)))
                .find("a file, not a folder written by nj partition"),
            std::string::npos);
  EXPECT_NE(test::expect_one_line_error(test::run_nj("convert --format edgelist " + shell_quote(plain) + " -o " +
                                                     shell_quote(dir_.file("c.h5"))))
                .find(plain + " is a plain-text export (meta.txt, edges.txt, ...): convert it with --format plain"),
            std::string::npos);
  // What nj plan and nj info read in a folder, they read.
  EXPECT_EQ(test::run_nj("plan " + shell_quote(parts)).exit_code, 0);
  EXPECT_EQ(test::run_nj("info " + shell_quote(parts)).exit_code, 0);
}

TEST_F(MistakesCli, AMisspelledCommandOrFlagGetsASuggestion) {
  EXPECT_NE(test::expect_one_line_error(test::run_nj("trian " + shell_quote(dataset_)))
                .find("'trian' is not a command of nj; did you mean 'train'?"),
            std::string::npos);
  EXPECT_NE(test::expect_one_line_error(test::run_nj("tarin " + shell_quote(dataset_))).find("did you mean 'train'?"),
            std::string::npos);
  EXPECT_NE(test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset_) + " --epoch 3"))
                .find("did you mean '--epochs'?"),
            std::string::npos);
  EXPECT_NE(test::expect_one_line_error(test::run_nj("plan " + shell_quote(dataset_) + " --device-memroy 48K"))
                .find("did you mean '--device-memory'?"),
            std::string::npos);
  // nj's own options are suggested after a subcommand, where they are accepted too.
  EXPECT_NE(test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset_) + " --log-levle warn"))
                .find("did you mean '--log-level'?"),
            std::string::npos);
  const std::string far = test::expect_one_line_error(test::run_nj("frobnicate"));
  EXPECT_NE(far.find("'frobnicate' is not a command of nj"), std::string::npos) << far;
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
  const std::string config = write_config("typo.toml", "epoch = 3\n");
  EXPECT_NE(
      test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset_) + " --config " + shell_quote(config)))
          .find(config + ":1: unknown option 'epoch' for nj train; did you mean 'epochs'?"),
      std::string::npos);
}

// Every option of nj train is one nj plan takes, so that `train` can be swapped for `plan` in a command line;
// what only training uses is ignored, written nowhere, and named in a debug line.
TEST_F(MistakesCli, PlanRunsATrainCommandLine) {
  const std::string config = write_config("train.toml", "hidden = 8\nepochs = 5\nlr = 0.02\n");
  const std::string line =
      shell_quote(dataset_) + " --config " + shell_quote(config) +
      " --epochs 3 --lr 0.1 --weight-decay 0 --weight-decay-scope first --feature-norm row --eval-every 2 "
      "--metrics-out " +
      shell_quote(dir_.file("m.jsonl")) + " --save-checkpoint " + shell_quote(dir_.file("s.h5")) +
      " --checkpoint-dir " + shell_quote(dir_.file("ckpt")) +
      " --checkpoint-every 1 --host-memory 8G --partition-method random --device auto --execution auto "
      "--device-memory 48K --threads 1 --deterministic";
  const auto trained = test::run_nj("train " + line);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  std::filesystem::remove_all(dir_.file("m.jsonl"));
  std::filesystem::remove_all(dir_.file("s.h5"));
  std::filesystem::remove_all(dir_.file("ckpt"));
  const auto planned = test::run_nj("--log-level debug plan " + line + " --resume");
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  EXPECT_NE(planned.output.find("plan: ignoring what only training uses: "), std::string::npos) << planned.output;
  EXPECT_NE(planned.output.find(" --epochs --lr --weight-decay --weight-decay-scope --feature-norm --eval-every"),
            std::string::npos)
      << planned.output;
  EXPECT_NE(planned.output.find("device memory: peak"), std::string::npos) << planned.output;
  for (const char* written : {"m.jsonl", "s.h5", "ckpt"}) EXPECT_FALSE(std::filesystem::exists(dir_.file(written)));
  // In memory too, as nj train runs without --device-memory.
  const auto in_memory = test::run_nj("plan " + shell_quote(dataset_) + " --execution in-memory");
  ASSERT_EQ(in_memory.exit_code, 0) << in_memory.output;
  EXPECT_NE(in_memory.output.find("execution: in-memory"), std::string::npos) << in_memory.output;
}

// A mistake in the command line is one line that names the option and the rule, and exits with 2; an error at run
// time exits with 1; --help succeeds.
TEST_F(MistakesCli, ACommandLineMistakeNamesTheOptionAndTheRuleAndExitsWithTwo) {
  const auto usage = [&](const std::string& arguments, const std::string& line) {
    SCOPED_TRACE(arguments);
    const auto result = test::run_nj(arguments);
    EXPECT_EQ(result.output, "nj: error: " + line + "\n");
    EXPECT_EQ(result.exit_code, 2) << result.output;
  };
  const std::string train = "train " + shell_quote(dataset_);
  usage(train + " --hidden 0", "--hidden must be at least 1, not '0'");
  usage(train + " --hidden many", "--hidden must be at least 1, not 'many'");
  usage(train + " --epocs 5", "unknown option '--epocs' for nj train; did you mean '--epochs'?");
  usage(train + " --epochs 3 extra", "unexpected argument 'extra' for nj train");
  usage(train + " --device-memory 64X",
        "--device-memory must be a size such as 512M, 2G or 1048576, or unlimited, not '64X'");
  usage(train + " --dropout 1.5", "--dropout must be between 0 and 0.99, not '1.5'");
  usage(train + " --model gcx", "--model must be one of gcn, gat, sage, gin, appnp, not 'gcx'");
  usage(train + " --epochs 0", "--epochs must be at least 1, not '0'");
  usage(train + " --resume", "--resume needs --checkpoint-dir (where to resume from)");
  usage("plan " + shell_quote(dataset_) + " --host-blocks lots",
        "--host-blocks must be a size such as 512M, 2G or 1048576, or unlimited, not 'lots'");
  const auto missing = test::run_nj("train " + shell_quote(dir_.file("missing.h5")));
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  test::expect_one_line_error(missing);
  EXPECT_EQ(test::run_nj("train --help").exit_code, 0);
}

// Under mpirun every rank exits alike: 2 for a mistake in the command line, found by every rank or by one.
TEST_F(MistakesCli, EveryRankExitsWithTwoForAMistakeInTheCommandLine) {
  NJ_SKIP_WITHOUT_MPIRUN();
  const auto parsed = test::run_nj_ranks(2, "train " + shell_quote(dataset_) + " --hidden 0");
  EXPECT_EQ(parsed.exit_code, 2) << parsed.output;
  const auto agreed = test::run_nj_ranks(2, "train " + shell_quote(dataset_) + " --resume");
  EXPECT_EQ(agreed.exit_code, 2) << agreed.output;
  EXPECT_NE(test::the_error_line(agreed).find("--resume needs --checkpoint-dir"), std::string::npos) << agreed.output;
}

// An option given that the run does not use gets one warning line naming it and why: the model, the execution, or
// the ranks; options that apply get none.
TEST_F(MistakesCli, AnOptionTheRunDoesNotUseIsNamedInAWarning) {
  const auto warnings = [](const test::CommandResult& result) {
    EXPECT_EQ(result.exit_code, 0) << result.output;
    std::vector<std::string> lines;
    std::istringstream output(result.output);
    for (std::string line; std::getline(output, line);) {
      if (const auto at = line.find("[warning] "); at != std::string::npos) lines.push_back(line.substr(at + 10));
    }
    return lines;
  };
  const std::string train = "train " + shell_quote(dataset_) + " --epochs 1";
  EXPECT_EQ(warnings(test::run_nj(train + " --model sage --heads 4 --attention-dropout 0.1")),
            (std::vector<std::string>{
                "--heads is ignored: it applies to --model gat only, and this run's model is sage",
                "--attention-dropout is ignored: it applies to --model gat only, and this run's model is sage"}));
  EXPECT_EQ(warnings(test::run_nj(train + " --gin-eps 0.3 --teleport 0.2")),
            (std::vector<std::string>{
                "--gin-eps is ignored: it applies to --model gin only, and this run's model is gcn",
                "--teleport is ignored: it applies to --model appnp only, and this run's model is gcn"}));
  const std::string in_memory =
      "it applies to the subgraph executor only, and this run is in memory (give "
      "--device-memory)";
  EXPECT_EQ(
      warnings(test::run_nj(train + " --cache-policy lru --host-blocks 1M --recompute-outputs on")),
      (std::vector<std::string>{"--cache-policy is ignored: " + in_memory, "--host-blocks is ignored: " + in_memory,
                                "--recompute-outputs is ignored: " + in_memory}));
  EXPECT_EQ(warnings(test::run_nj(train + " --execution reuse --recompute-outputs on --deterministic")),
            (std::vector<std::string>{
                "--recompute-outputs is ignored: it applies within a device budget only, and this run has none (give "
                "--device-memory)",
                "--deterministic is ignored: it applies on a GPU only (--device cuda)"}));
  EXPECT_EQ(warnings(test::run_nj(train + " --partition-method random")),
            (std::vector<std::string>{"--partition-method is ignored: it applies where several ranks partition a "
                                      "dataset file, without --partitions"}));
  EXPECT_TRUE(warnings(test::run_nj(train + " --model gat --heads 2 --device-memory 256K --cache-policy lru "
                                            "--recompute-outputs on"))
                  .empty());
  // On several ranks, what applies on one rank only.
  const std::string parts = dir_.file("parts");
  ASSERT_EQ(test::run_nj("partition " + shell_quote(dataset_) + " --parts 2 --output " + shell_quote(parts)).exit_code,
            0);
  EXPECT_EQ(
      warnings(test::run_nj("plan " + shell_quote(parts) + " --device-memory 256K --recompute-outputs on")),
      (std::vector<std::string>{"--recompute-outputs is ignored: it applies on one rank only, and this job has 2"}));
}

TEST_F(MistakesCli, ATomlFileWithTablesRepeatedKeysOrBadSyntaxIsOneLineNamingTheFileAndLine) {
  const auto error = [&](const std::string& text) {
    const std::string config = write_config("bad.toml", text);
    const std::string line = test::expect_one_line_error(
        test::run_nj("train " + shell_quote(dataset_) + " --config " + shell_quote(config)));
    EXPECT_TRUE(line.starts_with("nj: error: " + config + ":")) << line;
    return line.substr(std::string("nj: error: ").size() + config.size());
  };
  EXPECT_EQ(error("epochs = 2\n\n[train]\nlr = 0.1\n"),
            ":3: tables ([section]) are not read: give every option at the top level, before any table\n");
  EXPECT_EQ(error("epochs = 2\nlr = 0.1\n# again\nepochs = 3\n"), ":4: 'epochs' is given twice (first on line 1)\n");
  EXPECT_EQ(error("epochs 3\n"), ":1: expected '=' after 'epochs'\n");
  EXPECT_EQ(error("model = \"gat\nhidden = 8\n"), ":1: a string must end on its line, with '\"'\n");
  EXPECT_EQ(error("seed = [1, 2\n"), ":1: expected ',' or ']' in the array\n");
  EXPECT_EQ(error("lr = 0.1 0.2\n"), ":1: unexpected '0.2' after the value\n");
  EXPECT_TRUE(error("epochs = \"many\"\n").starts_with(":1: option 'epochs': "));
  // What TOML allows around a value still reads.
  const std::string fine = write_config("fine.toml",
                                        "# a comment\r\nepochs = 2  # two\r\n\r\nmodel = 'gcn'\nseed = [3]\n"
                                        "feature-norm = \"row\"\n");
  EXPECT_EQ(test::run_nj("train " + shell_quote(dataset_) + " --config " + shell_quote(fine)).exit_code, 0);
}

TEST_F(MistakesCli, RelativePathsInAConfigFileAreRelativeToItsFolder) {
  const std::filesystem::path run = dir_.path() / "run";
  std::filesystem::create_directories(run);
  Dataset elsewhere = test::random_dataset(200, 800, 8, 3, 2);
  elsewhere.name = "elsewhere";
  write_dataset((run / "graph.h5").string(), elsewhere);
  std::ofstream(run / "train.toml") << "dataset = \"graph.h5\"\nepochs = 2\nmetrics-out = \"metrics.jsonl\"\n"
                                       "checkpoint-dir = \"checkpoints\"\nsave-checkpoint = '"
                                    << (dir_.path() / "absolute.h5").string() << "'\n";
  // Started from another folder, with the configuration's path relative to it.
  const auto result = test::run_shell("cd " + shell_quote(dir_.path().string()) + " && '" + NJ_BINARY +
                                      "' train --config run/train.toml");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("dataset elsewhere:"), std::string::npos) << result.output;
  EXPECT_TRUE(std::filesystem::exists(run / "metrics.jsonl"));
  EXPECT_TRUE(std::filesystem::exists(run / "checkpoints" / "checkpoint-000002.h5"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "absolute.h5"));
  // A dataset on the command line wins over the file's, given either way.
  const auto given =
      test::run_nj("train " + shell_quote(dataset_) + " --config " + shell_quote((run / "train.toml").string()) +
                   " --epochs 1 --metrics-out " + shell_quote(dir_.file("m.jsonl")));
  ASSERT_EQ(given.exit_code, 0) << given.output;
  EXPECT_NE(given.output.find("dataset random:"), std::string::npos) << given.output;
}

}  // namespace
}  // namespace nj
