// Inference plans (SubgraphExecutorOptions::forward_only): one forward pass without dropout, with nothing kept for
// a backward pass. Every layer's outputs equal the in-memory executor's at any budget, the device peak is the
// forecast to the byte, and a budget too small to train in still infers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "nj/exec/subgraph_executor.hpp"
#include "nj/model/device_parameters.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

constexpr std::array kModels = {ModelKind::kGcn, ModelKind::kGat, ModelKind::kSage, ModelKind::kGin, ModelKind::kAppnp};

SubgraphExecutorOptions inference_options(std::int64_t budget) {
  SubgraphExecutorOptions options{budget, ExecutionMode::kReuse, CachePolicy::kStAware};
  options.forward_only = true;
  return options;
}

// The device peak of an unlimited inference plan: what the whole graph needs at once.
std::int64_t unlimited_inference_need(Model& model, const LocalGraph& local, ConstRows features) {
  const EpochPlan plan = plan_epoch(model, local, inference_options(kUnlimited));
  return forecast_device_memory(model, local, features, plan).peak_footprint_bytes;
}

void expect_rows_near(ConstRows expected, ConstRows actual, double relative) {
  ASSERT_EQ(expected.rows, actual.rows);
  ASSERT_EQ(expected.cols, actual.cols);
  double largest = 0.0;
  for (std::int64_t i = 0; i < expected.rows * expected.cols; ++i) {
    largest = std::max(largest, std::abs(double{expected.data[i]}));
  }
  for (std::int64_t r = 0; r < expected.rows; ++r) {
    for (std::int64_t c = 0; c < expected.cols; ++c) {
      ASSERT_NEAR(expected.row(r)[c], actual.row(r)[c], relative * std::max(1.0, largest))
          << "row " << r << " col " << c;
    }
  }
}

class Inference : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override { NJ_SKIP_WITHOUT_BACKEND(GetParam()); }
};

TEST_P(Inference, EveryLayersOutputsEqualTheInMemoryExecutorsAtEveryBudget) {
  const Dataset data = test::grid_dataset(16, 16, 3);
  const LocalGraph local = whole_local_graph(data.graph);
  for (const ModelKind kind : kModels) {
    Model model(test::training_config(kind, 2), data.features.cols(), data.num_classes);
    Resources whole = test::backend_resources(GetParam(), kUnlimited, 2);
    InMemoryExecutor in_memory(whole, model, local, data.features.view());
    in_memory.evaluate(model);
    std::vector<Matrix> expected;
    for (std::size_t l = 0; l < model.num_layers(); ++l) {
      const ConstRows rows = in_memory.layer_outputs(l);
      expected.emplace_back(rows.rows, rows.cols, std::vector<float>(rows.data, rows.data + rows.rows * rows.cols));
    }
    const std::int64_t need = unlimited_inference_need(model, local, data.features.view());
    for (const std::int64_t budget : {kUnlimited, need / 4, need / 10}) {
      SCOPED_TRACE(fmt::format("{}, budget {}", to_string(kind), budget));
      const std::int64_t fitting = std::max(budget, minimum_device_budget(model, local, {}, true));
      Resources resources = test::backend_resources(GetParam(), fitting, 2);
      SubgraphExecutor executor(resources, model, local, data.features.view(), inference_options(fitting));
      if (budget != kUnlimited) {
        EXPECT_GT(executor.plan().num_steps, 2 * static_cast<std::int64_t>(model.num_layers()));
      }
      const ConstRows logits = executor.evaluate(model);
      expect_rows_near(expected.back().view(), logits, 1e-5);
      for (std::size_t l = 0; l < model.num_layers(); ++l) {
        SCOPED_TRACE(fmt::format("layer {}", l + 1));
        expect_rows_near(expected[l].view(), executor.layer_outputs(l), 1e-5);
      }
      EXPECT_EQ(executor.take_metrics().peak_device_footprint_bytes, executor.plan().memory.peak_footprint_bytes);
    }
  }
}

// Features multiplied as sparse rows infer what dense rows do, in memory and within a budget, each layer's outputs,
// and the inference plan's peak is its forecast.
TEST_P(Inference, SparseInputsInferWhatDenseOnesDo) {
  Dataset data = test::random_dataset(250, 900, 60, 3, 12);
  for (std::int64_t k = 0; k < data.features.size(); ++k) {
    if (k % 23 != 0) data.features.data()[k] = 0.0F;
  }
  const LocalGraph local = whole_local_graph(data.graph);
  const InputShape shape = input_shape(sparse_inputs(SparseInputs::kOn, data.features.view()));
  for (const ModelKind kind : {ModelKind::kGcn, ModelKind::kGat, ModelKind::kSage}) {
    Model model(test::training_config(kind, 2), data.features.cols(), data.num_classes);
    Resources whole = test::backend_resources(GetParam(), kUnlimited, 2);
    InMemoryExecutor dense(whole, model, local, data.features.view());
    const Matrix expected(data.num_vertices(), data.num_classes, [&] {
      const ConstRows logits = dense.evaluate(model);
      return std::vector<float>(logits.data, logits.data + logits.size());
    }());
    InMemoryExecutor sparse(whole, model, local, data.features.view(), nullptr, SparseInputs::kOn);
    SCOPED_TRACE(to_string(kind));
    expect_rows_near(expected.view(), sparse.evaluate(model), 1e-5);
    SubgraphExecutorOptions unlimited = inference_options(kUnlimited);
    unlimited.inputs = shape;
    const std::int64_t need =
        forecast_device_memory(model, local, data.features.view(), plan_epoch(model, local, unlimited))
            .peak_footprint_bytes;
    const std::int64_t budget = std::max(need / 4, minimum_device_budget(model, local, {}, true, shape));
    Resources resources = test::backend_resources(GetParam(), budget, 2);
    SubgraphExecutor executor(resources, model, local, data.features.view(), inference_options(budget), nullptr,
                              SparseInputs::kOn);
    EXPECT_GT(executor.plan().num_steps, 2 * static_cast<std::int64_t>(model.num_layers()));
    expect_rows_near(expected.view(), executor.evaluate(model), 1e-5);
    EXPECT_EQ(executor.take_metrics().peak_device_footprint_bytes, executor.plan().memory.peak_footprint_bytes);
  }
}

TEST_P(Inference, FitsABudgetTrainingIsRefusedAndPeaksAtItsForecast) {
  // An inference step holds no backward buffers, and the parameters no gradients: its smallest budget is lower.
  const Dataset data = test::random_dataset(300, 1500, 64, 4, 5);
  const LocalGraph local = whole_local_graph(data.graph);
  for (const ModelKind kind : {ModelKind::kGcn, ModelKind::kGat}) {
    SCOPED_TRACE(to_string(kind));
    Model model(test::training_config(kind, 2), data.features.cols(), data.num_classes);
    // Between the smallest budgets of inference and of training.
    const std::int64_t inference_minimum = minimum_device_budget(model, local, {}, true);
    const std::int64_t training_minimum = minimum_device_budget(model, local);
    ASSERT_LT(inference_minimum, training_minimum);
    const std::int64_t budget = (inference_minimum + training_minimum) / 2;
    {
      Resources resources = test::backend_resources(GetParam(), budget, 2);
      EXPECT_THROW(SubgraphExecutor(resources, model, local, data.features.view(),
                                    {budget, ExecutionMode::kReuse, CachePolicy::kStAware}),
                   InputError);
    }
    Resources resources = test::backend_resources(GetParam(), budget, 2);
    SubgraphExecutor executor(resources, model, local, data.features.view(), inference_options(budget));
    const MemoryForecast& forecast = executor.plan().memory;
    EXPECT_LE(forecast.peak_footprint_bytes, budget);
    // The parameters without their gradients.
    EXPECT_EQ(forecast.at_peak.at("parameters"), DeviceParameters::bytes_for(model, false));
    executor.evaluate(model);
    const ExecutionMetrics measured = executor.take_metrics();
    EXPECT_EQ(measured.peak_device_bytes, forecast.peak_bytes);
    EXPECT_EQ(measured.peak_device_footprint_bytes, forecast.peak_footprint_bytes);
  }
}

TEST_P(Inference, AnInferencePlanTakesNoTrainingStep) {
  const Dataset data = test::grid_dataset(8, 8, 1);
  const LocalGraph local = whole_local_graph(data.graph);
  Model model(test::training_config(ModelKind::kGcn, 2), data.features.cols(), data.num_classes);
  Resources resources = test::backend_resources(GetParam(), kUnlimited, 1);
  SubgraphExecutor executor(resources, model, local, data.features.view(), inference_options(kUnlimited));
  EXPECT_EQ(executor.plan().passes.front().forward_steps, executor.plan().passes.front().steps.size());
  EXPECT_THROW(executor.train_step(model, 0, [](ConstRows, const vid_t*, Rows) { return 0.0; }), Error);
}

INSTANTIATE_TEST_SUITE_P(Backends, Inference, test::all_backends(), test::BackendName());

}  // namespace
}  // namespace nj
