// nj's Trainer against PyG: three Adam steps of a two-layer GCN and GAT from the same initial weights, each step's
// loss, every parameter's gradient and every parameter after Adam, as PyG's GCNConv and GATConv, F.cross_entropy
// and torch.optim.Adam computed them (tests/fixtures/training_reference.h5, written by
// scripts/reference/training_reference.py). This checks the model, the loss and its scaling by the training
// count, and Adam with either weight-decay scope against an implementation that shares none of nj's code; it
// does so in memory and within a quarter of the device memory the graph needs whole.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "nj/exec/executor.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/io/hdf5.hpp"
#include "nj/train/trainer.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

const std::string kFixture = std::string(NJ_SOURCE_DIR) + "/tests/fixtures/training_reference.h5";

Matrix read_matrix(const hdf5::File& file, const std::string& name) {
  const hdf5::Array<float> array = file.read<float>(name);
  EXPECT_EQ(array.shape.size(), 2U) << name;
  Matrix m(static_cast<std::int64_t>(array.shape[0]), static_cast<std::int64_t>(array.shape[1]));
  std::copy(array.values.begin(), array.values.end(), m.data());
  return m;
}

Dataset fixture_dataset(const hdf5::File& file) {
  Dataset data;
  data.name = "training reference";
  data.features = read_matrix(file, "features");
  const auto n = static_cast<vid_t>(data.features.rows());
  const std::vector<vid_t> src = hdf5::read_vector<vid_t>(file, "graph/src", -1);
  const std::vector<vid_t> dst = hdf5::read_vector<vid_t>(file, "graph/dst", -1);
  data.graph = build_csr(n, src, dst);
  data.labels = hdf5::read_vector<std::int32_t>(file, "labels", n);
  data.num_classes = static_cast<std::int32_t>(file.int_attribute("classes"));
  data.train_mask = hdf5::read_vector<std::uint8_t>(file, "train_mask", n);
  data.val_mask.assign(static_cast<std::size_t>(n), 0);
  data.test_mask.assign(static_cast<std::size_t>(n), 0);
  return data;
}

void expect_matrix(const Matrix& actual, const Matrix& expected, const std::string& what) {
  ASSERT_EQ(actual.rows(), expected.rows()) << what;
  ASSERT_EQ(actual.cols(), expected.cols()) << what;
  for (std::int64_t k = 0; k < expected.size(); ++k) {
    const float e = expected.data()[k];
    EXPECT_NEAR(actual.data()[k], e, 1e-5F * std::max(1.0F, std::abs(e))) << what << " element " << k;
  }
}

// As nj train --weight-decay-scope names it, and the fixture's group.
const char* scope_name(WeightDecayScope scope) { return scope == WeightDecayScope::kAll ? "all" : "first"; }

enum class Execution { kInMemory, kQuarterBudget };

using ReferenceCase = std::tuple<ModelKind, WeightDecayScope, Execution>;

class TrainingReference : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(TrainingReference, LossGradientsAndAdamStepsMatchPyG) {
  const auto [kind, scope, execution] = GetParam();
  const hdf5::File file = hdf5::File::open_read(kFixture);
  const Dataset data = fixture_dataset(file);
  const std::string group = fmt::format("{}/{}/", to_string(kind), scope_name(scope));

  ModelConfig config;
  config.kind = kind;
  config.layers = 2;
  config.hidden = static_cast<int>(file.int_attribute("hidden"));
  config.heads = static_cast<int>(file.int_attribute("heads"));
  config.output_heads = static_cast<int>(file.int_attribute("output_heads"));
  config.activation = kind == ModelKind::kGat ? Activation::kElu : Activation::kRelu;
  config.dropout = 0.0F;
  config.attention_dropout = 0.0F;
  Model model(config, data.features.cols(), data.num_classes);
  for (Parameter* p : model.parameters()) {
    const Matrix initial = read_matrix(file, group + "initial/" + p->name);
    ASSERT_EQ(initial.rows(), p->value.rows()) << p->name;
    ASSERT_EQ(initial.cols(), p->value.cols()) << p->name;
    p->value = initial;
  }

  const LocalGraph local = whole_local_graph(data.graph);
  std::int64_t budget = kUnlimited;
  if (execution == Execution::kQuarterBudget) {
    const Resources planning = test::backend_resources(DeviceKind::kCpu, kUnlimited, 2);
    const EpochPlan whole = plan_epoch(model, local, {kUnlimited, ExecutionMode::kReuse, CachePolicy::kStAware});
    const std::int64_t need =
        forecast_device_memory(*planning.backend, model, local, data.features.view(), whole).peak_footprint_bytes;
    budget = std::max(need / 4, minimum_device_budget(model, local));
  }
  Resources resources = test::backend_resources(DeviceKind::kCpu, budget, 2);
  std::unique_ptr<Executor> executor;
  if (execution == Execution::kInMemory) {
    executor = std::make_unique<InMemoryExecutor>(resources, model, local, data.features.view());
  } else {
    executor = std::make_unique<SubgraphExecutor>(resources, model, local, data.features.view(),
                                                  SubgraphExecutorOptions{budget, ExecutionMode::kReuse});
  }

  TrainOptions options;
  options.epochs = static_cast<std::uint32_t>(file.int_attribute("steps"));
  options.eval_every = 0;
  options.adam.lr = static_cast<float>(file.float_attribute("lr"));
  options.adam.eps = static_cast<float>(file.float_attribute("eps"));
  options.adam.weight_decay = static_cast<float>(file.float_attribute("weight_decay"));
  options.decay_scope = scope;
  const std::vector<double> losses = hdf5::read_vector<double>(file, group + "losses", options.epochs);
  const auto comm = make_single_process_communicator();
  Trainer trainer(model, *executor, *comm, targets_of(data), options);
  trainer.fit([&](const EpochMetrics& m) {
    SCOPED_TRACE(fmt::format("step {}", m.epoch));
    EXPECT_NEAR(m.loss, losses[m.epoch], 1e-5 * losses[m.epoch]);
    const std::string step = fmt::format("{}step{}/", group, m.epoch);
    for (const Parameter* p : model.parameters()) {
      expect_matrix(p->grad, read_matrix(file, step + "gradient/" + p->name), p->name + " gradient");
      expect_matrix(p->value, read_matrix(file, step + "after/" + p->name), p->name + " after Adam");
    }
  });
}

std::string case_name(const ::testing::TestParamInfo<ReferenceCase>& info) {
  const auto& [kind, scope, execution] = info.param;
  return fmt::format("{}_decay_{}_{}", to_string(kind), scope_name(scope),
                     execution == Execution::kInMemory ? "in_memory" : "quarter_budget");
}

INSTANTIATE_TEST_SUITE_P(PyG, TrainingReference,
                         ::testing::Combine(::testing::Values(ModelKind::kGcn, ModelKind::kGat),
                                            ::testing::Values(WeightDecayScope::kAll, WeightDecayScope::kFirstLayer),
                                            ::testing::Values(Execution::kInMemory, Execution::kQuarterBudget)),
                         case_name);

}  // namespace
}  // namespace nj
