// nj infer as a user runs it: a training checkpoint's predictions for every vertex, equal to the training run's own
// final evaluation, the same under a budget and on several ranks, in the dataset's own vertex ids, and readable by
// any HDF5 reader; mistakes are one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <regex>

#include "nj/exec/subgraph_executor.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/hdf5.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/train/checkpoint.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::shell_quote;

// What a test reads back of an inference file.
struct Inferred {
  hdf5::Array<float> logits;
  hdf5::Array<float> probabilities;
  hdf5::Array<std::int32_t> predictions;
  std::vector<hdf5::Array<float>> embeddings;  // layer 1, 2, ... where written
  double train = 0.0;
  double val = 0.0;
  double test = 0.0;
};

Inferred read_inferred(const std::string& path, int embedding_layers = 0) {
  const auto file = hdf5::File::open_read(path);
  Inferred out{file.read<float>("/logits"),
               file.read<float>("/probabilities"),
               file.read<std::int32_t>("/predictions"),
               {},
               file.float_attribute("train_accuracy"),
               file.float_attribute("val_accuracy"),
               file.float_attribute("test_accuracy")};
  for (int l = 1; l <= embedding_layers; ++l)
    out.embeddings.push_back(file.read<float>(fmt::format("/embeddings/layer{}", l)));
  return out;
}

// The largest difference between two arrays of one shape, relative to the largest magnitude in `expected`.
double relative_difference(const hdf5::Array<float>& expected, const hdf5::Array<float>& actual) {
  EXPECT_EQ(expected.shape, actual.shape);
  if (expected.shape != actual.shape) return INFINITY;
  double scale = 1.0;
  double largest = 0.0;
  for (std::size_t i = 0; i < expected.values.size(); ++i) {
    scale = std::max(scale, std::abs(double{expected.values[i]}));
    largest = std::max(largest, std::abs(double{expected.values[i]} - double{actual.values[i]}));
  }
  return largest / scale;
}

// The last record of a metrics file: the run's summary.
nlohmann::json summary_of(const std::string& metrics) {
  std::ifstream in(metrics);
  std::string last;
  for (std::string line; std::getline(in, line);) last = line;
  return nlohmann::json::parse(last);
}

// `data` with vertex v renamed new_id[v]: the same graph, features, labels and splits under other ids.
Dataset renamed(const Dataset& data, const std::vector<vid_t>& new_id) {
  const vid_t n = data.num_vertices();
  std::vector<vid_t> old_id(static_cast<std::size_t>(n));
  for (vid_t v = 0; v < n; ++v) old_id[static_cast<std::size_t>(new_id[static_cast<std::size_t>(v)])] = v;
  Dataset out;
  out.name = data.name;
  out.num_classes = data.num_classes;
  out.symmetrized = data.symmetrized;
  out.self_loops = data.self_loops;
  out.features = Matrix(n, data.features.cols());
  for (vid_t u = 0; u < n; ++u) {
    const vid_t v = old_id[static_cast<std::size_t>(u)];
    std::vector<vid_t> sources;
    for (const vid_t s : data.graph.in_neighbors(v)) sources.push_back(new_id[static_cast<std::size_t>(s)]);
    std::ranges::sort(sources);
    out.graph.sources.insert(out.graph.sources.end(), sources.begin(), sources.end());
    out.graph.offsets.push_back(out.graph.num_edges());
    std::copy(data.features.view().row(v), data.features.view().row(v) + data.features.cols(),
              out.features.view().row(u));
    const auto at = static_cast<std::size_t>(v);
    out.labels.push_back(data.labels[at]);
    out.train_mask.push_back(data.train_mask[at]);
    out.val_mask.push_back(data.val_mask[at]);
    out.test_mask.push_back(data.test_mask[at]);
  }
  return out;
}

class InferCli : public ::testing::Test {
 protected:
  void SetUp() override {
    write_dataset(dataset_, data_);
    const auto trained = test::run_nj("train " + shell_quote(dataset_) +
                                      " --threads 1 --model sage --hidden 16 --epochs 5 --save-checkpoint " +
                                      shell_quote(checkpoint_) + " --metrics-out " + shell_quote(metrics_));
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
  }
  test::CommandResult infer(const std::string& data, const std::string& output, const std::string& options = "") const {
    return test::run_nj("infer " + shell_quote(checkpoint_) + " " + data + " --threads 1 -o " + shell_quote(output) +
                        " " + options);
  }
  test::TempDir dir_;
  Dataset data_ = test::random_dataset(300, 1800, 12, 4, 7);
  std::string dataset_ = dir_.file("data.h5");
  std::string checkpoint_ = dir_.file("c.h5");
  std::string metrics_ = dir_.file("m.jsonl");
};

TEST_F(InferCli, PredictionsAreTheTrainingRunsFinalEvaluation) {
  const std::string out = dir_.file("out.h5");
  const auto run = infer(shell_quote(dataset_), out, "--embeddings all");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Inferred inferred = read_inferred(out, 2);
  const nlohmann::json final_accuracy = summary_of(metrics_)["final"];
  EXPECT_EQ(inferred.train, final_accuracy["train"].get<double>());
  EXPECT_EQ(inferred.val, final_accuracy["val"].get<double>());
  EXPECT_EQ(inferred.test, final_accuracy["test"].get<double>());
  EXPECT_NE(run.output.find(fmt::format("done: 300 vertices to {} | train {:.4f} val {:.4f} test {:.4f}", out,
                                        inferred.train, inferred.val, inferred.test)),
            std::string::npos)
      << run.output;
  ASSERT_EQ(inferred.logits.shape, (std::vector<hsize_t>{300, 4}));
  ASSERT_EQ(inferred.embeddings.front().shape, (std::vector<hsize_t>{300, 16}));
  EXPECT_EQ(relative_difference(inferred.logits, inferred.embeddings.back()), 0.0) << "the last layer's are the logits";
  // Predictions are each row's largest logit, and the probabilities its softmax; both agree with the accuracies.
  std::int64_t correct_test = 0;
  std::int64_t test_vertices = 0;
  for (std::size_t v = 0; v < 300; ++v) {
    const float* row = &inferred.logits.values[4 * v];
    const float* p = &inferred.probabilities.values[4 * v];
    EXPECT_EQ(inferred.predictions.values[v], std::max_element(row, row + 4) - row);
    EXPECT_NEAR(std::accumulate(p, p + 4, 0.0), 1.0, 1e-6);
    EXPECT_NEAR(std::log(p[0] / p[1]), double{row[0]} - row[1], 1e-4);
    if (data_.test_mask[v] != 0) {
      ++test_vertices;
      correct_test += inferred.predictions.values[v] == data_.labels[v] ? 1 : 0;
    }
  }
  EXPECT_DOUBLE_EQ(inferred.test, static_cast<double>(correct_test) / static_cast<double>(test_vertices));
  // Another reader of HDF5 reads it too.
  const auto dumped = test::run_shell("h5dump -A " + shell_quote(out));
  ASSERT_EQ(dumped.exit_code, 0) << dumped.output;
  for (const char* name : {"\"logits\"", "\"probabilities\"", "\"predictions\"", "\"layer1\"", "\"nj-inference-2\""}) {
    EXPECT_NE(dumped.output.find(name), std::string::npos) << name << "\n" << dumped.output;
  }
}

TEST_F(InferCli, ABudgetGivesTheSameRowsAsInMemoryAtThePeakNjPlanForecasts) {
  // A quarter of what inference of the whole graph needs at once.
  ModelConfig config;
  config.kind = ModelKind::kSage;
  config.hidden = 16;
  Model model(config, data_.features.cols(), data_.num_classes);
  const LocalGraph local = whole_local_graph(data_.graph);
  SubgraphExecutorOptions unlimited;
  unlimited.forward_only = true;
  const std::int64_t need =
      forecast_device_memory(model, local, data_.features.view(), plan_epoch(model, local, unlimited))
          .peak_footprint_bytes;
  const std::string budget = std::to_string(std::max(need / 4, minimum_device_budget(model, local, {}, true)));
  const std::string whole = dir_.file("whole.h5");
  const std::string budgeted = dir_.file("budgeted.h5");
  ASSERT_EQ(infer(shell_quote(dataset_), whole, "--embeddings 1").exit_code, 0);
  const std::string options = " --vertex-order input --device-memory " + budget;
  const auto run = infer(shell_quote(dataset_), budgeted, "--embeddings 1" + options);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto plan = test::run_nj("plan " + shell_quote(dataset_) + " --inference --model sage --hidden 16" + options);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  std::smatch planned;
  std::smatch measured;
  ASSERT_TRUE(std::regex_search(plan.output, planned, std::regex(R"(device memory: peak (\S+) of budget)")));
  ASSERT_TRUE(std::regex_search(run.output, measured, std::regex(R"(forward pass in .* \| peak (\S+) \|)")))
      << run.output;
  EXPECT_EQ(planned[1], measured[1]);
  const Inferred a = read_inferred(whole, 1);
  const Inferred b = read_inferred(budgeted, 1);
  EXPECT_LT(relative_difference(a.logits, b.logits), 1e-6);
  EXPECT_LT(relative_difference(a.embeddings[0], b.embeddings[0]), 1e-6);
  EXPECT_EQ(a.test, b.test);
}

TEST_F(InferCli, RowsFollowTheDatasetsOwnVertexIds) {
  std::vector<vid_t> new_id(300);
  std::iota(new_id.begin(), new_id.end(), 0);
  std::shuffle(new_id.begin(), new_id.end(), std::mt19937(11));
  const std::string shuffled = dir_.file("shuffled.h5");
  write_dataset(shuffled, renamed(data_, new_id));
  const std::string a_out = dir_.file("a.h5");
  const std::string b_out = dir_.file("b.h5");
  ASSERT_EQ(infer(shell_quote(dataset_), a_out).exit_code, 0);
  // The same graph under other ids is another structure in the ids a checkpoint records: it must be allowed.
  ASSERT_EQ(infer(shell_quote(shuffled), b_out, "--allow-other-graph").exit_code, 0);
  const Inferred a = read_inferred(a_out);
  const Inferred b = read_inferred(b_out);
  double scale = 1.0;
  for (const float x : a.logits.values) scale = std::max(scale, std::abs(double{x}));
  for (std::size_t v = 0; v < 300; ++v) {
    const auto u = static_cast<std::size_t>(new_id[v]);
    for (std::size_t c = 0; c < 4; ++c)
      ASSERT_NEAR(a.logits.values[4 * v + c], b.logits.values[4 * u + c], 1e-5 * scale);
  }
  EXPECT_EQ(a.test, b.test);
}

// Under mpirun each rank infers its own rows and rank 0 writes them all, in the dataset's ids.
using MultiRankInferCli = InferCli;

TEST_F(MultiRankInferCli, RanksGiveTheRowsOfOneProcess) {
  if (!test::have_mpirun()) GTEST_SKIP() << "no mpirun";
  const std::string one = dir_.file("one.h5");
  ASSERT_EQ(infer(shell_quote(dataset_), one, "--embeddings all").exit_code, 0);
  const Inferred expected = read_inferred(one, 2);
  const std::string folder = dir_.file("parts3");
  ASSERT_EQ(test::run_nj("partition " + shell_quote(dataset_) + " --parts 3 -o " + shell_quote(folder)).exit_code, 0);
  for (const auto& [ranks, data] :
       {std::pair{2, shell_quote(dataset_)}, std::pair{3, "--partitions " + shell_quote(folder)}}) {
    SCOPED_TRACE(fmt::format("{} ranks", ranks));
    const std::string out = dir_.file(fmt::format("ranks{}.h5", ranks));
    const auto run =
        test::run_nj_ranks(ranks, "infer " + shell_quote(checkpoint_) + " " + data +
                                      " --threads 1 --embeddings all --device-memory 1M -o " + shell_quote(out));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    // The ranks' graph is the one process's that trained: nothing to warn of.
    EXPECT_EQ(run.output.find("was trained on"), std::string::npos) << run.output;
    const Inferred inferred = read_inferred(out, 2);
    EXPECT_LT(relative_difference(expected.logits, inferred.logits), 1e-6);
    EXPECT_LT(relative_difference(expected.embeddings[0], inferred.embeddings[0]), 1e-6);
    EXPECT_EQ(expected.train, inferred.train);
    EXPECT_EQ(expected.test, inferred.test);
  }
}

// Shards whose global ids lie beyond 2^32, spread out and in no order (test::spread_id), written directly: two ranks
// train on them, without dropout, the losses they train on the shards nj partition wrote (ids 0..n-1), and infer
// the rows of one process, in ascending order of those ids, which /vertex_ids lists.
TEST_F(MultiRankInferCli, ShardsWithSpreadIdsTrainAndInferAsTheDatasetsOwn) {
  if (!test::have_mpirun()) GTEST_SKIP() << "no mpirun";
  const std::string small = dir_.file("small");
  const std::string spread = dir_.file("spread");
  ASSERT_EQ(test::run_nj("partition " + shell_quote(dataset_) + " --parts 2 -o " + shell_quote(small)).exit_code, 0);
  std::filesystem::create_directory(spread);
  std::filesystem::copy_file(small + "/manifest.json", spread + "/manifest.json");
  for (const int part : {0, 1}) {
    Shard shard = read_shard(small + "/" + shard_file_name(part));
    for (gid_t& id : shard.local.global_id) id = test::spread_id(id);
    write_shard(spread + "/" + shard_file_name(part), shard);
  }
  const auto losses_of = [&](const std::string& folder) {
    const std::string metrics = dir_.file("m-" + std::filesystem::path(folder).filename().string() + ".jsonl");
    const auto run =
        test::run_nj_ranks(2, "train --partitions " + shell_quote(folder) +
                                  " --threads 1 --dropout 0 --epochs 4 --metrics-out " + shell_quote(metrics));
    EXPECT_EQ(run.exit_code, 0) << run.output;
    std::vector<double> losses;
    std::ifstream in(metrics);
    for (std::string line; std::getline(in, line);) {
      const auto record = nlohmann::json::parse(line);
      if (record["type"] == "epoch") losses.push_back(record["loss"].get<double>());
    }
    return losses;
  };
  const std::vector<double> expected_losses = losses_of(small);
  const std::vector<double> losses = losses_of(spread);
  ASSERT_EQ(losses.size(), 4U);
  ASSERT_EQ(expected_losses.size(), 4U);
  for (std::size_t e = 0; e < losses.size(); ++e) EXPECT_NEAR(losses[e], expected_losses[e], 1e-5 * losses[e]);

  const std::string one = dir_.file("one.h5");
  ASSERT_EQ(infer(shell_quote(dataset_), one).exit_code, 0);
  const Inferred expected = read_inferred(one);
  const std::string out = dir_.file("spread.h5");
  // Other ids make another structure of the graph the checkpoint records: it must be allowed.
  const auto run = test::run_nj_ranks(2, "infer " + shell_quote(checkpoint_) + " --partitions " + shell_quote(spread) +
                                             " --threads 1 --allow-other-graph -o " + shell_quote(out));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Inferred inferred = read_inferred(out);
  const auto ids = hdf5::File::open_read(out).read<gid_t>("/vertex_ids").values;
  std::vector<std::int64_t> vertex_of_row(300);
  std::iota(vertex_of_row.begin(), vertex_of_row.end(), 0);
  std::ranges::sort(vertex_of_row, {}, [](std::int64_t v) { return test::spread_id(v); });
  ASSERT_EQ(ids.size(), 300U);
  for (std::size_t r = 0; r < ids.size(); ++r) {
    const auto v = static_cast<std::size_t>(vertex_of_row[r]);
    ASSERT_EQ(ids[r], test::spread_id(vertex_of_row[r])) << "row " << r;
    for (std::size_t c = 0; c < 4; ++c) {
      ASSERT_NEAR(inferred.logits.values[4 * r + c], expected.logits.values[4 * v + c], 1e-5) << "row " << r;
    }
  }
  EXPECT_EQ(expected.test, inferred.test);
  EXPECT_EQ(hdf5::File::open_read(one).read<gid_t>("/vertex_ids").values.back(), 299);
}

// Ranks record in a checkpoint the graph one process records: its edges' hash is in the dataset's ids, whatever the
// partition, from a dataset file or a partition folder.
TEST_F(MultiRankInferCli, RanksRecordTheGraphOfOneProcess) {
  if (!test::have_mpirun()) GTEST_SKIP() << "no mpirun";
  const std::optional<GraphIdentity> one = read_checkpoint_summary(checkpoint_).run.graph;
  ASSERT_TRUE(one.has_value());
  const std::string folder = dir_.file("parts3");
  ASSERT_EQ(test::run_nj("partition " + shell_quote(dataset_) + " --parts 3 -o " + shell_quote(folder)).exit_code, 0);
  for (const auto& [ranks, data] :
       {std::pair{2, shell_quote(dataset_)}, std::pair{3, "--partitions " + shell_quote(folder)}}) {
    SCOPED_TRACE(fmt::format("{} ranks", ranks));
    const std::string saved = dir_.file(fmt::format("ranks{}.h5", ranks));
    const auto run = test::run_nj_ranks(ranks, "train " + data + " --threads 1 --model sage --hidden 16 --epochs 1 " +
                                                   "--device-memory 1M --save-checkpoint " + shell_quote(saved));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(read_checkpoint_summary(saved).run.graph, one);
  }
}

// A checkpoint trained on another graph is refused in one line saying what differs, unless --allow-other-graph is
// given, which warns once and infers.
TEST_F(InferCli, AnotherGraphIsRefusedSayingWhatDiffersUnlessAllowed) {
  const std::string out = dir_.file("out.h5");
  const std::string edges = std::to_string(data_.graph.num_edges());
  // The same name and counts, another structure: the graph under other vertex ids.
  std::vector<vid_t> new_id(300);
  std::iota(new_id.begin(), new_id.end(), 0);
  std::shuffle(new_id.begin(), new_id.end(), std::mt19937(5));
  const std::string shuffled = dir_.file("shuffled.h5");
  write_dataset(shuffled, renamed(data_, new_id));
  EXPECT_EQ(test::the_error_line(infer(shell_quote(shuffled), out)),
            "nj: error: " + checkpoint_ + " was trained on graph 'random' (300 vertices, " + edges +
                " edges), not on this graph of the same name and counts: the structure differs; give "
                "--allow-other-graph to use it anyway");
  // Another name and counts, the same widths.
  Dataset other = test::random_dataset(120, 500, 12, 4, 3);
  other.name = "other";
  const std::string other_path = dir_.file("other.h5");
  write_dataset(other_path, other);
  const std::string difference = checkpoint_ + " was trained on graph 'random' (300 vertices, " + edges +
                                 " edges), not on graph 'other' (120 vertices, " +
                                 std::to_string(other.graph.num_edges()) +
                                 " edges): the name, vertex count and edge count differ";
  EXPECT_EQ(test::the_error_line(infer(shell_quote(other_path), out)),
            "nj: error: " + difference + "; give --allow-other-graph to use it anyway");
  EXPECT_FALSE(std::filesystem::exists(out));
  const auto allowed = infer(shell_quote(other_path), out, "--allow-other-graph");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.output;
  const std::string warning = difference + "; using it anyway (--allow-other-graph)\n";
  const std::size_t at = allowed.output.find(warning);
  ASSERT_NE(at, std::string::npos) << allowed.output;
  EXPECT_EQ(allowed.output.find(warning, at + 1), std::string::npos) << "warned more than once\n" << allowed.output;
  EXPECT_EQ(read_inferred(out).logits.shape, (std::vector<hsize_t>{120, 4}));
}

// /embeddings/layer<L> is the output of the model's L-th layer as its user counts them: GIN's whole layer, its MLP
// included, and APPNP's MLP layers with its propagation as one more; --embeddings counts so too.
TEST_F(InferCli, EmbeddingsAreTheModelsLayers) {
  for (const auto& [model, widths] : {std::pair{std::string("gin"), std::vector<hsize_t>{16, 4}},
                                      std::pair{std::string("appnp"), std::vector<hsize_t>{16, 4, 4}}}) {
    SCOPED_TRACE(model);
    const std::string checkpoint = dir_.file(model + ".h5");
    const std::string out = dir_.file(model + "-out.h5");
    ASSERT_EQ(test::run_nj("train " + shell_quote(dataset_) + " --threads 1 --model " + model +
                           " --layers 2 --hidden 16 --epochs 2 --save-checkpoint " + shell_quote(checkpoint))
                  .exit_code,
              0);
    const auto run = test::run_nj("infer " + shell_quote(checkpoint) + " " + shell_quote(dataset_) +
                                  " --threads 1 --embeddings all -o " + shell_quote(out));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const auto file = hdf5::File::open_read(out);
    std::vector<std::string> expected;
    for (std::size_t l = 1; l <= widths.size(); ++l) expected.push_back(fmt::format("layer{}", l));
    ASSERT_EQ(file.members("/embeddings"), expected);
    const Inferred inferred = read_inferred(out, static_cast<int>(widths.size()));
    for (std::size_t l = 0; l < widths.size(); ++l) {
      EXPECT_EQ(inferred.embeddings[l].shape, (std::vector<hsize_t>{300, widths[l]})) << "layer " << l + 1;
    }
    EXPECT_EQ(relative_difference(inferred.logits, inferred.embeddings.back()), 0.0)
        << "the last layer's are the logits";
  }
  EXPECT_EQ(test::expect_one_line_error(test::run_nj("infer " + shell_quote(dir_.file("appnp.h5")) + " " +
                                                     shell_quote(dataset_) + " --embeddings 4 -o " +
                                                     shell_quote(dir_.file("out.h5")))),
            "nj: error: --embeddings 4: give layer numbers from 1 to 3 (this model's layers), or all\n");
}

// Checkpoints that nj wrote before format 3 record no graph and name their arrays by the layers as the model built
// them: they infer what that build inferred, with a warning, and its embeddings under the model's layer numbers
// (GIN's layer 2 was its fourth built layer, APPNP's propagation its fifth).
TEST(InferFormat2Cli, ACheckpointWithoutAGraphInfersWhatItsBuildInferred) {
  const std::string fixtures = std::string(NJ_SOURCE_DIR) + "/tests/fixtures/format2/";
  const test::TempDir dir;
  for (const auto& [model, built] : {std::pair{std::string("gin"), std::vector<int>{2, 4}},
                                     std::pair{std::string("appnp"), std::vector<int>{1, 2, 5}}}) {
    SCOPED_TRACE(model);
    const std::string out = dir.file(model + ".h5");
    const auto run =
        test::run_nj("infer " + shell_quote(fixtures + model + ".h5") + " " + shell_quote(fixtures + "graph.h5") +
                     " --threads 1 --embeddings all -o " + shell_quote(out));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find(model + ".h5: records no graph (a checkpoint of format 2 or older): cannot check that "
                                      "it was trained on this one"),
              std::string::npos)
        << run.output;
    const auto then = hdf5::File::open_read(fixtures + model + "-pred.h5");
    const auto now = hdf5::File::open_read(out);
    EXPECT_LT(relative_difference(then.read<float>("/logits"), now.read<float>("/logits")), 1e-6);
    ASSERT_EQ(now.members("/embeddings").size(), built.size());
    for (std::size_t l = 0; l < built.size(); ++l) {
      EXPECT_LT(relative_difference(then.read<float>(fmt::format("/embeddings/layer{}", built[l])),
                                    now.read<float>(fmt::format("/embeddings/layer{}", l + 1))),
                1e-6)
          << "layer " << l + 1;
    }
  }
}

// A training run's configuration file and command line infer as they are: the model comes from the checkpoint, and
// the options only training uses are accepted.
TEST_F(InferCli, TrainingsConfigurationFileInfers) {
  const std::string config = dir_.file("sage.toml");
  std::ofstream(config) << "model = \"sage\"\nhidden = 16\nepochs = 5\nlr = 0.01\nfeature-norm = \"none\"\n"
                           "threads = 1\neval-every = 1\n";
  const std::string out = dir_.file("out.h5");
  const auto run = test::run_nj("infer " + shell_quote(checkpoint_) + " " + shell_quote(dataset_) + " --config " +
                                shell_quote(config) + " --weight-decay 0.1 -o " + shell_quote(out));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(read_inferred(out).test, summary_of(metrics_)["final"]["test"].get<double>());
}

TEST_F(InferCli, MistakesAreOneLine) {
  const std::string out = dir_.file("out.h5");
  const Dataset other = test::random_dataset(100, 400, 5, 4, 3);
  const std::string other_path = dir_.file("other.h5");
  write_dataset(other_path, other);
  // Found once the data is loaded, after its log lines; another graph's, it says so first.
  EXPECT_NE(test::the_error_line(infer(shell_quote(other_path), out)).find("give --allow-other-graph to use it anyway"),
            std::string::npos);
  EXPECT_NE(test::the_error_line(infer(shell_quote(other_path), out, "--allow-other-graph"))
                .find("its model does not fit this data: parameter"),
            std::string::npos);
  EXPECT_NE(test::expect_one_line_error(infer(shell_quote(dataset_), out, "--embeddings 3"))
                .find("--embeddings 3: give layer numbers from 1 to 2"),
            std::string::npos);
  EXPECT_NE(test::expect_one_line_error(infer(shell_quote(dataset_), out, "--execution recompute --device-memory 1M"))
                .find("nj infer runs in memory or with --execution reuse"),
            std::string::npos);
  EXPECT_NE(test::expect_one_line_error(test::run_nj("infer " + shell_quote(dataset_) + " " + shell_quote(dataset_) +
                                                     " -o " + shell_quote(out)))
                .find("not a checkpoint written by nj train"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace nj
