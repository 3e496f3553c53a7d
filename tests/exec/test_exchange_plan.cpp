// How a rank's epoch plan places the boundary exchange: forward, the subgraphs that read no mirror run between
// the exchange's start and its completion, and the first one that reads a mirror is fenced; backward, the
// mirrors' gradients leave before the other subgraphs run and come back before the transform backward reads
// them. Planning needs no communicator, so one process checks every rank's plan.
#include <gtest/gtest.h>

#include "nj/exec/subgraph_executor.hpp"
#include "nj/partition/partition.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

TEST(ExchangePlan, InteriorSubgraphsRunWhileBoundaryRowsTravel) {
  const Dataset data = test::grid_dataset(30, 30, 12);
  PartitionOptions options;
  options.parts = 3;
  PartitionInfo info;
  const auto part_of = assign_parts(data, options, info);
  // Hidden 4: on 12 features the first layer transforms first, so that both of its directions exchange rows (at 8 it
  // would sum its inputs first and send no gradients).
  ModelConfig config;
  config.hidden = 4;
  const Model model(config, data.features.cols(), data.num_classes);

  for (int part = 0; part < options.parts; ++part) {
    SCOPED_TRACE(fmt::format("part {}", part));
    const Shard shard = make_shard(data, part_of, part, info);
    const vid_t owned = shard.num_owned();
    const std::int64_t budget = 8 * minimum_device_budget(model, shard.local);
    const EpochPlan plan = plan_epoch(model, shard.local, {budget, ExecutionMode::kReuse, CachePolicy::kStAware});
    const Pass& pass = plan.passes.front();
    const std::size_t layers = model.num_layers();
    ASSERT_EQ(pass.exchange_points.size(), 2 * layers);
    ASSERT_EQ(pass.exchange.size(), layers);
    std::int64_t overlapped = 0;
    for (std::size_t phase = 0; phase < 2 * layers; ++phase) {
      const bool forward = phase < layers;
      const std::size_t layer = forward ? phase : 2 * layers - 1 - phase;
      const ExchangePoints& points = pass.exchange_points[phase];
      ASSERT_LE(points.start, points.finish);
      PassSubgraphs parts(pass, shard.local.global_id);
      for (std::size_t k = 0; k < pass.steps.size(); ++k) {
        const PlannedStep& step = pass.steps[k];
        if (step.layer != layer || (k < pass.forward_steps) != forward) continue;
        const bool in_flight = k >= points.start && k < points.finish;
        switch (step.kind) {
          case StepKind::kAggregate:
          case StepKind::kAggregateBackward:
            // While rows travel, only subgraphs that read no mirror; forward, none that reads one before.
            if (in_flight) {
              EXPECT_FALSE(reads_mirror(parts.get(layer, step.index), owned)) << "step " << k;
              ++overlapped;
            }
            if (forward && k < points.start) {
              EXPECT_FALSE(reads_mirror(parts.get(layer, step.index), owned)) << "step " << k;
            }
            if (!forward && reads_mirror(parts.get(layer, step.index), owned)) {
              EXPECT_LT(k, points.start) << "a mirror's gradient is not complete when it leaves";
            }
            break;
          case StepKind::kSendRows:
          case StepKind::kSendGradients: EXPECT_LT(k, points.start) << "a send after the exchange started"; break;
          case StepKind::kReceiveGradients:
          case StepKind::kTransformBackward: EXPECT_GE(k, points.finish) << "reads what is still in flight"; break;
          case StepKind::kTransform: EXPECT_LT(k, points.start); break;
        }
      }
      if (points.finish < pass.steps.size() && pass.steps[points.finish].layer == layer) {
        EXPECT_TRUE(pass.trace.steps[points.finish].fence) << "phase " << phase;
      }
    }
    EXPECT_GT(overlapped, 0) << "no subgraph overlaps the exchange";
    // Every boundary row leaves forward and comes back backward; every mirror's gradient leaves.
    std::int64_t sent = 0;
    std::int64_t gradients = 0;
    std::int64_t received = 0;
    for (const auto& chunk : pass.exchange[0].send_rows) sent += static_cast<std::int64_t>(chunk.size());
    for (const auto& chunk : pass.exchange[0].send_gradients) gradients += static_cast<std::int64_t>(chunk.size());
    for (const auto& chunk : pass.exchange[0].receive_gradients) received += static_cast<std::int64_t>(chunk.size());
    EXPECT_EQ(sent, static_cast<std::int64_t>(shard.local.boundary_rows().size()));
    EXPECT_EQ(received, sent);
    EXPECT_EQ(gradients, shard.local.num_mirrors());
  }
}

}  // namespace
}  // namespace nj
