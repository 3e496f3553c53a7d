#include <gtest/gtest.h>

#include <algorithm>

#include "nj/exec/host_footprint.hpp"
#include "nj/run/rank_setup.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

std::int64_t part_of(const HostFootprint& footprint, const std::string& name) {
  const auto it = std::find_if(footprint.parts.begin(), footprint.parts.end(),
                               [&](const HostFootprint::Part& p) { return p.name == name; });
  return it == footprint.parts.end() ? -1 : it->bytes;
}

// An executor copies through one page-locked buffer, as large as its largest copy through staging (at most a piece:
// Transfers::kPieceBytes): the host forecast's staging is that buffer. The in-memory executor's graph block goes up
// through it as the executor is made, and it is then freed: on the CPU device, whose memory takes whole blocks of host
// rows straight, the epochs stage only the parameters.
TEST(PlannedRun, TheForecastStagingIsThePageLockedMemoryTheExecutorHolds) {
  const Dataset data = test::random_dataset(20000, 400000, 8, 4, 3);
  Model model(test::training_config(ModelKind::kGcn, 2), data.features.cols(), data.num_classes);
  const LocalGraph local = whole_local_graph(data.graph);
  ExecutorChoice choice;
  choice.in_memory = true;
  const PlannedRun run = plan_run(choice, model, local, data.features.view(), false, data.train_mask, 1);
  const RankShape shape{.owned = local.num_owned,
                        .local = local.num_local(),
                        .in_edges = local.graph.num_edges(),
                        .features = data.features.cols(),
                        .classes = data.num_classes};
  const HostFootprint footprint = running_host_footprint(model, shape, {.threads = 1}, run.host_use(0));
  const std::int64_t staging = part_of(footprint, "staging");
  EXPECT_GT(staging, 0) << "the parameters and their gradients";
  EXPECT_LT(staging, data.features.rows() * data.num_classes * std::int64_t{sizeof(float)})
      << "the logits come and go straight";

  Resources resources = test::backend_resources(DeviceKind::kCpu, kUnlimited, 1);
  InMemoryExecutor executor(resources, model, local, data.features.view());
  EXPECT_EQ(resources.device->stats().pinned_bytes, 0) << "the graph's staging is freed once the executor is made";
  executor.train_step(model, 0, [](ConstRows, const vid_t*, Rows) { return 0.0; });
  EXPECT_EQ(resources.device->stats().pinned_bytes, staging);
}

}  // namespace
}  // namespace nj
