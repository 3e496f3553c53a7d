// nj's Trainer against PyG: three Adam steps of two-layer GCN, GAT, GraphSAGE and GIN (ε fixed and learnt) models and
// of PyG's APPNP example from the same initial weights, each step's loss, every parameter's gradient and every
// parameter after Adam, as PyG's GCNConv, GATConv, SAGEConv, GINConv and APPNP, F.cross_entropy and torch.optim.Adam
// computed them (tests/fixtures/training_reference.h5, written by scripts/reference/training_reference.py). This checks
// the model, the loss and its scaling by the training count, and Adam with either weight-decay scope against an
// implementation that shares none of nj's code; it does so in memory and within a quarter of the device memory the
// graph needs whole.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "nj/exec/executor.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/train/trainer.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"
#include "support/training_reference.hpp"

namespace nj {
namespace {

enum class Execution { kInMemory, kQuarterBudget };

// The model, the weight-decay scope, the execution, and whether GIN's ε is learnt.
using ReferenceCase = std::tuple<ModelKind, WeightDecayScope, Execution, bool>;

class TrainingReference : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(TrainingReference, LossGradientsAndAdamStepsMatchPyG) {
  const auto [kind, scope, execution, gin_train_eps] = GetParam();
  const test::TrainingReference reference(kind, scope, gin_train_eps);
  const Dataset& data = reference.dataset();
  Model model(reference.model_config(), data.features.cols(), data.num_classes);
  reference.load_initial_weights(model);

  const LocalGraph local = whole_local_graph(data.graph);
  std::int64_t budget = kUnlimited;
  if (execution == Execution::kQuarterBudget) {
    const EpochPlan whole = plan_epoch(model, local, {kUnlimited, ExecutionMode::kReuse, CachePolicy::kStAware});
    const std::int64_t need = forecast_device_memory(model, local, data.features.view(), whole).peak_footprint_bytes;
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

  const auto comm = make_single_process_communicator();
  const TrainOptions options = reference.train_options();
  Trainer trainer(model, *executor, *comm, targets_of(data), options);
  std::uint32_t steps_checked = 0;
  trainer.fit([&](const EpochMetrics& m) {
    reference.expect_step(m, model);
    ++steps_checked;
  });
  EXPECT_EQ(steps_checked, options.epochs);
}

std::string case_name(const ::testing::TestParamInfo<ReferenceCase>& info) {
  const auto& [kind, scope, execution, gin_train_eps] = info.param;
  return fmt::format("{}{}_decay_{}_{}", to_string(kind), gin_train_eps ? "_train_eps" : "",
                     test::decay_scope_name(scope), execution == Execution::kInMemory ? "in_memory" : "quarter_budget");
}

INSTANTIATE_TEST_SUITE_P(PyG, TrainingReference,
                         ::testing::Combine(::testing::Values(ModelKind::kGcn, ModelKind::kGat),
                                            ::testing::Values(WeightDecayScope::kAll, WeightDecayScope::kFirstLayer),
                                            ::testing::Values(Execution::kInMemory, Execution::kQuarterBudget),
                                            ::testing::Values(false)),
                         case_name);
// The fixture holds the other models with weight decay on every parameter: the scope's code is the same for all.
INSTANTIATE_TEST_SUITE_P(PyGModels, TrainingReference,
                         ::testing::Combine(::testing::Values(ModelKind::kSage, ModelKind::kGin, ModelKind::kAppnp),
                                            ::testing::Values(WeightDecayScope::kAll),
                                            ::testing::Values(Execution::kInMemory, Execution::kQuarterBudget),
                                            ::testing::Values(false)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(PyGGinTrainEps, TrainingReference,
                         ::testing::Combine(::testing::Values(ModelKind::kGin),
                                            ::testing::Values(WeightDecayScope::kAll),
                                            ::testing::Values(Execution::kInMemory, Execution::kQuarterBudget),
                                            ::testing::Values(true)),
                         case_name);

}  // namespace
}  // namespace nj
