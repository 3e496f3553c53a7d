// nj train as a user runs it: flags and config files, the metrics file, and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <utility>

#include "nj/core/bytes.hpp"
#include "nj/device/cuda.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/kernels/backend.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override { write_dataset(dataset, test::random_dataset(200, 800, 8, 3, 2)); }
  test::TempDir dir;
  std::string dataset = dir.file("data.h5");
};

// Standard output carries only what a command produces: nj plan --json is one JSON object, for a dataset and for a
// partition folder, and nj train's is its result line; the logs, warnings among them, go to standard error.
TEST_F(TrainCli, StandardOutputCarriesOnlyWhatTheCommandProduces) {
  const std::string nj = shell_quote(NJ_BINARY);
  const std::string parts = dir.file("parts");
  ASSERT_EQ(test::run_nj("partition " + shell_quote(dataset) + " --parts 2 --output " + shell_quote(parts)).exit_code,
            0);
  // --heads with GCN logs a warning, which must stay off standard output.
  for (const std::string& planned : {shell_quote(dataset), shell_quote(parts)}) {
    const auto stdout_only =
        test::run_shell("(" + nj + " plan " + planned + " --json --heads 4 --device-memory 64K 2>/dev/null)");
    ASSERT_EQ(stdout_only.exit_code, 0) << stdout_only.output;
    const auto plan = nlohmann::json::parse(stdout_only.output);
    EXPECT_EQ(plan["execution"], "reuse");
    EXPECT_GT(plan["ranks"][0]["execution"]["peak_device_footprint_bytes"].get<std::int64_t>(), 0);
  }
  const auto trained =
      test::run_shell("(" + nj + " train " + shell_quote(dataset) + " --epochs 2 --heads 4 2>/dev/null)");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_TRUE(trained.output.starts_with("done: final test ")) << trained.output;
  EXPECT_EQ(std::count(trained.output.begin(), trained.output.end(), '\n'), 1) << trained.output;
  const auto logs = test::run_shell("(" + nj + " train " + shell_quote(dataset) + " --epochs 2 --heads 4 >/dev/null)");
  EXPECT_NE(logs.output.find("] epoch    2 | loss"), std::string::npos) << logs.output;
  EXPECT_NE(logs.output.find("[warning] --heads is ignored"), std::string::npos) << logs.output;
  EXPECT_EQ(logs.output.find("done:"), std::string::npos) << logs.output;
}

TEST_F(TrainCli, WritesOneRecordPerEpochAndASummary) {
  const auto metrics = dir.file("metrics.jsonl");
  const auto result = test::run_nj("train " + shell_quote(dataset) + " --epochs 4 --eval-every 2 --metrics-out " +
                                   shell_quote(metrics));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto records = read_jsonl(metrics);
  ASSERT_EQ(records.size(), 5U);
  for (int e = 0; e < 4; ++e) {
    EXPECT_EQ(records[e]["type"], "epoch");
    EXPECT_EQ(records[e]["epoch"], e + 1);
    EXPECT_GT(records[e]["loss"].get<double>(), 0.0);
    EXPECT_EQ(records[e]["val_acc"].is_null(), e % 2 == 0) << records[e];
  }
  EXPECT_EQ(records[4]["type"], "summary");
  EXPECT_EQ(records[4]["dataset"]["vertices"], 200);
  EXPECT_EQ(records[4]["device"]["kind"], cuda_device_count() > 0 ? "cuda" : "cpu");
  EXPECT_GT(records[4]["median_epoch_seconds"].get<double>(), 0.0);
  EXPECT_NE(result.output.find("epoch    4 | loss"), std::string::npos) << result.output;
}

TEST_F(TrainCli, ConfigFileEqualsTheSameFlags) {
  const std::string flags = "--model gat --heads 2 --hidden 4 --epochs 3 --lr 0.02 --dropout 0.3 --seed 9";
  const auto from_flags = dir.file("flags.jsonl");
  ASSERT_EQ(test::run_nj("train " + shell_quote(dataset) + " " + flags + " --metrics-out " + shell_quote(from_flags))
                .exit_code,
            0);
  const auto config = dir.file("train.toml");
  std::ofstream(config) << "model = \"gat\"\nheads = 2\nhidden = 4\nepochs = 3\nlr = 0.02\ndropout = 0.3\nseed = 9\n";
  const auto from_config = dir.file("config.jsonl");
  const auto result = test::run_nj("train " + shell_quote(dataset) + " --config " + shell_quote(config) +
                                   " --metrics-out " + shell_quote(from_config));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto a = read_jsonl(from_flags);
  const auto b = read_jsonl(from_config);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t e = 0; e + 1 < a.size(); ++e) EXPECT_EQ(a[e]["loss"], b[e]["loss"]);
}

// Every model from the command line, with its own options: in memory and within a budget alike, its options in the
// summary's description; a run resumed from its checkpoint without them takes them from it.
TEST_F(TrainCli, EveryModelTrainsWithItsOptionsInMemoryWithinABudgetAndResumed) {
  const std::pair<const char*, const char*> models[] = {
      {"--model sage", "sage, 2 layers, hidden 4"},
      {"--model gin --gin-eps 0.25", "gin, 2 layers, hidden 4, eps 0.25"},
      {"--model gin --gin-eps 0.25 --gin-train-eps", "gin, 2 layers, hidden 4, eps 0.25 (trained)"},
      {"--model appnp --propagation-steps 4 --teleport 0.2",
       "appnp, 2 layers, hidden 4, propagation steps 4, teleport 0.2"}};
  int run = 0;
  for (const auto& [flags, description] : models) {
    SCOPED_TRACE(flags);
    ++run;
    const std::string common = "train " + shell_quote(dataset) + " " + flags + " --hidden 4 --epochs 3 --seed 4";
    const auto in_memory = dir.file("in_memory.jsonl");
    const auto budgeted = dir.file("budgeted.jsonl");
    auto result = test::run_nj(common + " --execution in-memory --metrics-out " + shell_quote(in_memory));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    result = test::run_nj(common + " --device-memory 1M --metrics-out " + shell_quote(budgeted));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto a = read_jsonl(in_memory);
    const auto b = read_jsonl(budgeted);
    ASSERT_EQ(a.size(), 4U);
    ASSERT_EQ(b.size(), 4U);
    for (std::size_t e = 0; e < 3; ++e) {
      EXPECT_NEAR(a[e]["loss"].get<double>(), b[e]["loss"].get<double>(), 1e-5 * a[e]["loss"].get<double>());
    }
    EXPECT_EQ(b[3]["execution"], "reuse");
    EXPECT_NE(a[3]["model"]["description"].get<std::string>().find(description), std::string::npos) << a[3]["model"];

    const auto checkpoint = dir.file("model.h5");
    ASSERT_EQ(test::run_nj(common + " --save-checkpoint " + shell_quote(checkpoint)).exit_code, 0);
    // A resumed run appends to its metrics file: one file each.
    const auto resumed = dir.file("resumed" + std::to_string(run) + ".jsonl");
    result = test::run_nj("train " + shell_quote(dataset) + " --epochs 4 --load-checkpoint " + shell_quote(checkpoint) +
                          " --metrics-out " + shell_quote(resumed));
    ASSERT_EQ(result.exit_code, 0) << result.output;
    const auto r = read_jsonl(resumed);
    ASSERT_EQ(r.size(), 2U);
    EXPECT_NE(r[1]["model"]["description"].get<std::string>().find(description), std::string::npos) << r[1]["model"];
  }
}

// nj plan lists each layer as the model declares it: widths, the tensors the cache plans (Z and its gradient), what
// its aggregation reads, its dropout and activation; numbered as the user counts them: APPNP's two MLP layers, then
// its propagation as layer 3, run as two steps.
TEST_F(TrainCli, PlanListsEveryLayersDeclaration) {
  const auto result = test::run_nj("plan " + shell_quote(dataset) +
                                   " --model appnp --propagation-steps 2 --hidden 5 --device-memory 1M");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::regex table(
      R"(layers: appnp, 2 layers, hidden 5, propagation steps 2, teleport 0\.1.*\n.*layer.*Z width.*\n)"
      R"( +1 +8 +5 +5 +yes +its own row only +0\.5 +relu\n)"
      R"( +2 +5 +3 +3 +yes +its own row only +0\.5 +none\n)"
      R"( +3\.1 +3 +6 +6 +yes +in-edges, weighted +0 +none\n)"
      R"( +3\.2 +6 +6 +3 +yes +in-edges, weighted +0 +none\n)");
  EXPECT_TRUE(std::regex_search(result.output, table)) << result.output;
}

TEST_F(TrainCli, ALaterFlagOverridesAnEarlierOne) {
  const auto metrics = dir.file("override.jsonl");
  ASSERT_EQ(
      test::run_nj("train " + shell_quote(dataset) + " --epochs 5 --epochs 2 --metrics-out " + shell_quote(metrics))
          .exit_code,
      0);
  EXPECT_EQ(read_jsonl(metrics).size(), 3U);  // two epochs and the summary
}

TEST_F(TrainCli, UnknownConfigKeyIsAnError) {
  const auto config = dir.file("bad.toml");
  std::ofstream(config) << "epochz = 3\n";
  const auto line =
      test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset) + " --config " + shell_quote(config)));
  EXPECT_NE(line.find("epochz"), std::string::npos) << line;
}

TEST_F(TrainCli, TruncatedDatasetIsAOneLineError) {
  std::filesystem::resize_file(dataset, std::filesystem::file_size(dataset) / 2);
  const auto line = test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset) + " --epochs 1"));
  EXPECT_NE(line.find(dataset), std::string::npos) << line;
}

TEST_F(TrainCli, CheckpointResumeContinuesTheLossTrace) {
  const auto straight = dir.file("straight.jsonl");
  ASSERT_EQ(
      test::run_nj("train " + shell_quote(dataset) + " --epochs 4 --metrics-out " + shell_quote(straight)).exit_code,
      0);
  const auto checkpoint = dir.file("ckpt.h5");
  ASSERT_EQ(test::run_nj("train " + shell_quote(dataset) + " --epochs 2 --save-checkpoint " + shell_quote(checkpoint))
                .exit_code,
            0);
  const auto resumed = dir.file("resumed.jsonl");
  const auto result = test::run_nj("train " + shell_quote(dataset) + " --epochs 4 --load-checkpoint " +
                                   shell_quote(checkpoint) + " --metrics-out " + shell_quote(resumed));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto a = read_jsonl(straight);
  const auto b = read_jsonl(resumed);
  ASSERT_EQ(b.size(), 3U);  // epochs 2 and 3, then the summary
  EXPECT_EQ(a[2]["loss"], b[0]["loss"]);
  EXPECT_EQ(a[3]["loss"], b[1]["loss"]);
}

// nj train checks the forecast nj plan prints: the loading before it reads anything, and the whole run once it is
// planned, before the executor allocates; a limit above the forecast trains.
TEST_F(TrainCli, ARunThatCannotFitInHostMemoryStopsBeforeItLoadsOrAllocates) {
  const auto loading =
      test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset) + " --epochs 1 --host-memory 100K"));
  EXPECT_NE(loading.find("this run needs "), std::string::npos) << loading;
  EXPECT_NE(loading.find(" of host memory while loading (process "), std::string::npos) << loading;
  EXPECT_NE(loading.find(", dataset "), std::string::npos) << loading;
  EXPECT_NE(loading.find("more than the 100.0K given by --host-memory"), std::string::npos) << loading;

  const std::string graph = dir.file("larger.h5");
  ASSERT_EQ(test::run_nj("generate --vertices 20000 --edges 200000 --features 64 -o " + shell_quote(graph)).exit_code,
            0);
  const auto planned = test::run_nj("plan " + shell_quote(graph) + " --json --log-level off");
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  const auto rank = nlohmann::json::parse(planned.output)["ranks"][0];
  const auto peak = rank["host_peak_bytes"].get<std::int64_t>();
  const auto loaded = rank["host"]["process"].get<std::int64_t>() + rank["host"]["dataset"].get<std::int64_t>();
  ASSERT_GT(peak - loaded, 4 << 20) << rank;
  const auto limited = [&](std::int64_t bytes) {
    return test::run_nj("train " + shell_quote(graph) + " --epochs 1 --host-memory " + std::to_string(bytes / 1024) +
                        "K");
  };
  const auto between = limited((peak + loaded) / 2);
  const std::string training = test::the_error_line(between);
  EXPECT_EQ(between.exit_code, 1);
  EXPECT_NE(training.find(" of host memory while training (process "), std::string::npos) << training;
  EXPECT_NE(training.find("device (emulated) "), std::string::npos) << training;
  EXPECT_EQ(between.output.find("epoch    1"), std::string::npos) << between.output;
  const auto above = limited(peak + peak / 10);
  EXPECT_EQ(above.exit_code, 0) << above.output;
}

// Within a device budget, a host budget the fastest plan does not fit is met by a lighter plan, which trains the
// same model; nj plan forecasts that plan (forecasts_test.py compares it with training). One no plan fits is refused.
TEST_F(TrainCli, AHostBudgetIsMetByALighterPlanThatTrainsTheSameModel) {
  const std::string wide = dir.file("wide.h5");
  ASSERT_EQ(test::run_nj("generate --vertices 20000 --edges 200000 --features 1024 --classes 6 -o " + shell_quote(wide))
                .exit_code,
            0);
  const auto planned = [&](const std::string& options) {
    const auto result = test::run_nj("plan " + shell_quote(wide) + " --json --log-level off " + options);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return nlohmann::json::parse(result.output)["ranks"][0];
  };
  const auto budget = planned("--execution reuse")["execution"]["peak_device_footprint_bytes"].get<std::int64_t>() / 4;
  const std::string budgeted = " --device-memory " + std::to_string(budget / 1024) + "K";
  const auto fastest_plan = planned(budgeted);
  const auto fastest = fastest_plan["host_peak_bytes"].get<std::int64_t>();
  // Room to load (the dataset, the renumbering's copies, a process's own few MiB more or less than nj plan's), and not
  // to run, which adds the device's memory, the rows and 16 MiB of workspace for each of the 2 threads.
  const auto loaded = fastest_plan["host"]["process"].get<std::int64_t>() +
                      fastest_plan["host"]["dataset"].get<std::int64_t>() + (16 << 20);
  const std::string limit = " --host-memory " + std::to_string((fastest - (8 << 20)) / 1024) + "K";
  const auto lighter = planned(budgeted + limit);
  EXPECT_LE(lighter["host_peak_bytes"].get<std::int64_t>(), fastest - (8 << 20)) << lighter;
  EXPECT_FALSE(lighter["host_memory_choices"].empty()) << lighter;

  const auto train = [&](const std::string& options, const std::string& metrics) {
    return test::run_nj("train " + shell_quote(wide) + " --epochs 3 --threads 2" + budgeted + options +
                        " --metrics-out " + shell_quote(metrics));
  };
  const auto as_fast = train("", dir.file("fastest.jsonl"));
  ASSERT_EQ(as_fast.exit_code, 0) << as_fast.output;
  const auto within = train(limit, dir.file("lighter.jsonl"));
  ASSERT_EQ(within.exit_code, 0) << within.output;
  EXPECT_NE(within.output.find("host memory: planned within the "), std::string::npos) << within.output;
  const auto a = read_jsonl(dir.file("fastest.jsonl"));
  const auto b = read_jsonl(dir.file("lighter.jsonl"));
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t e = 0; e + 1 < a.size(); ++e) {
    EXPECT_NEAR(a[e]["loss"].get<double>(), b[e]["loss"].get<double>(), 1e-5 * a[e]["loss"].get<double>());
  }
  EXPECT_TRUE(a.back()["host_memory_choices"].empty());
  // Which choice fits may differ from nj plan's by a process's own few hundred KiB (forecasts_test.py compares the
  // two with MiBs between choices).
  EXPECT_FALSE(b.back()["host_memory_choices"].empty());

  const auto refused = train(" --host-memory " + std::to_string(loaded / 1024) + "K", dir.file("refused.jsonl"));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(test::the_error_line(refused).find(" of host memory while training "), std::string::npos) << refused.output;
}

TEST_F(TrainCli, BudgetedRunsReportTransfersWithinTheBudget) {
  const auto metrics = dir.file("budget.jsonl");
  const auto result = test::run_nj("train " + shell_quote(dataset) + " --epochs 2 --device-memory 32K --metrics-out " +
                                   shell_quote(metrics));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("| h2d "), std::string::npos) << result.output;
  for (const auto& record : read_jsonl(metrics)) {
    if (record["type"] != "epoch") continue;
    const auto& execution = record["execution"];
    EXPECT_GT(execution["h2d_bytes"].get<std::int64_t>(), 0);
    EXPECT_LE(execution["peak_device_bytes"].get<std::int64_t>(), 32 * 1024);
    EXPECT_EQ(execution["recompute_ratio"].get<double>(), 1.0);
    // What moves besides rows, by what it carries, adds up to it.
    const auto bytes = [&](const char* field) { return execution[field].get<std::int64_t>(); };
    EXPECT_GT(bytes("h2d_structure_bytes"), 0);
    EXPECT_GT(bytes("h2d_index_bytes"), 0);
    EXPECT_GT(bytes("h2d_parameter_bytes"), 0);
    EXPECT_EQ(bytes("h2d_other_bytes"),
              bytes("h2d_structure_bytes") + bytes("h2d_index_bytes") + bytes("h2d_parameter_bytes"));
    EXPECT_EQ(bytes("d2h_other_bytes"), bytes("d2h_parameter_bytes"));
  }
}

// Features with one entry in twenty non-zero are multiplied as sparse rows by default (auto), and train as dense
// rows do, within rounding, in memory and within a budget; nj plan forecasts the budgeted run's peak from their
// entries. Stored dense, auto leaves them dense, in nj train and nj plan alike.
TEST_F(TrainCli, SparseInputsTrainAsDenseOnesAndPlanForecastsTheirPeak) {
  Dataset data = test::random_dataset(300, 1200, 48, 3, 4);
  for (std::int64_t k = 0; k < data.features.size(); ++k) {
    if (k % 20 != 0) data.features.data()[k] = 0.0F;
  }
  const std::string sparse = dir.file("sparse.h5");
  write_dataset(sparse, data);
  const std::string stored_dense = dir.file("stored-dense.h5");
  write_dataset(stored_dense, data, FeatureStorage::kDense);
  const std::string common = " --epochs 3 --eval-every 0 --dropout 0.5";
  const auto losses = [&](const std::string& flags, bool logs_sparse_rows, const std::string& file) {
    const auto metrics = dir.file("sparse-metrics.jsonl");
    const auto result =
        test::run_nj("train " + shell_quote(file) + common + flags + " --metrics-out " + shell_quote(metrics));
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_EQ(result.output.find("first layer: the features as sparse rows") != std::string::npos, logs_sparse_rows)
        << flags << "\n"
        << result.output;
    std::vector<double> trace;
    std::int64_t peak = 0;
    for (const auto& record : read_jsonl(metrics)) {
      if (record["type"] != "epoch") continue;
      trace.push_back(record["loss"].get<double>());
      peak = record["execution"]["peak_device_footprint_bytes"].get<std::int64_t>();
    }
    return std::pair{trace, peak};
  };
  const auto [dense, dense_peak] = losses(" --sparse-inputs off", false, sparse);
  ASSERT_EQ(dense.size(), 3U);
  const std::string budget = " --execution reuse --device-memory 120K";
  for (const std::string& flags : {std::string(), std::string(" --sparse-inputs on"), budget}) {
    const auto [trace, peak] = losses(flags, true, sparse);
    ASSERT_EQ(trace.size(), dense.size()) << flags;
    for (std::size_t e = 0; e < dense.size(); ++e) EXPECT_NEAR(trace[e], dense[e], 1e-5 * dense[e]) << flags;
    if (flags != budget) continue;
    EXPECT_LE(peak, 120 * 1024);
    const auto plan = test::run_nj("plan " + shell_quote(sparse) + common + budget);
    ASSERT_EQ(plan.exit_code, 0) << plan.output;
    EXPECT_NE(plan.output.find("device memory: peak " + format_bytes(peak) + " of budget"), std::string::npos)
        << format_bytes(peak) << "\n"
        << plan.output;
  }
  for (const bool forced : {false, true}) {
    const std::string flags = budget + (forced ? " --sparse-inputs on" : "");
    const auto [trace, peak] = losses(flags, forced, stored_dense);
    ASSERT_EQ(trace.size(), dense.size()) << flags;
    for (std::size_t e = 0; e < dense.size(); ++e) EXPECT_NEAR(trace[e], dense[e], 1e-5 * dense[e]) << flags;
    const auto plan = test::run_nj("plan " + shell_quote(stored_dense) + common + flags);
    ASSERT_EQ(plan.exit_code, 0) << plan.output;
    EXPECT_NE(plan.output.find("device memory: peak " + format_bytes(peak) + " of budget"), std::string::npos)
        << flags << ": " << format_bytes(peak) << "\n"
        << plan.output;
  }
}

TEST_F(TrainCli, BadBudgetsAreOneLineErrors) {
  EXPECT_NE(
      test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset) + " --device-memory 12Q")).find("12Q"),
      std::string::npos);
  // Found only once the graph is loaded, after the dataset's info line: quiet that.
  EXPECT_NE(test::expect_one_line_error(
                test::run_nj("--log-level warn train " + shell_quote(dataset) + " --device-memory 1K"))
                .find("use --device-memory"),
            std::string::npos);
  test::expect_one_line_error(
      test::run_nj("train " + shell_quote(dataset) + " --device-memory 1M --execution in-memory"));
}

TEST_F(TrainCli, DeviceFlagChoosesTheDeviceAndOneLineSaysWhy) {
  const auto cpu = test::run_nj("train " + shell_quote(dataset) + " --epochs 1 --device cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_NE(cpu.output.find("device: cpu, as asked"), std::string::npos) << cpu.output;
  EXPECT_NE(cpu.output.find("backend cpu"), std::string::npos) << cpu.output;
  const auto automatic = test::run_nj("train " + shell_quote(dataset) + " --epochs 1");
  ASSERT_EQ(automatic.exit_code, 0) << automatic.output;
  EXPECT_NE(automatic.output.find(cuda_device_count() > 0 ? "device: cuda (auto)" : "device: cpu: auto found"),
            std::string::npos)
      << automatic.output;
  test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset) + " --device gpu"));
  if (cuda_device_count() == 0) {
    const std::string error =
        test::expect_one_line_error(test::run_nj("train " + shell_quote(dataset) + " --device cuda"));
    EXPECT_NE(error.find(cuda_built() ? "--device cuda: no CUDA device" : "no CUDA backend"), std::string::npos)
        << error;
  }
}

// Each row of --all-policies' table is what planning with that policy alone forecasts: the rows each way, and every
// copy of the epoch.
TEST_F(TrainCli, PlanComparesEveryPolicy) {
  const std::string plan = "plan " + shell_quote(dataset) + " --device-memory 48K";
  const auto result = test::run_nj(plan + " --all-policies");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::set<std::string> totals;
  std::int64_t structure = 0;
  for (const char* policy : {"st-aware", "lru", "fifo", "degree", "size-order", "belady", "none"}) {
    SCOPED_TRACE(policy);
    const auto alone = test::run_nj(plan + " --json --log-level off --cache-policy " + policy);
    ASSERT_EQ(alone.exit_code, 0) << alone.output;
    const auto moved = nlohmann::json::parse(alone.output)["ranks"][0]["execution"];
    const auto bytes = [&](const char* key) { return moved[key].get<std::int64_t>(); };
    const std::int64_t all = bytes("h2d_bytes") + bytes("h2d_structure_bytes") + bytes("h2d_index_bytes") +
                             bytes("h2d_parameter_bytes") + bytes("d2h_bytes") + bytes("d2h_parameter_bytes");
    const std::regex row(fmt::format(R"(\n{} +{} +{} +{} )", policy, format_bytes(bytes("h2d_bytes")),
                                     format_bytes(bytes("d2h_bytes")), format_bytes(all)));
    EXPECT_TRUE(std::regex_search(result.output, row)) << moved << result.output;
    totals.insert(format_bytes(all));
    if (std::string(policy) == "st-aware") structure = bytes("h2d_structure_bytes");
  }
  EXPECT_GT(totals.size(), 1U) << "every policy moves the same bytes: the budget constrains nothing\n" << result.output;
  // Beside them, what the graph's blocks move: kept for the run as the plan says, and under LRU and Belady.
  std::smatch room;
  ASSERT_TRUE(std::regex_search(
      result.output, room,
      std::regex(R"(\ngraph per epoch, in the room its staying blocks take \(\S+\): kept for the run (\S+), lru \S+, )"
                 R"(belady \S+\n)")))
      << result.output;
  EXPECT_EQ(room[1], format_bytes(structure));
}

// A GPU's run is planned on any machine: the CUDA libraries' workspace beside the budget, and the offsets its
// cuSPARSE aggregations narrow within the steps; --deterministic leaves cuSPARSE and its offsets out.
TEST_F(TrainCli, PlanForACudaDeviceShowsTheLibrariesWorkspace) {
  const auto on = [&](const std::string& device) {
    const auto result = test::run_nj("plan " + shell_quote(dataset) + " --device-memory 256K " + device);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return result.output;
  };
  const std::string cpu = on("");
  EXPECT_EQ(cpu.find("library"), std::string::npos) << cpu;
  EXPECT_NE(on("--device cuda")
                .find(fmt::format("and {} of library workspaces beside it",
                                  format_bytes(cuda_library_memory(false).workspace_bytes))),
            std::string::npos);
  EXPECT_NE(on("--device cuda --deterministic")
                .find(fmt::format("and {} of library workspaces beside it", format_bytes(kCublasWorkspaceBytes))),
            std::string::npos);
  test::expect_one_line_error(test::run_nj("plan " + shell_quote(dataset) + " --device tpu"));
}

// Within a budget the layers are chained; a GAT's outputs are computed again in the backward half on a GPU (auto) or
// where asked, and never with --recompute-outputs off; another value is a one-line error. --chain-layers is no
// option (tests compare chaining through SubgraphExecutorOptions::chain_layers).
TEST_F(TrainCli, PlanSaysWhichLayersAreChainedAndWhetherTheirOutputsAreComputedAgain) {
  const auto plan = [&](const std::string& flags) {
    const auto result = test::run_nj("plan " + shell_quote(dataset) + " --model gat --device-memory 512K " + flags);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return result.output;
  };
  const std::string chained = "aggregated: 1 to 2\n";
  const std::string again = "aggregated: 1 to 2 (outputs computed again backward)";
  EXPECT_NE(plan("").find(chained), std::string::npos) << plan("");
  EXPECT_NE(plan("--recompute-outputs on").find(again), std::string::npos);
  EXPECT_NE(plan("--device cuda").find(again), std::string::npos);
  EXPECT_NE(plan("--device cuda --recompute-outputs off").find(chained), std::string::npos);
  test::expect_one_line_error(test::run_nj("plan " + shell_quote(dataset) + " --recompute-outputs sometimes"));
  test::expect_one_line_error(test::run_nj("plan " + shell_quote(dataset) + " --chain-layers off"));
}

// nj plan and a budgeted nj train say how many logits the loss reads: the training split's.
TEST_F(TrainCli, PlanAndTrainingSayHowManyLogitsTheLossReads) {
  const auto training = std::ranges::count(test::random_dataset(200, 800, 8, 3, 2).train_mask, 1);
  const std::string line = fmt::format("plan: the loss reads {} of 200 logits", training);
  for (const std::string command : {"plan", "train --epochs 1"}) {
    const auto result = test::run_nj(command + " " + shell_quote(dataset) + " --device-memory 512K");
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find(line), std::string::npos) << result.output;
  }
}

// Vertices numbered by community are cut into subgraphs in their ids; as stored, by a breadth-first search.
TEST_F(TrainCli, PlanCutsInTheVertexOrdersIds) {
  for (const auto& [order, cut] : {std::pair{"community", "vertex-id"}, std::pair{"input", "breadth-first"}}) {
    const auto result =
        test::run_nj("--log-level debug plan " + shell_quote(dataset) + " --device-memory 48K --vertex-order " + order);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find(std::string("plan: ") + cut + " cut order in"), std::string::npos)
        << order << result.output;
  }
}

}  // namespace
}  // namespace nj
