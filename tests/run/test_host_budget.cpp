// Planning within a host budget (plan_within_host_memory): the lighter choices in their order, each tried only where
// the plan before it does not fit, and what each changes in the plan.
#include <gtest/gtest.h>

#include "nj/run/rank_setup.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

class HostBudgetTest : public ::testing::Test {
 protected:
  HostBudgetTest()
      : data(test::random_dataset(600, 6000, 24, 4, 3)),
        local(whole_local_graph(data.graph)),
        model(config(), data.features.cols(), data.num_classes) {}

  static ModelConfig config() {
    ModelConfig c;
    c.hidden = 16;
    c.seed = 5;
    return c;
  }

  // Within a quarter of what the whole graph needs: layers chained, the blocks kept on the host.
  ExecutorChoice budgeted() {
    ExecutorChoice choice;
    choice.options.mode = ExecutionMode::kReuse;
    choice.options.device_budget = unlimited_peak() / 4;
    return choice;
  }

  std::int64_t unlimited_peak() {
    ExecutorChoice unlimited;
    unlimited.options.device_budget = kUnlimited;
    return plan(unlimited).device.peak_footprint_bytes;
  }

  PlannedRun plan(const ExecutorChoice& choice) {
    ++plans;
    return plan_run(choice, model, local, data.features.view(), false, data.train_mask, 1);
  }

  // A forecast of what matters here: the device's peak, the first layer's outputs where they reach the host, and the
  // blocks where the plan keeps them.
  static std::int64_t forecast_of(const PlannedRun& run) {
    const RunHostUse use = run.host_use(0);
    const bool outputs_on_host = use.outputs_computed_again.empty() || use.outputs_computed_again[0] == 0;
    const bool keeps_blocks = run.plan && run.plan->passes.front().keeps_blocks();
    return run.device.peak_footprint_bytes + (outputs_on_host ? kOutputRows : 0) + (keeps_blocks ? kBlocks : 0);
  }

  HostFittedRun fit(const ExecutorChoice& choice, std::int64_t bytes) {
    plans = 0;
    const HostBudget budget{
        .bytes = bytes, .source = "given", .forecast = [](const ExecutorChoice&, const PlannedRun& run) {
          return HostFootprint{.phase = "training", .parts = {{"all", forecast_of(run)}}};
        }};
    return plan_within_host_memory(choice, budget, [&](const ExecutorChoice& c) { return plan(c); });
  }

  static constexpr std::int64_t kOutputRows = std::int64_t{1} << 20;
  static constexpr std::int64_t kBlocks = std::int64_t{2} << 20;
  Dataset data;
  LocalGraph local;
  Model model;
  int plans = 0;
};

TEST_F(HostBudgetTest, APlanThatFitsIsPlannedOnce) {
  const ExecutorChoice choice = budgeted();
  const HostFittedRun fitted = fit(choice, std::int64_t{1} << 40);
  EXPECT_EQ(plans, 1);
  EXPECT_TRUE(fitted.lighter.empty());
  EXPECT_EQ(fitted.choice.options.device_budget, choice.options.device_budget);
  EXPECT_EQ(fitted.choice.options.recompute_outputs, RecomputeOutputs::kAuto);
}

// Computing the chained outputs again comes first: it keeps the device budget, and drops the outputs' host rows.
TEST_F(HostBudgetTest, ChainedOutputsAreComputedAgainFirst) {
  const ExecutorChoice choice = budgeted();
  const HostFittedRun fastest = fit(choice, -1);
  ASSERT_TRUE(fastest.run.plan->passes.front().chained_to_next(0)) << "the quarter budget chains the layers";
  const std::int64_t needed = forecast_of(fastest.run);
  const HostFittedRun fitted = fit(choice, needed - 1);
  EXPECT_EQ(plans, 2);
  ASSERT_EQ(fitted.lighter.size(), 1U);
  EXPECT_NE(fitted.lighter[0].find("computed again"), std::string::npos) << fitted.lighter[0];
  EXPECT_EQ(fitted.choice.options.recompute_outputs, RecomputeOutputs::kOn);
  EXPECT_EQ(fitted.choice.options.device_budget, choice.options.device_budget);
  EXPECT_TRUE(fitted.run.plan->passes.front().output_recomputed(0));
  EXPECT_LE(fitted.host.total(), needed - 1);
  EXPECT_TRUE(fitted.fits);
}

// Then the blocks are built by each step.
TEST_F(HostBudgetTest, BlocksAreBuiltByEachStepNext) {
  const ExecutorChoice choice = budgeted();
  const HostFittedRun fastest = fit(choice, -1);
  ASSERT_TRUE(fastest.run.plan->passes.front().keeps_blocks());
  const std::int64_t limit = forecast_of(fastest.run) - kOutputRows - 1;
  const HostFittedRun fitted = fit(choice, limit);
  EXPECT_EQ(plans, 3);
  ASSERT_EQ(fitted.lighter.size(), 2U);
  EXPECT_NE(fitted.lighter[1].find("built by each step"), std::string::npos) << fitted.lighter[1];
  EXPECT_EQ(fitted.choice.options.kept_block_bytes, 0);
  EXPECT_FALSE(fitted.run.plan->passes.front().keeps_blocks());
  EXPECT_EQ(fitted.choice.options.device_budget, choice.options.device_budget);
  EXPECT_LE(fitted.host.total(), limit);
}

// Then, on the CPU device, a smaller device budget, which the plan then keeps to; a GPU's memory is not the host's.
TEST_F(HostBudgetTest, OnTheCpuDeviceTheDeviceBudgetShrinksNext) {
  ExecutorChoice choice = budgeted();
  const std::int64_t peak = fit(choice, -1).run.device.peak_footprint_bytes;
  const std::int64_t limit = peak * 3 / 4;  // without the outputs' rows, a quarter of the peak over
  const HostFittedRun fitted = fit(choice, limit);
  ASSERT_FALSE(fitted.lighter.empty());
  EXPECT_NE(fitted.lighter.back().find("device budget of"), std::string::npos) << fitted.lighter.back();
  EXPECT_LT(fitted.choice.options.device_budget, choice.options.device_budget);
  EXPECT_LE(fitted.run.device.peak_footprint_bytes, fitted.choice.options.device_budget);
  EXPECT_LE(fitted.host.total(), limit);
  // One entry for the device budget, however many times it was lowered.
  EXPECT_EQ(fitted.lighter.size(), 3U);

  choice.options.library.memory_apart_from_host = true;
  const HostFittedRun gpu = fit(choice, limit);
  EXPECT_EQ(gpu.choice.options.device_budget, choice.options.device_budget);
  EXPECT_GT(gpu.host.total(), limit) << "the lightest plan, for the caller to refuse";
  EXPECT_FALSE(gpu.fits);
}

// A device budget that does not plan ends the search: the last plan is planned again and returned, whole.
TEST_F(HostBudgetTest, ADeviceBudgetThatDoesNotPlanEndsTheSearchWithTheLastPlan) {
  ExecutorChoice choice = budgeted();
  choice.options.device_budget = minimum_device_budget(model, local);
  const HostFittedRun fitted = fit(choice, 1);
  EXPECT_EQ(fitted.choice.options.device_budget, choice.options.device_budget);
  ASSERT_TRUE(fitted.run.plan.has_value());
  EXPECT_EQ(fitted.run.plan->options.device_budget, choice.options.device_budget);
  EXPECT_EQ(fitted.host.total(), forecast_of(fitted.run));
  for (const std::string& what : fitted.lighter) EXPECT_EQ(what.find("device budget"), std::string::npos) << what;
}

// What the user chose explicitly stays; a budget no plan meets returns the lightest plan, for the caller to refuse.
TEST_F(HostBudgetTest, AnExplicitChoiceStaysAndTheLightestPlanIsReturnedWhereNoneFits) {
  ExecutorChoice choice = budgeted();
  choice.options.recompute_outputs = RecomputeOutputs::kOff;
  choice.options.kept_block_bytes = 0;
  choice.options.library.memory_apart_from_host = true;
  const HostFittedRun fitted = fit(choice, 1);
  EXPECT_EQ(plans, 1);
  EXPECT_EQ(fitted.choice.options.recompute_outputs, RecomputeOutputs::kOff);
  EXPECT_GT(fitted.host.total(), 1);

  // In-memory training is planned as it is.
  ExecutorChoice in_memory;
  in_memory.in_memory = true;
  in_memory.options.device_budget = kUnlimited;
  EXPECT_TRUE(fit(in_memory, 1).lighter.empty());
  EXPECT_EQ(plans, 1);
}

}  // namespace
}  // namespace nj
