// Checkpoints: what they restore, what they refuse, and the folder that --checkpoint-dir keeps.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "nj/graph/vertex_order.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/hdf5.hpp"
#include "nj/partition/partition.hpp"
#include "nj/train/checkpoint.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

ModelConfig gcn() {
  ModelConfig c;
  c.hidden = 4;
  return c;
}

// A model, its optimizer and its progress, with values a checkpoint must carry exactly.
struct TrainingState {
  explicit TrainingState(const ModelConfig& config, float fill) : model(config, 6, 3), adam(model.parameters(), {}) {
    float value = fill;
    for (Parameter* p : model.parameters()) {
      for (float& w : p->value.span()) w = (value += 0.25F);
    }
    for (Matrix& m : adam.first_moments()) m.fill(fill + 1.0F);
    for (Matrix& v : adam.second_moments()) v.fill(fill + 2.0F);
    adam.set_steps(static_cast<std::int64_t>(fill) + 3);
    progress.next_epoch = 5;
    progress.best_val_epoch = 1;
    progress.best_val_accuracy = {0.5, 0.25, 0.125};
    progress.final_accuracy = {0.75, Accuracy::kNone, 0.0};
  }
  std::vector<std::vector<float>> weights() {
    std::vector<std::vector<float>> all;
    for (const Parameter* p : model.parameters()) all.emplace_back(p->value.span().begin(), p->value.span().end());
    return all;
  }
  Model model;
  Adam adam;
  TrainingProgress progress;
};

const GraphIdentity kCora{"cora", 2708, 10556, 0x0123456789ABCDEFULL};
const RunIdentity kRun{"gcn", "cora", "one rank", "Adam", kCora};

// A graph's identity as one process computes it.
GraphIdentity graph_of(const Shard& shard) { return identify_graph(shard, *make_single_process_communicator()); }

// Checkpoints that nj wrote before format 3, of a GIN and an APPNP on the graph beside them.
const std::string kFormat2 = std::string(NJ_SOURCE_DIR) + "/tests/fixtures/format2/";

// Renames a GCN's checkpoint's arrays as builds before format 3 named them, with layers counted from 0.
void name_layers_from_zero(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> renames;
  for (const char* group : {"/params/", "/adam_m/", "/adam_v/"}) {
    for (const std::string& name : hdf5::File::open_read(path).members(group)) {
      const std::size_t dot = name.find('.');
      const std::size_t digits = std::string("layer").size();
      const int layer = std::stoi(name.substr(digits, dot - digits));
      renames.emplace_back(group + name, fmt::format("{}layer{}{}", group, layer - 1, name.substr(dot)));
    }
  }
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  for (const auto& [from, to] : renames) {
    EXPECT_GE(H5Lmove(file, from.c_str(), file, to.c_str(), H5P_DEFAULT, H5P_DEFAULT), 0) << from;
  }
  H5Fclose(file);
}

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

class CheckpointTest : public ::testing::Test {
 protected:
  test::TempDir dir;
};

TEST_F(CheckpointTest, RestoresWeightsMomentsStepsAndProgressExactly) {
  TrainingState saved(gcn(), 1.0F);
  save_checkpoint(dir.file("c.h5"), kRun, saved.progress, saved.adam);
  TrainingState loaded(gcn(), 9.0F);
  const TrainingProgress progress = load_checkpoint(dir.file("c.h5"), kRun, loaded.adam);
  EXPECT_EQ(loaded.weights(), saved.weights());
  for (std::size_t i = 0; i < saved.adam.parameters().size(); ++i) {
    EXPECT_EQ(loaded.adam.first_moments()[i].data()[0], 2.0F);
    EXPECT_EQ(loaded.adam.second_moments()[i].data()[0], 3.0F);
  }
  EXPECT_EQ(loaded.adam.steps(), 4);
  EXPECT_EQ(progress.next_epoch, 5U);
  EXPECT_EQ(progress.best_val_epoch, 1U);
  EXPECT_EQ(progress.best_val_accuracy.test, 0.125);
  EXPECT_TRUE(std::isnan(progress.final_accuracy.val));
  EXPECT_FALSE(std::filesystem::exists(dir.file("c.h5.partial")));
}

TEST_F(CheckpointTest, ADifferentRunIsRefusedNamingEveryPartThatDiffers) {
  TrainingState state(gcn(), 1.0F);
  save_checkpoint(dir.file("c.h5"), kRun, state.progress, state.adam);
  RunIdentity other = kRun;
  other.dataset = "citeseer";
  other.partitioning = "2 ranks";
  try {
    load_checkpoint(dir.file("c.h5"), other, state.adam);
    FAIL() << "a checkpoint of another dataset was loaded";
  } catch (const CheckpointMismatch& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("dataset: checkpoint has 'cora', this run has 'citeseer'"), std::string::npos) << message;
    EXPECT_NE(message.find("partitioning: checkpoint has 'one rank', this run has '2 ranks'"), std::string::npos)
        << message;
    EXPECT_EQ(message.find("model:"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST_F(CheckpointTest, IdentityTellsModelsDatasetsPartitionsAndOptimizersApart) {
  const Dataset data = test::random_dataset(40, 160, 6, 3, 1);
  const Shard shard = whole_graph_shard(Dataset(data));
  const TrainOptions options;
  const GraphIdentity graph = graph_of(shard);
  const RunIdentity base = identify_run(gcn(), shard, graph, "none", options);
  EXPECT_EQ(describe_differences(base, identify_run(gcn(), shard, graph, "none", options)), "");

  ModelConfig wider = gcn();
  wider.hidden = 8;
  EXPECT_TRUE(describe_differences(base, identify_run(wider, shard, graph, "none", options)).starts_with("model: "));
  EXPECT_TRUE(describe_differences(base, identify_run(gcn(), shard, graph, "row", options)).starts_with("dataset: "));
  TrainOptions decayed = options;
  decayed.adam.weight_decay = 0.5F;
  EXPECT_TRUE(
      describe_differences(base, identify_run(gcn(), shard, graph, "none", decayed)).starts_with("optimizer: "));
  Shard part = whole_graph_shard(Dataset(data));
  part.partition.parts = 2;
  part.partition.method = "metis";
  EXPECT_TRUE(
      describe_differences(base, identify_run(gcn(), part, graph, "none", options)).starts_with("partitioning: "));
  // Training for more epochs is what resuming is for, and at another learning rate what fine-tuning is.
  TrainOptions longer = options;
  longer.epochs = options.epochs + 100;
  longer.adam.lr = 0.5F;
  EXPECT_EQ(describe_differences(base, identify_run(gcn(), shard, graph, "none", longer)), "");
}

// A GCN has no heads and no attention: options only a GAT uses do not tell GCN runs apart.
TEST_F(CheckpointTest, IdentityOfAModelLeavesOutTheOptionsItsKindDoesNotUse) {
  const Shard shard = whole_graph_shard(test::random_dataset(40, 160, 6, 3, 1));
  const GraphIdentity graph = graph_of(shard);
  const TrainOptions options;
  ModelConfig other_heads = gcn();
  other_heads.heads = 3;
  other_heads.output_heads = 2;
  other_heads.attention_dropout = 0.1F;
  EXPECT_EQ(describe_differences(identify_run(gcn(), shard, graph, "none", options),
                                 identify_run(other_heads, shard, graph, "none", options)),
            "");
  ModelConfig gat = other_heads;
  gat.kind = ModelKind::kGat;
  ModelConfig gat_heads = gat;
  gat_heads.heads = 4;
  EXPECT_TRUE(describe_differences(identify_run(gat, shard, graph, "none", options),
                                   identify_run(gat_heads, shard, graph, "none", options))
                  .starts_with("model: "));
  EXPECT_EQ(describe_model(gcn()), "gcn, 2 layers, hidden 4, activation relu, dropout 0.5, seed 0");
}

// The hash of a graph's edges in its global ids: the parts of any partition add up to the whole graph's, in any
// vertex order, and another graph of the same counts, or the same edges one of them reversed, hash apart.
TEST(GraphIdentity, IsTheWholeGraphsWhateverThePartitionAndVertexOrder) {
  const Dataset data = test::random_dataset(60, 300, 4, 3, 5);
  Shard whole = whole_graph_shard(Dataset(data));
  const GraphIdentity graph = graph_of(whole);
  EXPECT_EQ(graph.name, "random");
  EXPECT_EQ(graph.vertices, 60);
  EXPECT_EQ(graph.edges, data.graph.num_edges());
  order_vertices(whole, VertexOrder::kCommunity);
  EXPECT_EQ(graph_of(whole), graph);
  for (const int parts : {2, 3}) {
    PartitionOptions options;
    options.method = PartitionMethod::kRandom;
    options.parts = parts;
    PartitionInfo info;
    const std::vector<std::int32_t> part_of = assign_parts(data, options, info);
    std::uint64_t sum = 0;
    for (int part = 0; part < parts; ++part) sum += owned_edges_hash(make_shard(data, part_of, part, info).local);
    EXPECT_EQ(sum, graph.structure) << parts << " parts";
  }
  // One edge u -> v turned into v -> u, which the graph did not hold: the same counts, another structure.
  Dataset reversed = data;
  CsrGraph& g = reversed.graph;
  const vid_t v = 0;
  const vid_t u = g.in_neighbors(v).front();
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
  for (vid_t d = 0; d < g.num_vertices(); ++d) {
    for (const vid_t s : g.in_neighbors(d)) {
      const bool turned = s == u && d == v;
      src.push_back(turned ? v : s);
      dst.push_back(turned ? u : d);
    }
  }
  g = build_csr(g.num_vertices(), src, dst);
  ASSERT_EQ(g.num_edges(), data.graph.num_edges());
  EXPECT_NE(graph_of(whole_graph_shard(std::move(reversed))).structure, graph.structure);
}

// nj infer and --load-checkpoint refuse a checkpoint of another graph, saying what differs, unless allowed; --resume
// counts another structure among the differences of a different run.
TEST_F(CheckpointTest, AnotherGraphIsRefusedSayingWhatDiffersUnlessAllowed) {
  TrainingState state(gcn(), 1.0F);
  const std::string path = dir.file("c.h5");
  save_checkpoint(path, kRun, state.progress, state.adam);
  EXPECT_EQ(read_checkpoint_summary(path).run.graph, kCora);
  const GraphIdentity citeseer{"citeseer", 3327, 9104, 7};
  GraphIdentity rewired = kCora;
  rewired.structure += 1;
  EXPECT_EQ(
      message_of([&] { check_graph(path, kCora, citeseer, OtherGraph::kRefused); }),
      path +
          " was trained on graph 'cora' (2708 vertices, 10556 edges), not on graph 'citeseer' (3327 vertices, 9104 "
          "edges): the name, vertex count and edge count differ; give --allow-other-graph to use it anyway");
  EXPECT_EQ(message_of([&] { check_graph(path, kCora, rewired, OtherGraph::kRefused); }),
            path +
                " was trained on graph 'cora' (2708 vertices, 10556 edges), not on this graph of the same name and "
                "counts: the structure differs; give --allow-other-graph to use it anyway");
  GraphIdentity unnamed = kCora;
  unnamed.name.clear();
  EXPECT_EQ(message_of([&] { check_graph(path, kCora, unnamed, OtherGraph::kRefused); }),
            path +
                " was trained on graph 'cora' (2708 vertices, 10556 edges), not on a graph without a name (2708 "
                "vertices, 10556 edges): the name differs; give --allow-other-graph to use it anyway");
  EXPECT_EQ(message_of([&] { check_graph(path, kCora, kCora, OtherGraph::kRefused); }), "no error");
  EXPECT_EQ(message_of([&] { check_graph(path, kCora, citeseer, OtherGraph::kAllowed); }), "no error");
  EXPECT_EQ(message_of([&] { check_graph(path, std::nullopt, citeseer, OtherGraph::kRefused); }), "no error");

  RunIdentity other = kRun;
  other.graph = rewired;
  EXPECT_THROW(load_checkpoint(path, other, state.adam, OtherGraph::kRefused), CheckpointMismatch);
  const std::string resumed = message_of([&] { load_checkpoint(path, other, state.adam); });
  EXPECT_NE(resumed.find("graph structure: checkpoint has '0123456789abcdef', this run has '0123456789abcdf0'"),
            std::string::npos)
      << resumed;
  // Allowed, the graph's own dataset and partitioning may differ too, but not the model.
  other.dataset = "citeseer";
  other.partitioning = "2 ranks";
  EXPECT_EQ(load_checkpoint(path, other, state.adam, OtherGraph::kAllowed).next_epoch, 5U);
  other.model = "gat";
  EXPECT_THROW(load_checkpoint(path, other, state.adam, OtherGraph::kAllowed), CheckpointMismatch);
}

// The summary gives every model option, the learning rate and the progress with epochs counted from 1 in the
// file: what nj info shows and what a run that gives no model options takes.
TEST_F(CheckpointTest, SummaryHoldsTheModelOptionsAndEpochsCountedFromOne) {
  ModelConfig config = gcn();
  config.kind = ModelKind::kGat;
  config.heads = 2;
  config.seed = 0xFFFFFFFFFFFFFFF0ULL;
  TrainingState state(config, 1.0F);
  RunIdentity run = kRun;
  run.model_options = config;
  run.lr = 0.25F;
  save_checkpoint(dir.file("c.h5"), run, state.progress, state.adam);
  EXPECT_TRUE(is_checkpoint_file(dir.file("c.h5")));
  const CheckpointSummary summary = read_checkpoint_summary(dir.file("c.h5"));
  EXPECT_EQ(summary.format, kCheckpointFormat);
  ASSERT_TRUE(summary.model.has_value());
  EXPECT_EQ(summary.model->kind, ModelKind::kGat);
  EXPECT_EQ(summary.model->heads, 2);
  EXPECT_EQ(summary.model->seed, config.seed);
  EXPECT_EQ(summary.run.lr, 0.25F);
  EXPECT_EQ(summary.progress.next_epoch, 5U);
  EXPECT_EQ(summary.progress.best_val_epoch, 1U);
  EXPECT_EQ(summary.adam_steps, 4);
  EXPECT_EQ(summary.parameters.size(), state.adam.parameters().size());
  const auto file = hdf5::File::open_read(dir.file("c.h5"));
  EXPECT_EQ(file.int_attribute("epochs_done"), 5);
  EXPECT_EQ(file.int_attribute("best_val_epoch"), 2);  // the second epoch, counted from 1
}

// Format 1 counted the best epoch from 0 and described every model option and the learning rate in the identity:
// such a checkpoint loads as it did, under this build's identity, with its model options recovered.
TEST_F(CheckpointTest, AFormatOneCheckpointStillLoads) {
  const Shard shard = whole_graph_shard(test::random_dataset(40, 160, 6, 3, 1));
  TrainOptions options;
  options.adam.lr = 0.02F;
  const RunIdentity run = identify_run(gcn(), shard, graph_of(shard), "none", options);
  TrainingState saved(gcn(), 1.0F);
  save_checkpoint(dir.file("c.h5"), run, saved.progress, saved.adam);
  {
    auto file = hdf5::File::open_write(dir.file("c.h5"));
    file.set_attribute("format", std::string("nj-checkpoint 1"));
    file.set_attribute("model",
                       std::string("gcn, 2 layers, hidden 4, heads 8, output heads 1, activation relu, dropout 0.5, "
                                   "attention dropout 0.6, seed 0"));
    file.set_attribute("optimizer", "Adam lr 0.02, " + run.optimizer.substr(std::string("Adam ").size()));
    file.set_attribute("next_epoch", std::int64_t{5});
    file.set_attribute("best_val_epoch", std::int64_t{1});  // counted from 0
  }
  name_layers_from_zero(dir.file("c.h5"));
  const CheckpointSummary summary = read_checkpoint_summary(dir.file("c.h5"));
  EXPECT_EQ(summary.format, 1);
  EXPECT_FALSE(summary.run.graph.has_value());
  EXPECT_EQ(summary.run.model, run.model);
  EXPECT_EQ(summary.run.lr, 0.02F);
  ASSERT_TRUE(summary.model.has_value());
  EXPECT_EQ(summary.model->hidden, 4);
  TrainingState loaded(gcn(), 9.0F);
  const TrainingProgress progress = load_checkpoint(dir.file("c.h5"), run, loaded.adam);
  EXPECT_EQ(loaded.weights(), saved.weights());
  EXPECT_EQ(progress.next_epoch, 5U);
  EXPECT_EQ(progress.best_val_epoch, 1U);

  hdf5::File::open_write(dir.file("c.h5")).set_attribute("format", std::string("nj-checkpoint 9"));
  EXPECT_NE(
      message_of([&] { read_checkpoint_summary(dir.file("c.h5")); }).find("format '9' is not one this build reads"),
      std::string::npos);
}

// Parameters are named by the model's layers, counted from 1, and within a layer by their part and role: GIN's ε
// and its MLP's two Linear maps, APPNP's MLP layers (its propagation has none). Numbers have the digits of the
// largest, so that the names sort as the layers do.
TEST_F(CheckpointTest, ParametersAreNamedByTheModelsLayers) {
  const auto names_of = [&](const ModelConfig& config) {
    TrainingState state(config, 1.0F);
    save_checkpoint(dir.file("names.h5"), kRun, state.progress, state.adam);
    std::vector<std::string> names;
    for (const auto& [name, shape] : read_checkpoint_summary(dir.file("names.h5")).parameters) names.push_back(name);
    return names;
  };
  ModelConfig gin = gcn();
  gin.kind = ModelKind::kGin;
  gin.gin_train_eps = true;
  EXPECT_EQ(names_of(gin), (std::vector<std::string>{"layer1.eps", "layer1.linear1.bias", "layer1.linear1.weight",
                                                     "layer1.linear2.bias", "layer1.linear2.weight", "layer2.eps",
                                                     "layer2.linear1.bias", "layer2.linear1.weight",
                                                     "layer2.linear2.bias", "layer2.linear2.weight"}));
  ModelConfig appnp = gcn();
  appnp.kind = ModelKind::kAppnp;
  EXPECT_EQ(names_of(appnp),
            (std::vector<std::string>{"layer1.bias", "layer1.weight", "layer2.bias", "layer2.weight"}));
  ModelConfig deep = gcn();
  deep.layers = 10;
  const std::vector<std::string> deep_names = names_of(deep);
  ASSERT_EQ(deep_names.size(), 20U);
  EXPECT_EQ(deep_names.front(), "layer01.bias");
  EXPECT_EQ(deep_names[17], "layer09.weight");
  EXPECT_EQ(deep_names.back(), "layer10.weight");
}

// A checkpoint of format 2 records no graph and names its arrays by the layers as the model built them, from 0:
// its weights load into the layers they were trained in, under this build's names.
TEST_F(CheckpointTest, AFormatTwoCheckpointLoadsIntoTheLayersItsNamesCounted) {
  const CheckpointSummary summary = read_checkpoint_summary(kFormat2 + "gin.h5");
  EXPECT_EQ(summary.format, 2);
  EXPECT_FALSE(summary.run.graph.has_value());
  ASSERT_TRUE(summary.model.has_value());
  EXPECT_EQ(summary.model->kind, ModelKind::kGin);
  EXPECT_TRUE(summary.model->gin_train_eps);
  Model model(*summary.model, 6, 3);
  load_weights(kFormat2 + "gin.h5", model);
  const auto file = hdf5::File::open_read(kFormat2 + "gin.h5");
  std::map<std::string, const Parameter*> by_name;
  for (const Parameter* p : model.parameters()) by_name[p->name] = p;
  // Layer l of the GIN was built as layers 2(l - 1) (ε and the first Linear) and 2(l - 1) + 1 (the second).
  for (const auto& [old, name] :
       std::vector<std::pair<std::string, std::string>>{{"layer0.weight", "layer1.linear1.weight"},
                                                        {"layer0.eps", "layer1.eps"},
                                                        {"layer1.weight", "layer1.linear2.weight"},
                                                        {"layer1.bias", "layer1.linear2.bias"},
                                                        {"layer2.weight", "layer2.linear1.weight"},
                                                        {"layer3.bias", "layer2.linear2.bias"}}) {
    ASSERT_TRUE(by_name.contains(name)) << name;
    const auto stored = file.read<float>("/params/" + old);
    EXPECT_EQ(stored.values, std::vector<float>(by_name[name]->value.span().begin(), by_name[name]->value.span().end()))
        << old << " as " << name;
  }
  // And with its optimizer's state, as --load-checkpoint reads it.
  Adam adam(model.parameters(), {});
  RunIdentity run = summary.run;
  run.graph = kCora;
  EXPECT_EQ(load_checkpoint(kFormat2 + "gin.h5", run, adam, OtherGraph::kRefused).next_epoch, 3U);
  EXPECT_EQ(adam.steps(), 3);
}

TEST_F(CheckpointTest, DamagedFilesAreOneLineErrorsThatLeaveTheModelAsItWas) {
  TrainingState state(gcn(), 1.0F);
  save_checkpoint(dir.file("c.h5"), kRun, state.progress, state.adam);
  std::filesystem::copy_file(dir.file("c.h5"), dir.file("truncated.h5"));
  std::filesystem::resize_file(dir.file("truncated.h5"), std::filesystem::file_size(dir.file("c.h5")) - 100);
  write_dataset(dir.file("dataset.h5"), test::random_dataset(20, 40, 6, 3, 1));
  std::ofstream(dir.file("text.h5")) << "not hdf5\n";

  TrainingState target(gcn(), 9.0F);
  const auto before = target.weights();
  for (const char* name : {"truncated.h5", "dataset.h5", "text.h5", "missing.h5"}) {
    const std::string message = message_of([&] { load_checkpoint(dir.file(name), kRun, target.adam); });
    EXPECT_NE(message.find(dir.file(name)), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(target.weights(), before) << name;
  }
  EXPECT_NE(message_of([&] {
              load_checkpoint(dir.file("dataset.h5"), kRun, target.adam);
            }).find("not a NeutronJittor checkpoint"),
            std::string::npos);
}

TEST_F(CheckpointTest, NonFiniteOrMisshapenValuesAreRefusedNamingTheObject) {
  TrainingState state(gcn(), 1.0F);
  const std::string name = state.adam.parameters()[1]->name;
  state.adam.parameters()[1]->value.data()[2] = std::numeric_limits<float>::quiet_NaN();
  save_checkpoint(dir.file("nan.h5"), kRun, state.progress, state.adam);
  TrainingState target(gcn(), 9.0F);
  const std::string nan = message_of([&] { load_checkpoint(dir.file("nan.h5"), kRun, target.adam); });
  EXPECT_NE(nan.find("/params/" + name + ": entry 2 is nan"), std::string::npos) << nan;

  ModelConfig wider = gcn();
  wider.hidden = 8;
  TrainingState other(wider, 1.0F);
  save_checkpoint(dir.file("wide.h5"), kRun, other.progress, other.adam);  // the same identity, on purpose
  const std::string shape = message_of([&] { load_checkpoint(dir.file("wide.h5"), kRun, target.adam); });
  EXPECT_NE(shape.find("shape does not match the model"), std::string::npos) << shape;
}

TEST_F(CheckpointTest, FolderKeepsTheNewestTwoAndResumesFromTheNewest) {
  const CheckpointFolder folder(dir.file("run/checkpoints"));
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("run/checkpoints")));
  TrainingState state(gcn(), 1.0F);
  EXPECT_FALSE(folder.resume(kRun, state.adam).has_value());
  for (std::uint32_t epochs : {2U, 4U, 6U, 10U}) {
    state.progress.next_epoch = epochs;
    state.adam.set_steps(epochs);
    folder.save(kRun, state.progress, state.adam);
  }
  EXPECT_EQ(folder.checkpoints(), (std::vector<std::string>{folder.file_for(10), folder.file_for(6)}));
  TrainingState target(gcn(), 9.0F);
  const auto resumed = folder.resume(kRun, target.adam);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->path, folder.file_for(10));
  EXPECT_EQ(resumed->progress.next_epoch, 10U);
  EXPECT_EQ(target.adam.steps(), 10);
}

// What a process killed while writing leaves: the previous checkpoint, and a partial file that resume ignores.
TEST_F(CheckpointTest, AWriteThatNeverFinishesLeavesThePreviousCheckpoint) {
  const CheckpointFolder folder(dir.file("checkpoints"));
  TrainingState state(gcn(), 1.0F);
  state.progress.next_epoch = 2;
  folder.save(kRun, state.progress, state.adam);
  state.progress.next_epoch = 4;
  struct Killed {};
  EXPECT_THROW(folder.save(kRun, state.progress, state.adam, [] { throw Killed{}; }), Killed);
  EXPECT_TRUE(std::filesystem::exists(folder.file_for(4) + ".partial"));
  TrainingState target(gcn(), 9.0F);
  const auto resumed = folder.resume(kRun, target.adam);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->progress.next_epoch, 2U);
}

TEST_F(CheckpointTest, ResumeSkipsADamagedNewestCheckpointButNotAnotherRuns) {
  const CheckpointFolder folder(dir.file("checkpoints"));
  TrainingState state(gcn(), 1.0F);
  state.progress.next_epoch = 2;
  folder.save(kRun, state.progress, state.adam);
  state.progress.next_epoch = 4;
  folder.save(kRun, state.progress, state.adam);
  std::filesystem::resize_file(folder.file_for(4), 64);
  TrainingState target(gcn(), 9.0F);
  const auto resumed = folder.resume(kRun, target.adam);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->path, folder.file_for(2));

  RunIdentity other = kRun;
  other.model = "gat";
  EXPECT_THROW(folder.resume(other, target.adam), CheckpointMismatch);
}

TEST_F(CheckpointTest, AFileInPlaceOfTheFolderIsAnError) {
  std::ofstream(dir.file("taken")) << "x";
  const std::string message = message_of([&] { CheckpointFolder folder(dir.file("taken")); });
  EXPECT_NE(message.find("--checkpoint-dir " + dir.file("taken")), std::string::npos) << message;
}

}  // namespace
}  // namespace nj
