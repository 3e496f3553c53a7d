// Properties of the training loop that make results trustworthy: repeatable by seed, independent of the
// thread count, and resumable from a checkpoint without changing a bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "nj/train/checkpoint.hpp"
#include "nj/train/trainer.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

struct TrainingRun {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  TrainSummary summary;
};

ModelConfig small_model(ModelKind kind) {
  ModelConfig c;
  c.kind = kind;
  c.layers = 2;
  c.hidden = 8;
  c.heads = 2;
  c.dropout = 0.5F;
  c.attention_dropout = 0.3F;
  c.seed = 11;
  return c;
}

std::vector<std::vector<float>> weights_of(Model& model) {
  std::vector<std::vector<float>> all;
  for (const Parameter* p : model.parameters()) all.emplace_back(p->value.span().begin(), p->value.span().end());
  return all;
}

// Trains epochs [0, epochs); with checkpoint_at > 0, stops there, saves, and resumes in a fresh model.
TrainingRun train(DeviceKind kind, const Dataset& data, const ModelConfig& config, std::uint32_t epochs, int threads,
                  std::uint32_t checkpoint_at = 0, const std::string& checkpoint = "") {
  Resources resources = test::backend_resources(kind, kUnlimited, threads);
  auto comm = make_single_process_communicator();
  TrainOptions options;
  options.epochs = epochs;
  options.adam.weight_decay = 5e-4F;
  options.eval_every = 2;  // the best validation so far must survive the checkpoint too
  TrainingRun run;
  auto record = [&](const EpochMetrics& m) { run.losses.push_back(m.loss); };
  Model model(config, data.features.cols(), data.num_classes);
  InMemoryExecutor executor(resources, model, whole_local_graph(data.graph), data.features.view());
  if (checkpoint_at == 0) {
    run.summary = Trainer(model, executor, *comm, targets_of(data), options).fit(record);
    run.weights = weights_of(model);
    return run;
  }
  const RunIdentity identity{"model", "dataset", "partitioning", "optimizer", GraphIdentity{}};
  TrainOptions first_part = options;
  first_part.epochs = checkpoint_at;
  Trainer first(model, executor, *comm, targets_of(data), first_part);
  first.fit(record);
  save_checkpoint(checkpoint, identity, first.progress(), first.optimizer());

  Model resumed(config, data.features.cols(), data.num_classes);
  for (Parameter* p : resumed.parameters()) p->value.fill(7.0F);  // the checkpoint must overwrite every weight
  InMemoryExecutor resumed_executor(resources, resumed, whole_local_graph(data.graph), data.features.view());
  Trainer second(resumed, resumed_executor, *comm, targets_of(data), options);
  second.restore(load_checkpoint(checkpoint, identity, second.optimizer()));
  EXPECT_EQ(second.progress().next_epoch, checkpoint_at);
  run.summary = second.fit(record);
  run.weights = weights_of(resumed);
  return run;
}

class TrainingTest : public ::testing::TestWithParam<std::tuple<DeviceKind, ModelKind>> {
 protected:
  void SetUp() override { NJ_SKIP_WITHOUT_BACKEND(kind()); }
  DeviceKind kind() const { return std::get<0>(GetParam()); }
  ModelKind model_kind() const { return std::get<1>(GetParam()); }
  Dataset data = test::random_dataset(300, 1500, 12, 4, 5);
};

TEST_P(TrainingTest, SameSeedGivesTheSameLossTrace) {
  const TrainingRun a = train(kind(), data, small_model(model_kind()), 6, 2);
  const TrainingRun b = train(kind(), data, small_model(model_kind()), 6, 2);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.weights, b.weights);
  ModelConfig other = small_model(model_kind());
  other.seed = 12;
  EXPECT_NE(train(kind(), data, other, 6, 2).losses, a.losses);
}

// nj's own kernels give the same bits with any number of threads (KernelTest.*DoNotDependOnThreadCount); OpenBLAS
// may split a large product among its threads and so add in another order. The result is the same function, to
// float rounding.
TEST_P(TrainingTest, ThreadCountDoesNotChangeTheResult) {
  const TrainingRun one = train(kind(), data, small_model(model_kind()), 6, 1);
  for (const int threads : {2, 3}) {
    SCOPED_TRACE(fmt::format("{} threads", threads));
    const TrainingRun more = train(kind(), data, small_model(model_kind()), 6, threads);
    ASSERT_EQ(one.losses.size(), more.losses.size());
    for (std::size_t e = 0; e < one.losses.size(); ++e) {
      EXPECT_NEAR(more.losses[e], one.losses[e], 1e-6 * one.losses[e]) << "epoch " << e + 1;
    }
    ASSERT_EQ(one.weights.size(), more.weights.size());
    for (std::size_t p = 0; p < one.weights.size(); ++p) {
      for (std::size_t k = 0; k < one.weights[p].size(); ++k) {
        EXPECT_NEAR(more.weights[p][k], one.weights[p][k], 1e-5F * std::max(1.0F, std::abs(one.weights[p][k])))
            << "parameter " << p << " element " << k;
      }
    }
  }
}

TEST_P(TrainingTest, LossDecreasesOnLearnableLabels) {
  for (vid_t v = 0; v < data.num_vertices(); ++v) data.features(v, data.labels[static_cast<std::size_t>(v)]) += 2.0F;
  ModelConfig config = small_model(model_kind());
  config.dropout = 0.0F;
  config.attention_dropout = 0.0F;
  const TrainingRun run = train(kind(), data, config, 30, 2);
  EXPECT_LT(run.losses.back(), 0.9 * run.losses.front());
}

TEST_P(TrainingTest, ResumingFromACheckpointChangesNothing) {
  const test::TempDir dir;
  const TrainingRun straight = train(kind(), data, small_model(model_kind()), 8, 2);
  const TrainingRun resumed = train(kind(), data, small_model(model_kind()), 8, 2, 4, dir.file("ckpt.h5"));
  EXPECT_EQ(straight.losses, resumed.losses);
  EXPECT_EQ(straight.weights, resumed.weights);
  EXPECT_EQ(straight.summary.best_val_epoch, resumed.summary.best_val_epoch);
  EXPECT_EQ(straight.summary.best_val_accuracy.test, resumed.summary.best_val_accuracy.test);
  EXPECT_EQ(straight.summary.final_accuracy.val, resumed.summary.final_accuracy.val);
}

// A diverging run stops at the first epoch whose loss is not finite, naming it, before the optimizer writes
// non-finite weights.
TEST_P(TrainingTest, ANonFiniteLossStopsTrainingNamingTheEpoch) {
  Resources resources = test::backend_resources(kind(), kUnlimited, 2);
  auto comm = make_single_process_communicator();
  Model model(small_model(model_kind()), data.features.cols(), data.num_classes);
  InMemoryExecutor executor(resources, model, whole_local_graph(data.graph), data.features.view());
  TrainOptions options;
  options.epochs = 10;
  options.adam.lr = 1e30F;  // the first step overflows the logits
  int epochs = 0;
  try {
    Trainer(model, executor, *comm, targets_of(data), options).fit([&](const EpochMetrics&) { ++epochs; });
    FAIL() << "training went on with a non-finite loss";
  } catch (const JobError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(fmt::format("epoch {}: the ", epochs + 1)), std::string::npos) << message;
    EXPECT_NE(message.find("training diverged"), std::string::npos) << message;
    EXPECT_TRUE(e.report());
  }
  for (const Parameter* p : model.parameters()) {
    for (const float w : p->value.span()) ASSERT_TRUE(std::isfinite(w)) << p->name;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TrainingTest,
                         ::testing::Combine(test::all_backends(), ::testing::Values(ModelKind::kGcn, ModelKind::kGat)),
                         [](const auto& test_info) {
                           return test::backend_name(std::get<0>(test_info.param)) + "_" +
                                  to_string(std::get<1>(test_info.param));
                         });

}  // namespace
}  // namespace nj
