// The host-memory prediction: the loaded data it counts is what a shard holds, to the byte, and the machine's
// own figures it compares with are read.
#include <gtest/gtest.h>

#include "nj/core/bytes.hpp"
#include "nj/core/host_memory.hpp"
#include "nj/exec/host_footprint.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/graph/shard.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

template <typename T>
std::int64_t bytes_of(const std::vector<T>& values) {
  return static_cast<std::int64_t>(values.size() * sizeof(T));
}

TEST(HostFootprint, ShardBytesAreWhatALoadedShardHolds) {
  const Shard shard = whole_graph_shard(test::random_dataset(500, 3000, 12, 4, 7));
  const LocalGraph& local = shard.local;
  const std::int64_t held = static_cast<std::int64_t>(shard.features.span().size_bytes()) +
                            bytes_of(local.graph.offsets) + bytes_of(local.graph.sources) + bytes_of(local.global_id) +
                            bytes_of(local.global_in_degree) + bytes_of(local.global_self_loop) +
                            bytes_of(shard.labels) + bytes_of(shard.train_mask) + bytes_of(shard.val_mask) +
                            bytes_of(shard.test_mask);
  const RankShape shape{.owned = shard.num_owned(),
                        .local = local.num_local(),
                        .in_edges = local.graph.num_edges(),
                        .features = shard.features.cols(),
                        .classes = shard.num_classes};
  EXPECT_EQ(shard_bytes(shape), held);
}

TEST(HostFootprint, TheDeviceCountsOnlyWhereItIsEmulatedInHostMemory) {
  ModelConfig config;
  config.hidden = 32;
  const Model model(config, 64, 8);
  const RankShape shape{.owned = 10000, .local = 10000, .in_edges = 100000, .features = 64, .classes = 8};
  const RunHostUse use{.process_bytes = 1 << 20, .device_peak_bytes = 5 << 20};
  const auto emulated = running_host_footprint(model, shape, {.in_memory = true, .device_in_host_memory = true}, use);
  const auto on_gpu = running_host_footprint(model, shape, {.in_memory = true, .device_in_host_memory = false}, use);
  EXPECT_EQ(emulated.total() - on_gpu.total(), 5 << 20);
  EXPECT_NE(emulated.describe().find("device (emulated) 5.00M"), std::string::npos) << emulated.describe();
  EXPECT_NE(emulated.describe().find("process 1.00M"), std::string::npos) << emulated.describe();
  EXPECT_EQ(emulated.phase, "training");
  EXPECT_EQ(running_host_footprint(model, shape, {.inference = true}, use).phase, "inference");
}

// Each thread packs GEMM operands of at most 16 MiB: without a budget the widest dense rows of the local vertices,
// within one the budget.
TEST(HostFootprint, EachComputeThreadCountsItsWorkspace) {
  ModelConfig config;
  const Model model(config, 16, 4);
  const RankShape shape{.owned = 1000, .local = 1000, .in_edges = 5000, .features = 16, .classes = 4};
  const auto one = running_host_footprint(model, shape, {.threads = 1}, {});
  const auto three = running_host_footprint(model, shape, {.threads = 3}, {});
  const std::int64_t widest = 1000 * config.hidden * 4;  // GCN's 16-wide hidden layer beside 16 features
  EXPECT_EQ(three.total() - one.total(), 2 * widest);
  const auto budgeted =
      running_host_footprint(model, shape, {.in_memory = false, .device_budget = 1 << 20, .threads = 2}, {});
  EXPECT_NE(budgeted.describe().find("threads 2.00M"), std::string::npos) << budgeted.describe();
  // Together the threads pack at most one step's operands, which they share out.
  const RunLayout within_16m{.in_memory = false, .device_budget = 16 << 20, .threads = 2};
  EXPECT_NE(running_host_footprint(model, shape, within_16m, {.largest_step_bytes = 3 << 20})
                .describe()
                .find("threads 3.00M"),
            std::string::npos);
  EXPECT_NE(running_host_footprint(model, shape, within_16m, {}).describe().find("threads 32.00M"), std::string::npos);
  const Model wide(config, 1 << 14, 4);
  const RankShape big{.owned = 1000, .local = 1000, .in_edges = 5000, .features = 1 << 14, .classes = 4};
  EXPECT_NE(running_host_footprint(wide, big, {.threads = 2}, {}).describe().find("threads 32.00M"), std::string::npos);
}

std::int64_t part_of(const HostFootprint& footprint, const std::string& name) {
  for (const HostFootprint::Part& part : footprint.parts) {
    if (part.name == name) return part.bytes;
  }
  return -1;
}

// The model's matrices on the host: its parameters with their gradients, the effective weights a layer keeps beside
// them (GAT's, its attention folded in), and in training three copies more of the parameters (Adam's moments and the
// gradients gathered from the device).
TEST(HostFootprint, TheModelCountsItsMatricesAndInTrainingTheOptimizersCopies) {
  const Model gcn(test::training_config(ModelKind::kGcn), 64, 8);
  EXPECT_EQ(gcn.num_parameters(), 64 * 8 + 8 + 8 * 8 + 8);  // hidden 8: weights and biases
  EXPECT_EQ(gcn.host_bytes(), 2 * 4 * gcn.num_parameters());
  const Model gat(test::training_config(ModelKind::kGat), 64, 8);
  std::int64_t folded = 0;
  for (std::size_t l = 0; l < gat.num_layers(); ++l) folded += gat.layer(l).effective_weight().size();
  EXPECT_EQ(gat.host_bytes(), 2 * 4 * gat.num_parameters() + 2 * 4 * folded);
  const RankShape shape{.owned = 100, .local = 100, .in_edges = 500, .features = 64, .classes = 8};
  EXPECT_EQ(part_of(running_host_footprint(gat, shape, {.threads = 1}, {}), "model"),
            gat.host_bytes() + 3 * 4 * gat.num_parameters());
  EXPECT_EQ(part_of(running_host_footprint(gat, shape, {.threads = 1, .inference = true}, {}), "model"),
            gat.host_bytes());
  EXPECT_EQ(part_of(running_host_footprint(gat, shape, {.threads = 1}, {}), "libraries at work"),
            kLibrariesAtWorkBytes);
}

// Open MPI's shared-memory buffers grow with what a rank sends, up to 8 MiB.
TEST(HostFootprint, MpisExchangeBuffersGrowWithWhatARankSendsUpToACap) {
  EXPECT_EQ(mpi_exchange_bytes(0), 0);
  EXPECT_EQ(mpi_exchange_bytes(3 << 20), 3 << 20);
  EXPECT_EQ(mpi_exchange_bytes(std::int64_t{1} << 34), kMpiExchangeBytes);
}

// Loading holds the dataset as dense rows and, one at a time beside it: the stored sparse entries while the reader
// expands them, the whole dataset where ranks partition in memory, and the renumbering's copies. The peak is the larger
// of loading and running.
TEST(HostFootprint, LoadingHoldsTheLargestOfItsTemporariesBesideTheDataset) {
  RankShape shape{.owned = 1000, .local = 1200, .in_edges = 5000, .features = 100, .classes = 4, .renumbered = false};
  const HostFootprint dense = loading_host_footprint(shape, 1 << 20);
  EXPECT_EQ(dense.phase, "loading");
  EXPECT_EQ(dense.total(), (1 << 20) + kLibrariesAtWorkBytes + shard_bytes(shape));
  shape.stored_nonzeros = 3000;
  EXPECT_EQ(loading_host_footprint(shape, 1 << 20).total() - dense.total(), sparse_rows_bytes(1000, 3000));
  EXPECT_EQ(sparse_rows_bytes(1000, 3000), 1001 * 8 + 3000 * 8);
  // A renumbered CSR (64-bit offsets, 32-bit sources), each local vertex's new id and the order of the owned ones.
  shape.renumbered = true;
  EXPECT_EQ(renumbering_bytes(shape), 1201 * 8 + 5000 * 4 + 1200 * 4 + 1000 * 4);
  EXPECT_EQ(loading_host_footprint(shape, 1 << 20).total() - dense.total(), renumbering_bytes(shape));
  shape.stored_nonzeros = 6000;
  EXPECT_EQ(loading_host_footprint(shape, 1 << 20).total() - dense.total(), sparse_rows_bytes(1000, 6000));
  shape.stored_nonzeros = -1;
  shape.whole_dataset_bytes = 7 << 20;
  EXPECT_EQ(loading_host_footprint(shape, 1 << 20).total() - dense.total(), 7 << 20);
  const HostFootprint running{.phase = "training", .parts = {{"dataset", 1}}};
  EXPECT_EQ(peak_host_footprint(dense, running).phase, "loading");
  const HostFootprint larger{.phase = "training", .parts = {{"dataset", dense.total() + 1}}};
  EXPECT_EQ(peak_host_footprint(dense, larger).phase, "training");
}

// Within a budget, where the backend reads packed blocks only expanded, the CPU device expands each step's block with
// a cursor per source and thread: the executor's host bytes grow by that for the block with the most sources; where
// it reads them as they lie (the CPU backend), and without a budget (blocks uploaded whole), not at all.
TEST(HostFootprint, EachThreadCountsACursorPerSourceOfTheLargestBlockItExpands) {
  const Dataset data = test::grid_dataset(30, 30, 8);
  const Model model(test::training_config(ModelKind::kGcn, 2), data.features.cols(), data.num_classes);
  const LocalGraph local = whole_local_graph(data.graph);
  SubgraphExecutorOptions options{4 * minimum_device_budget(model, local), ExecutionMode::kReuse,
                                  CachePolicy::kStAware};
  const EpochPlan as_they_lie = plan_epoch(model, local, options);
  EXPECT_EQ(executor_host_bytes(as_they_lie, 2, 3), executor_host_bytes(as_they_lie, 2, 1));
  options.library.reads_packed_blocks = false;
  const EpochPlan budgeted = plan_epoch(model, local, options);
  ASSERT_TRUE(budgeted.passes.front().keeps_blocks());
  std::int64_t most_sources = 0;
  for (const auto& layer : budgeted.passes.front().layer_parts) {
    for (const PartSize& part : layer) most_sources = std::max<std::int64_t>(most_sources, part.num_src);
  }
  EXPECT_EQ(executor_host_bytes(budgeted, 2, 3) - executor_host_bytes(budgeted, 2, 1), 2 * most_sources * 8);
  const EpochPlan unlimited = plan_epoch(model, local, {});
  ASSERT_TRUE(unlimited.passes.front().keeps_blocks()) << "a builder would count its own cursors";
  EXPECT_EQ(executor_host_bytes(unlimited, 2, 3), executor_host_bytes(unlimited, 2, 1));
}

// Where the steps build their blocks, the executor keeps a copy of the sources of each block it makes stay on the
// device for the run, for the steps that read that block: the forecast counts them, and the heap holds them.
TEST(HostFootprint, TheSourcesOfBlocksBuiltToStayForTheRunAreCounted) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the emulated device's allocations are heap blocks under AddressSanitizer";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "the emulated device's allocations are heap blocks under AddressSanitizer";
#endif
#endif
  const Dataset data = test::random_dataset(20000, 200000, 8, 4, 3);
  Model model(test::training_config(ModelKind::kGcn, 2), data.features.cols(), data.num_classes);
  const LocalGraph local = whole_local_graph(data.graph);
  const std::int64_t budget = 6 * minimum_device_budget(model, local);
  SubgraphExecutorOptions options{budget, ExecutionMode::kReuse, CachePolicy::kStAware};
  options.kept_block_bytes = 0;
  const EpochPlan staying = settled_plan(model, local, data.features.view(), options);
  const Pass& pass = staying.passes.front();
  ASSERT_FALSE(pass.keeps_blocks());
  std::int64_t sources = 0;
  std::int64_t blocks = 0;
  for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) {
    for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
      if (pass.block_stays(l, k)) {
        sources += pass.layer_parts[l][k].num_src;
        ++blocks;
      }
    }
  }
  ASSERT_GT(sources, 5000) << "few blocks stay: a larger budget";
  EpochPlan none = staying;
  for (auto& layer : none.passes.front().blocks_stay) std::fill(layer.begin(), layer.end(), 0);
  const std::int64_t counted = executor_host_bytes(staying, 2, 1) - executor_host_bytes(none, 2, 1);
  EXPECT_EQ(counted, sources * static_cast<std::int64_t>(sizeof(vid_t)));
  // What constructing the executor leaves on the heap (the emulated device's memory is mapped apart from it, but under
  // AddressSanitizer).
  const auto held = [&](EpochPlan plan) {
    Resources resources = test::backend_resources(DeviceKind::kCpu, budget, 1);
    const std::int64_t before = heap_bytes_in_use();
    const SubgraphExecutor executor(resources, model, local, data.features.view(), std::move(plan), std::nullopt);
    return heap_bytes_in_use() - before;
  };
  const std::int64_t measured = held(staying) - held(none);
  EXPECT_GE(measured, counted);
  // Beside its sources, a block's bookkeeping (the maps that name it and its device allocations, about 1.4 KiB) and
  // the staging its upload grows; a sanitizer's allocator counts them in its size classes.
  EXPECT_LE(measured, counted + blocks * 4096) << blocks << " blocks";
}

TEST(HostFootprint, AFootprintOverTheLimitIsAnErrorNamingItsParts) {
  const HostFootprint footprint{.phase = "training", .parts = {{"dataset", 3 << 20}, {"plan", 1 << 20}}};
  EXPECT_NO_THROW(require_host_memory(footprint, 4 << 20, "this run", "available"));
  EXPECT_NO_THROW(require_host_memory(footprint, -1, "this run", "unknown"));
  try {
    require_host_memory(footprint, 2 << 20, "this run", "available on this machine");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "this run needs 4.00M of host memory while training (dataset 3.00M, plan 1.00M), more than the 2.00M "
                 "available on this machine; use more ranks (mpirun -np), a smaller --device-memory, or "
                 "--host-memory to state what it may use");
  }
}

TEST(HostMemory, TheMachineAndTheHeapAreRead) {
  EXPECT_GT(available_host_bytes(), 0);
  const std::int64_t before = heap_bytes_in_use();
  std::vector<char> held(std::size_t{64} << 20, 1);
  // Clang drops an allocation whose contents it can fold; storing the address where it may be read keeps it.
  char* volatile escaped = held.data();
  EXPECT_GE(heap_bytes_in_use() - before, std::int64_t{64} << 20);
  EXPECT_EQ(escaped[12345], 1);
}

}  // namespace
}  // namespace nj

namespace nj {
namespace {

// The subgraph executor's host homes: tensors whose phases do not overlap share a buffer as wide as the widest of
// them. GCN's transformed rows live through their forward phase only and their gradients through the backward
// phase: one buffer. GAT's backward reads the transformed rows again, which keeps each layer's alive from its
// forward phase to its backward one.
TEST(HostFootprint, TensorsWhosePhasesDoNotOverlapShareAHome) {
  ModelConfig config;
  config.hidden = 32;
  const Model gcn(config, 64, 8);
  const RowHomes one = row_homes(gcn);
  EXPECT_EQ(one.buffer_of, (std::vector<std::size_t>{0, 0, 0, 0}));
  EXPECT_EQ(one.width, (std::vector<std::int64_t>{32}));
  // Where the layers may be chained, the second layer's transformed rows are written in the first layer's forward
  // phase, and their gradients read in its backward one: z1 [0, 1] beside z0, grad_z1 [2, 3] beside grad_z0.
  const RowHomes chained = row_homes(gcn, false, true);
  EXPECT_NE(chained.buffer_of[0], chained.buffer_of[2]);
  EXPECT_NE(chained.buffer_of[1], chained.buffer_of[3]);
  EXPECT_EQ(chained.width.size(), 2U);
  config.layers = 3;
  EXPECT_EQ(row_homes(Model(config, 64, 8)).width.size(), 1U);
  config.layers = 2;
  config.kind = ModelKind::kGat;
  config.hidden = 4;
  config.heads = 2;
  const Model gat(config, 64, 8);
  const RowHomes homes = row_homes(gat);
  // Phases 0..3: z0 [0, 3], z1 [1, 2], grad_z1 [2, 2], grad_z0 [3, 3].
  ASSERT_EQ(homes.buffer_of.size(), 4U);
  EXPECT_NE(homes.buffer_of[0], homes.buffer_of[2]);
  EXPECT_NE(homes.buffer_of[2], homes.buffer_of[3]);
  EXPECT_NE(homes.buffer_of[0], homes.buffer_of[1]);
  EXPECT_NE(homes.buffer_of[0], homes.buffer_of[3]);
  EXPECT_EQ(homes.width.size(), 3U);
  for (std::size_t t = 0; t < 4; ++t) {
    EXPECT_GE(homes.width[homes.buffer_of[t]], gat.layer(t / 2).row_width()) << "tensor " << t;
  }
}

// A first layer that sums its inputs runs no aggregation backward: its tensor 1 gets no rows, and the buffers are no
// wider than the tensors that use them (the inputs' width once, not twice).
TEST(HostFootprint, AFirstLayerThatSumsItsInputsHasNoHomeForTheirGradients) {
  ModelConfig config;
  config.hidden = 32;
  const Model gcn(config, 64, 8);
  const RowHomes homes = row_homes(gcn, true, true);
  EXPECT_EQ(homes.row_width, (std::vector<std::int64_t>{64, 0, 8, 8}));
  std::int64_t widths = 0;
  for (const std::int64_t w : homes.width) widths += w;
  EXPECT_EQ(widths, 64 + 8);
}

// A chained layer's outputs computed again never reach the host: their rows are not counted.
TEST(HostFootprint, OutputsComputedAgainAreNotCounted) {
  ModelConfig config;
  config.hidden = 32;
  const Model model(config, 64, 8);
  const RankShape shape{.owned = 10000, .local = 10000, .in_edges = 100000, .features = 64, .classes = 8};
  const RunLayout budgeted{.in_memory = false, .device_budget = 1 << 20};
  RunHostUse kept{.first_layer_sums_inputs = true, .outputs_computed_again = {0}};
  RunHostUse again = kept;
  again.outputs_computed_again = {1};
  EXPECT_EQ(running_host_footprint(model, shape, budgeted, kept).total() -
                running_host_footprint(model, shape, budgeted, again).total(),
            std::int64_t{10000} * 32 * 4);
}

}  // namespace
}  // namespace nj
