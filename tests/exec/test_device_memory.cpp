// Every byte the subgraph executor puts on the device is planned for: rows, graph blocks, slot and id arrays,
// parameters and their gradients, workspaces and the arena's padding. Planning forecasts the peak by replaying
// a training step on a planning device; the emulated device then measures exactly that peak, and a budget that
// cannot hold it is refused before training, with the shortfall in the message.
#include <gtest/gtest.h>

#include <algorithm>

#include "nj/device/arena.hpp"
#include "nj/device/planning_device.hpp"
#include "nj/device/transfers.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/graph/sparse_block.hpp"
#include "nj/io/edge_list.hpp"
#include "nj/io/plain_text.hpp"
#include "nj/kernels/device_block.hpp"
#include "nj/kernels/planning_backend.hpp"
#include "nj/model/device_parameters.hpp"
#include "nj/train/trainer.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

ModelConfig model_config(ModelKind kind) {
  ModelConfig c;
  c.kind = kind;
  c.hidden = 8;
  c.heads = 2;
  c.seed = 5;
  return c;
}

// The device memory of a plan with no budget: what the whole graph needs at once.
std::int64_t unlimited_need(Model& model, const Dataset& data, SparseInputs inputs = SparseInputs::kOff) {
  const LocalGraph local = whole_local_graph(data.graph);
  SubgraphExecutorOptions options{kUnlimited, ExecutionMode::kReuse, CachePolicy::kStAware};
  options.inputs = input_shape(sparse_inputs(inputs, data.features.view()));
  const EpochPlan plan = plan_epoch(model, local, options);
  return forecast_device_memory(model, local, data.features.view(), plan).peak_footprint_bytes;
}

// Of the features, the forecast reads only their shape (nj plan reads none of their values): a view without
// them forecasts the same.
void expect_forecast_reads_only_the_features_shape(Model& model, const LocalGraph& local, const Dataset& data,
                                                   const EpochPlan& plan) {
  const MemoryForecast shape_only =
      forecast_device_memory(model, local, ConstRows{nullptr, data.features.rows(), data.features.cols()}, plan);
  EXPECT_EQ(shape_only.peak_footprint_bytes, plan.memory.peak_footprint_bytes);
  EXPECT_EQ(shape_only.at_peak, plan.memory.at_peak);
  EXPECT_EQ(shape_only.category_peaks, plan.memory.category_peaks);
}

// Trains two epochs within a quarter of what the graph needs and checks each epoch's measured peak against the
// forecast, and the forecast's categories against what they must hold.
// With sparse inputs, the first layer's steps hold their entries.
void expect_measured_peak_is_the_forecast(DeviceKind device, const Dataset& data, ModelKind kind,
                                          SparseInputs inputs = SparseInputs::kOff) {
  SCOPED_TRACE(fmt::format("{}, sparse inputs {}", to_string(kind), to_string(inputs)));
  Model model(model_config(kind), data.features.cols(), data.num_classes);
  const LocalGraph local = whole_local_graph(data.graph);
  const InputShape shape = input_shape(sparse_inputs(inputs, data.features.view()));
  const std::int64_t budget =
      std::max(unlimited_need(model, data, inputs) / 4, minimum_device_budget(model, local, {}, false, shape));
  Resources resources = test::backend_resources(device, budget, 2);
  SubgraphExecutor executor(resources, model, local, data.features.view(),
                            {budget, ExecutionMode::kReuse, CachePolicy::kStAware}, nullptr, inputs);
  const MemoryForecast& forecast = executor.plan().memory;
  EXPECT_LE(forecast.peak_footprint_bytes, budget);
  EXPECT_EQ(executor.plan().options.inputs, shape);
  if (shape.sparse) {
    // Their entries size the steps: the forecast reads them, and finds what the executor's own did.
    EXPECT_EQ(forecast_device_memory(model, local, data.features.view(), executor.plan()).peak_footprint_bytes,
              forecast.peak_footprint_bytes);
  } else {
    expect_forecast_reads_only_the_features_shape(model, local, data, executor.plan());
  }
  EXPECT_GT(executor.plan().num_steps, 4 * static_cast<std::int64_t>(model.num_layers())) << "subgraphs are cut";
  // Where the budget holds more than the steps' peak, blocks stay on the device, in the forecast too.
  // (The plan counts each in whole arena units; the forecast, what each allocation asks for.)
  EXPECT_GT(executor.plan().staying_block_bytes, 0);
  std::int64_t staying_blocks = 0;
  for (const Pass& pass : executor.plan().passes) {
    for (const auto& layer : pass.blocks_stay) staying_blocks += std::count(layer.begin(), layer.end(), 1);
  }
  EXPECT_GE(forecast.category_peaks.at("graph"),
            executor.plan().staying_block_bytes - staying_blocks * kArenaAlignment);

  // Every kind of device memory is counted: the parameters whole, all the time, and the others at their highest.
  EXPECT_EQ(forecast.at_peak.at("parameters"), DeviceParameters::bytes_for(model));
  for (const char* category : {"rows", "graph", "index"}) {
    EXPECT_GT(forecast.category_peaks.at(category), 0) << category;
  }
  if (kind == ModelKind::kGat) {
    EXPECT_GT(forecast.category_peaks.at("workspace"), 0);
  }
  std::int64_t at_peak = 0;
  for (const auto& [category, bytes] : forecast.at_peak) at_peak += bytes;
  EXPECT_EQ(at_peak + forecast.padding_at_peak(), forecast.peak_footprint_bytes);

  auto comm = make_single_process_communicator();
  TrainOptions options;
  options.epochs = 2;
  options.eval_every = 1;  // evaluation between the epochs must not disturb the next one's peak
  Trainer trainer(model, executor, *comm, targets_of(data), options);
  int epochs = 0;
  trainer.fit([&](const EpochMetrics& m) {
    ++epochs;
    EXPECT_EQ(m.execution.peak_device_bytes, forecast.peak_bytes);
    EXPECT_EQ(m.execution.peak_device_footprint_bytes, forecast.peak_footprint_bytes);
    // A device that copies pageable memory as fast takes blocks of host rows straight (Transfers).
    if (!resources.device->copies_pageable_memory_directly()) {
      EXPECT_EQ(m.execution.pageable_copies, 0) << "every staging buffer is page-locked";
    }
    // The packed blocks that do not stay on the device travel with their steps, as planned.
    EXPECT_EQ(m.execution.h2d_other[Traffic::kStructure], executor.plan().structure_h2d_bytes);
    EXPECT_GT(m.execution.h2d_other[Traffic::kIndex], 0) << "slots and ids";
    EXPECT_GT(m.execution.h2d_other[Traffic::kParameters], 0) << "the parameters";
    EXPECT_GE(m.execution.d2h_other[Traffic::kParameters], m.execution.h2d_other[Traffic::kParameters])
        << "their gradients (padded) come back";
  });
  EXPECT_EQ(epochs, 2);
}

class DeviceMemory : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override { NJ_SKIP_WITHOUT_BACKEND(GetParam()); }
};

TEST_P(DeviceMemory, MeasuredPeakIsTheForecastOnCora) {
  NJ_SKIP_WITHOUT_DATA();
  const Dataset cora = read_plain_folder((test::data_dir() / "cora").string(), ConvertOptions{.name = "cora"});
  for (const ModelKind kind : {ModelKind::kGcn, ModelKind::kGat})
    expect_measured_peak_is_the_forecast(GetParam(), cora, kind);
}

// Cora's bag-of-words features, about one entry in 80 non-zero, multiplied as sparse rows.
TEST_P(DeviceMemory, MeasuredPeakIsTheForecastWithSparseInputsOnCora) {
  NJ_SKIP_WITHOUT_DATA();
  const Dataset cora = read_plain_folder((test::data_dir() / "cora").string(), ConvertOptions{.name = "cora"});
  ASSERT_TRUE(sparse_inputs(SparseInputs::kAuto, cora.features.view()).has_value());
  for (const ModelKind kind : {ModelKind::kGcn, ModelKind::kGat, ModelKind::kSage})
    expect_measured_peak_is_the_forecast(GetParam(), cora, kind, SparseInputs::kOn);
  // The sparse inputs' unlimited need is far below the dense one's: the features are most of it.
  Model model(model_config(ModelKind::kGcn), cora.features.cols(), cora.num_classes);
  EXPECT_LT(4 * unlimited_need(model, cora, SparseInputs::kOn), unlimited_need(model, cora));
}

TEST_P(DeviceMemory, MeasuredPeakIsTheForecastOnSlashdot) {
  NJ_SKIP_WITHOUT_DATA();
  // As scripts/bench/ablation.py converts it, with fewer feature columns to keep the test short.
  const auto edges = read_edge_list((test::data_dir() / "snap/soc-Slashdot0902.txt.gz").string(), {});
  ConvertOptions options{.name = "slashdot"};
  options.graph = {.symmetrize = true, .self_loops = SelfLoops::kRemove, .duplicates = Duplicates::kRemove};
  options.data.random_features = 16;
  options.data.seed = 1;
  expect_measured_peak_is_the_forecast(GetParam(), build_dataset(edges, options), ModelKind::kGcn);
}

// Without a budget what the forward half uploads stays for the backward half, and the blocks (at the peak the
// device holds every block of the pass) and the features for the whole run; a layer's outputs stay as the next
// layer's input. The rows uploaded are what the plan predicts. The measured peak is still the
// forecast, epoch after epoch.
TEST_P(DeviceMemory, WithoutABudgetWhatTheForwardHalfUploadsStaysForTheBackwardHalf) {
  const Dataset data = test::grid_dataset(16, 16, 11);
  for (const ModelKind kind : {ModelKind::kGcn, ModelKind::kGat}) {
    SCOPED_TRACE(to_string(kind));
    Model model(model_config(kind), data.features.cols(), data.num_classes);
    const LocalGraph local = whole_local_graph(data.graph);
    Resources resources = test::backend_resources(GetParam(), kUnlimited, 2);
    SubgraphExecutor executor(resources, model, local, data.features.view(),
                              {kUnlimited, ExecutionMode::kReuse, CachePolicy::kStAware});
    const EpochPlan& plan = executor.plan();
    ASSERT_EQ(plan.passes.size(), 1U);
    const Pass& pass = plan.passes.front();
    std::int64_t blocks = 0;
    for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) {
      ASSERT_EQ(pass.layer_parts[l].size(), 1U);
      EXPECT_TRUE(std::ranges::is_sorted(pass.destinations(l, 0)))
          << "a layer that is one subgraph takes rows in order";
      for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
        const PartSize& size = pass.layer_parts[l][k];
        const bool weighted =
            pass.keeps_blocks() ? !pass.blocks[l][k].block.edge_weight.empty() : pass.graph.weighted();
        blocks += DeviceBlock::bytes_for(static_cast<std::int64_t>(pass.destinations(l, k).size()), size.num_src,
                                         size.num_edges, weighted);
      }
    }
    EXPECT_EQ(plan.memory.category_peaks.at("graph"), blocks);
    expect_forecast_reads_only_the_features_shape(model, local, data, plan);
    // An epoch's rows that cross are the logits out and their gradients in: the features stay for the whole run,
    // the hidden layer's outputs as the next layer's input, and their gradients as its output gradients.
    ASSERT_TRUE(pass.lasting);
    ASSERT_TRUE(pass.output_stays(0, 0));
    const std::int64_t logits = pass.num_rows * data.num_classes * std::int64_t{sizeof(float)};
    EXPECT_EQ(pass.stream_h2d_bytes, logits);
    EXPECT_EQ(pass.stream_d2h_bytes, logits);

    auto comm = make_single_process_communicator();
    TrainOptions options;
    options.epochs = 2;
    options.eval_every = 1;
    Trainer trainer(model, executor, *comm, targets_of(data), options);
    int epochs = 0;
    trainer.fit([&](const EpochMetrics& m) {
      ++epochs;
      EXPECT_EQ(m.execution.peak_device_footprint_bytes, plan.memory.peak_footprint_bytes);
      EXPECT_EQ(m.execution.h2d_bytes, plan.h2d_bytes);
      // Slots, ids and parameters: the blocks were uploaded once for the whole run, before the first epoch.
      EXPECT_EQ(m.execution.h2d_other[Traffic::kStructure], 0);
      EXPECT_GT(m.execution.h2d_other[Traffic::kIndex], 0);
      EXPECT_GT(m.execution.h2d_other[Traffic::kParameters], 0);
      if (resources.device->copies_pageable_memory_directly()) {
        EXPECT_GT(m.execution.pageable_copies, 0) << "rows in order move as one block, without staging";
      }
    });
    EXPECT_EQ(epochs, 2);
  }
}

TEST_P(DeviceMemory, PlannerRefusesABudgetThatHoldsTheRowsButNotTheBlocksAndParameters) {
  // Wide inputs make the parameters large next to a small graph's rows.
  const Dataset data = test::random_dataset(60, 240, 400, 3, 7);
  Model model(model_config(ModelKind::kGcn), data.features.cols(), data.num_classes);
  const LocalGraph local = whole_local_graph(data.graph);
  const std::int64_t minimum = minimum_device_budget(model, local);
  // The minimum is the parameters plus four of the smallest steps, whose rows are only part of them: with half
  // the parameters missing, the steps' rows alone still fit.
  const std::int64_t parameters = DeviceParameters::bytes_for(model);
  const std::int64_t budget = minimum - parameters / 2;
  ASSERT_LT(minimum - parameters, budget) << "the steps alone fit";
  try {
    plan_epoch(model, local, {budget, ExecutionMode::kReuse, CachePolicy::kStAware});
    ADD_FAILURE() << "a budget short of the parameters was accepted";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
    EXPECT_NE(message.find(fmt::format("is {} short", format_bytes(minimum - budget))), std::string::npos) << message;
    EXPECT_NE(message.find("it must hold the parameters ("), std::string::npos) << message;
    EXPECT_NE(message.find("block"), std::string::npos) << message;
  }
  // The budget it names is enough, and training runs within it.
  Resources resources = test::backend_resources(GetParam(), minimum, 1);
  SubgraphExecutor executor(resources, model, local, data.features.view(),
                            {minimum, ExecutionMode::kReuse, CachePolicy::kStAware});
  expect_forecast_reads_only_the_features_shape(model, local, data, executor.plan());
  auto comm = make_single_process_communicator();
  TrainOptions options;
  options.epochs = 1;
  options.eval_every = 0;
  Trainer(model, executor, *comm, targets_of(data), options).fit([&](const EpochMetrics& m) {
    EXPECT_LE(m.execution.peak_device_footprint_bytes, minimum);
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceMemory, test::all_backends(), test::BackendName());

// What the CUDA backend's libraries take is planned for on any machine (nj plan --device cuda): the offsets each
// cuSPARSE aggregation narrows come from the arena for the call, so the planning backend takes them as the
// replay runs, and the steps leave room for them; the workspace lies beside the arena, outside the budget.
TEST(LibraryMemory, ThePlanningBackendTakesTheNarrowedOffsetsWhereCusparseWouldRun) {
  const Dataset data = test::grid_dataset(8, 8, 3);
  const CsrGraph graph = with_self_loops(data.graph, false);
  const std::vector<gid_t> ids(static_cast<std::size_t>(graph.num_vertices()));
  const SparseBlock host = local_graph_block(
      graph, std::vector<float>(static_cast<std::size_t>(graph.num_edges()), 1.0F), graph.num_vertices(), ids);
  for (const bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "cuSPARSE");
    PlanningDevice device;
    const auto planning = make_planning_backend(device, cuda_library_memory(deterministic));
    Transfers transfers(device);
    const DeviceBlock block(transfers, host, "graph: block", Traffic::kStructure);
    DeviceMatrix rows(device, graph.num_vertices(), 4, "rows: in");
    DeviceMatrix out(device, graph.num_vertices(), 4, "rows: out");
    planning->spmm(block.view(), rows.view(), out.view());
    planning->spmm_transpose(block.view(), out.view(), rows.view(), false);
    const MemoryForecast forecast = device.forecast();
    const auto library = forecast.category_peaks.find("library");
    if (deterministic) {
      EXPECT_EQ(library, forecast.category_peaks.end());
      continue;
    }
    ASSERT_NE(library, forecast.category_peaks.end());
    EXPECT_EQ(library->second, (graph.num_vertices() + 1) * std::int64_t{sizeof(std::int32_t)});
    // Read through cache slots, the block goes to the row kernels: nothing narrowed.
    PlanningDevice slotted;
    const auto through_slots = make_planning_backend(slotted, cuda_library_memory(false));
    Transfers slot_transfers(slotted);
    const DeviceBlock slot_block(slot_transfers, host, "graph: block", Traffic::kStructure);
    DeviceArray<vid_t> slots(slotted, graph.num_vertices(), "index: slots");
    DeviceMatrix pool(slotted, graph.num_vertices(), 4, "rows: pool");
    DeviceMatrix slot_out(slotted, graph.num_vertices(), 4, "rows: out");
    through_slots->spmm(slot_block.view(slots.view()), pool.view(), slot_out.view());
    EXPECT_EQ(slotted.forecast().category_peaks.count("library"), 0U);
  }
}

// Whether a device's memory lies apart from the host's is what its backend's libraries say, not its name: the CUDA
// libraries', whichever the mode, and so the planning backend's that stands in for them; the CPU backend's is the
// host's.
TEST(LibraryMemory, OnlyTheCudaLibrariesSayTheirMemoryLiesApartFromTheHost) {
  EXPECT_TRUE(cuda_library_memory(false).memory_apart_from_host);
  EXPECT_TRUE(cuda_library_memory(true).memory_apart_from_host);
  PlanningDevice device;
  EXPECT_TRUE(make_planning_backend(device, cuda_library_memory(false))->library_memory().memory_apart_from_host);
  EXPECT_FALSE(make_planning_backend(device)->library_memory().memory_apart_from_host);
  const Resources cpu = test::backend_resources(DeviceKind::kCpu, kUnlimited, 1);
  EXPECT_FALSE(cpu.backend->library_memory().memory_apart_from_host);
}

TEST(LibraryMemory, StepsLeaveRoomForTheNarrowedOffsets) {
  const Dataset data = test::grid_dataset(16, 16, 11);
  const Model model(model_config(ModelKind::kGcn), data.features.cols(), data.num_classes);
  const LocalGraph local = whole_local_graph(data.graph);
  SubgraphExecutorOptions options{4 * minimum_device_budget(model, local), ExecutionMode::kReuse,
                                  CachePolicy::kStAware};
  const EpochPlan plain = plan_epoch(model, local, options);
  options.library = cuda_library_memory(false);
  EXPECT_NE(plan_epoch(model, local, options).largest_step_bytes, plain.largest_step_bytes);
  EXPECT_GT(minimum_device_budget(model, local, options.library), minimum_device_budget(model, local));
  // Without cuSPARSE (--deterministic) the plan is that of a backend that expands packed blocks and narrows nothing.
  options.library = cuda_library_memory(true);
  const EpochPlan deterministic = plan_epoch(model, local, options);
  options.library = {.reads_packed_blocks = false};
  const EpochPlan expanding = plan_epoch(model, local, options);
  EXPECT_EQ(deterministic.num_steps, expanding.num_steps);
  EXPECT_EQ(deterministic.largest_step_bytes, expanding.largest_step_bytes);
  EXPECT_GT(deterministic.num_steps, plain.num_steps) << "expanding blocks takes room of the steps";
  options.library = cuda_library_memory(true);
  EXPECT_EQ(options.library.workspace_bytes, kCublasWorkspaceBytes);
}

// In-memory training reports what its device holds and moves, as the subgraph executor does: its peak (every
// layer's rows, the graph and the features at once), the logits' gradients it uploads and the logits it downloads,
// the same every epoch (what it uploads once, as it is made, is no epoch's); and forecast_in_memory's replay forecasts
// each of them to the byte.
TEST(InMemoryMetrics, ReportTheDevicePeakAndTheBytesMovedAsForecast) {
  const Dataset data = test::grid_dataset(16, 16, 11);
  for (const bool sparse : {false, true}) {
    SCOPED_TRACE(sparse ? "sparse inputs" : "dense inputs");
    Model model(model_config(ModelKind::kGcn), data.features.cols(), data.num_classes);
    const LocalGraph local = whole_local_graph(data.graph);
    const std::optional<SparseRows> rows = sparse ? std::optional(sparse_rows_of(data.features.view())) : std::nullopt;
    const MemoryForecast forecast = forecast_in_memory(
        model, local, {nullptr, data.features.rows(), data.features.cols()}, rows ? &*rows : nullptr);
    Resources resources = test::backend_resources(DeviceKind::kCpu, kUnlimited, 2);
    InMemoryExecutor executor(resources, model, local, data.features.view(), rows ? &*rows : nullptr, nullptr);
    auto comm = make_single_process_communicator();
    TrainOptions options;
    options.epochs = 2;
    options.eval_every = 0;
    const std::int64_t logits = data.num_vertices() * data.num_classes * std::int64_t{sizeof(float)};
    int epochs = 0;
    Trainer(model, executor, *comm, targets_of(data), options).fit([&](const EpochMetrics& m) {
      ++epochs;
      EXPECT_GE(m.execution.peak_device_footprint_bytes, m.execution.peak_device_bytes);
      EXPECT_EQ(m.execution.h2d_bytes, logits) << "the logits' gradients";
      EXPECT_EQ(m.execution.d2h_bytes, logits) << "the logits";
      EXPECT_EQ(m.execution.h2d_other[Traffic::kStructure], 0) << "the graph went up as the executor was made";
      EXPECT_GT(m.execution.h2d_other[Traffic::kParameters], 0) << "the parameters";
      EXPECT_GT(m.execution.d2h_other[Traffic::kParameters], 0) << "the gradients";
      EXPECT_EQ(m.execution.peak_device_bytes, forecast.peak_bytes);
      EXPECT_EQ(m.execution.peak_device_footprint_bytes, forecast.peak_footprint_bytes);
      EXPECT_EQ(m.execution.h2d_bytes, forecast.h2d[Traffic::kRows]);
      EXPECT_EQ(m.execution.d2h_bytes, forecast.d2h[Traffic::kRows]);
      for (const Traffic kind : {Traffic::kStructure, Traffic::kIndex, Traffic::kParameters}) {
        EXPECT_EQ(m.execution.h2d_other[kind], forecast.h2d[kind]);
        EXPECT_EQ(m.execution.d2h_other[kind], forecast.d2h[kind]);
      }
    });
    EXPECT_EQ(epochs, 2);
  }
}

// In memory, a layer's transformed rows live through its forward phase only where its aggregation's backward does not
// read them (GCN), and their gradients through its backward phase: all four tensors of a 2-layer GCN share one buffer
// of every local row. Beside it: the features, each layer's outputs and their gradients, and its dropped inputs.
TEST(InMemoryMemory, AGcnsTransformedRowsAndTheirGradientsShareOneBuffer) {
  constexpr std::int64_t kFeatures = 64;  // wider than the hidden rows: each layer transforms before it aggregates
  const Dataset data = test::random_dataset(500, 3000, kFeatures, 4, 5);
  Model model(model_config(ModelKind::kGcn), kFeatures, data.num_classes);
  ASSERT_EQ(model.num_layers(), 2U);
  const std::int64_t hidden = model.layer(0).out_dim();
  const std::int64_t classes = data.num_classes;
  const MemoryForecast forecast =
      forecast_in_memory(model, whole_local_graph(data.graph), data.features.view(), nullptr);
  const std::int64_t per_vertex = kFeatures                    // features
                                  + std::max(hidden, classes)  // transformed rows and their gradients
                                  + 2 * (hidden + classes)     // outputs and their gradients
                                  + kFeatures + hidden;        // dropped inputs
  EXPECT_EQ(forecast.category_peaks.at("rows"), data.num_vertices() * per_vertex * std::int64_t{sizeof(float)});
}

}  // namespace
}  // namespace nj
