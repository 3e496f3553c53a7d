// The subgraph executor computes the same function as plain full-graph training, within any device budget,
// for every cache policy and both execution modes; it never exceeds the budget; reuse computes every row once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "nj/core/bytes.hpp"
#include "nj/device/arena.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/kernels/forwarding_backend.hpp"
#include "nj/train/trainer.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

struct Trace {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  std::vector<ExecutionMetrics> execution;
};

// Trains `epochs` epochs with the given executor factory and records losses, final weights and metrics.
template <typename MakeExecutor>
Trace train(DeviceKind kind, const Dataset& data, const ModelConfig& config, std::uint32_t epochs,
            std::int64_t device_budget, MakeExecutor&& make_executor) {
  Resources resources = test::backend_resources(kind, device_budget, 2);
  auto comm = make_single_process_communicator();
  Model model(config, data.features.cols(), data.num_classes);
  auto executor = make_executor(resources, model);
  TrainOptions options;
  options.epochs = epochs;
  options.eval_every = 0;
  options.adam.weight_decay = 5e-4F;
  Trace trace;
  Trainer trainer(model, *executor, *comm, targets_of(data), options);
  trainer.fit([&](const EpochMetrics& m) {
    trace.losses.push_back(m.loss);
    trace.execution.push_back(m.execution);
  });
  for (const Parameter* p : model.parameters())
    trace.weights.emplace_back(p->value.span().begin(), p->value.span().end());
  return trace;
}

Trace train_in_memory(DeviceKind kind, const Dataset& data, const ModelConfig& config, std::uint32_t epochs,
                      SparseInputs inputs = SparseInputs::kOff) {
  return train(kind, data, config, epochs, kUnlimited, [&](Resources& resources, Model& model) {
    return std::make_unique<InMemoryExecutor>(resources, model, whole_local_graph(data.graph), data.features.view(),
                                              nullptr, inputs);
  });
}

// What the executor's plan, as it settled it (settle_device_memory), predicts an epoch moves and peaks at.
struct Planned {
  std::int64_t h2d_bytes = 0;
  std::int64_t d2h_bytes = 0;
  std::int64_t structure_h2d_bytes = 0;
  std::int64_t peak_bytes_bound = 0;
  std::int64_t staying_bytes = 0;
  std::int64_t staying_sums_bytes = 0;
};

// On a device with the options' budget.
Trace train_budgeted(DeviceKind kind, const Dataset& data, const ModelConfig& config, std::uint32_t epochs,
                     const SubgraphExecutorOptions& options, SparseInputs inputs = SparseInputs::kOff,
                     Planned* planned = nullptr) {
  return train(kind, data, config, epochs, options.device_budget, [&](Resources& resources, Model& model) {
    auto executor = std::make_unique<SubgraphExecutor>(resources, model, whole_local_graph(data.graph),
                                                       data.features.view(), options, nullptr, inputs);
    const EpochPlan& plan = executor->plan();
    EXPECT_EQ(plan.options.inputs.sparse, inputs == SparseInputs::kOn);
    if (planned != nullptr) {
      *planned = {plan.h2d_bytes,
                  plan.d2h_bytes,
                  plan.structure_h2d_bytes,
                  plan.peak_bytes_bound,
                  plan.staying_block_bytes + plan.staying_input_bytes + plan.staying_sums_bytes,
                  plan.staying_sums_bytes};
    }
    return executor;
  });
}

void expect_close(const Trace& a, const Trace& b, double tolerance) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (std::size_t e = 0; e < a.losses.size(); ++e) {
    EXPECT_NEAR(a.losses[e], b.losses[e], tolerance * std::abs(a.losses[e])) << "epoch " << e;
  }
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (std::size_t p = 0; p < a.weights.size(); ++p) {
    for (std::size_t k = 0; k < a.weights[p].size(); ++k) {
      EXPECT_NEAR(a.weights[p][k], b.weights[p][k], tolerance * std::max(1.0F, std::abs(a.weights[p][k])))
          << "parameter " << p << " element " << k;
    }
  }
}

// A random graph plus a few very high-degree vertices, as in power-law graphs.
Dataset graph_with_hubs() {
  Dataset d = test::random_dataset(600, 1800, 10, 4, 7);
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
  for (vid_t v = 0; v < d.num_vertices(); ++v) {
    for (const vid_t s : d.graph.in_neighbors(v)) src.push_back(s), dst.push_back(v);
    for (const vid_t hub : {3, 77, 400}) {
      if (v % 3 == 0 && v != hub) src.push_back(v), dst.push_back(hub);
    }
  }
  d.graph = build_csr(d.num_vertices(), src, dst,
                      {.symmetrize = true, .self_loops = SelfLoops::kRemove, .duplicates = Duplicates::kRemove});
  return d;
}

// The dataset with only its first `columns` features.
Dataset first_features(const Dataset& data, std::int64_t columns) {
  Dataset narrow = data;
  narrow.features = Matrix(data.num_vertices(), columns);
  for (vid_t v = 0; v < data.num_vertices(); ++v) std::copy_n(data.features.row(v), columns, narrow.features.row(v));
  return narrow;
}

// GCN and GAT of two layers on the graph with hubs, and a one-layer GCN on 3 of its features.
struct HubCase {
  ModelKind kind;
  int layers;
  Dataset data;
};
std::vector<HubCase> hub_cases() {
  const Dataset hubs = graph_with_hubs();
  return {{ModelKind::kGcn, 2, hubs}, {ModelKind::kGat, 2, hubs}, {ModelKind::kGcn, 1, first_features(hubs, 3)}};
}

struct ExactnessCase {
  ModelKind kind;
  int layers;
};

class Exactness : public ::testing::TestWithParam<std::tuple<DeviceKind, ExactnessCase>> {
 protected:
  void SetUp() override { NJ_SKIP_WITHOUT_BACKEND(kind()); }
  DeviceKind kind() const { return std::get<0>(GetParam()); }
  const ExactnessCase& model_case() const { return std::get<1>(GetParam()); }
};

constexpr CachePolicy kAllPolicies[] = {CachePolicy::kStAware, CachePolicy::kLru,       CachePolicy::kFifo,
                                        CachePolicy::kDegree,  CachePolicy::kSizeOrder, CachePolicy::kBelady,
                                        CachePolicy::kNone};

TEST_P(Exactness, BudgetedTrainingMatchesFullGraphTraining) {
  const Dataset data = test::grid_dataset(30, 30, 5);
  const ModelConfig config = test::training_config(model_case().kind, model_case().layers);
  const std::uint32_t epochs = 3;
  const Trace reference = train_in_memory(kind(), data, config, epochs);

  for (const ExecutionMode mode : {ExecutionMode::kReuse, ExecutionMode::kRecompute}) {
    const Trace unlimited = train_budgeted(kind(), data, config, epochs, {kUnlimited, mode, CachePolicy::kStAware});
    expect_close(reference, unlimited, 1e-5);
    const std::int64_t unlimited_peak = unlimited.execution.front().peak_device_bytes;
    ASSERT_GT(unlimited_peak, 0);
    for (const double fraction : {0.5, 0.2, 0.1}) {
      const auto budget = static_cast<std::int64_t>(fraction * static_cast<double>(unlimited_peak));
      // Every policy on the breadth-first cut; the default policy on the cut in vertex ids too (the CLI's, where
      // the vertices are numbered by community).
      std::vector<std::pair<CachePolicy, CutOrder>> configs;
      for (const CachePolicy policy : kAllPolicies) configs.emplace_back(policy, CutOrder::kBreadthFirst);
      configs.emplace_back(CachePolicy::kStAware, CutOrder::kVertexIds);
      for (const auto& [policy, cut] : configs) {
        SCOPED_TRACE(fmt::format("budget {:.0f}% ({} bytes), {}, {}, {} cut", 100 * fraction, budget, to_string(mode),
                                 to_string(policy), to_string(cut)));
        const Trace budgeted = train_budgeted(kind(), data, config, epochs, {budget, mode, policy, cut});
        expect_close(reference, budgeted, 1e-5);
        for (const auto& m : budgeted.execution) {
          EXPECT_LE(m.peak_device_bytes, budget);
          EXPECT_GT(m.h2d_bytes, 0);
          // A closure of one layer is its subgraph: only deeper ones compute rows again.
          if (mode == ExecutionMode::kReuse || model_case().layers == 1) {
            EXPECT_EQ(m.rows_computed, m.rows_needed);
          } else {
            EXPECT_GT(m.rows_computed, m.rows_needed);
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, Exactness,
    ::testing::Combine(test::all_backends(),
                       ::testing::Values(ExactnessCase{ModelKind::kGcn, 1}, ExactnessCase{ModelKind::kGcn, 2},
                                         ExactnessCase{ModelKind::kGcn, 3}, ExactnessCase{ModelKind::kGat, 2},
                                         ExactnessCase{ModelKind::kGat, 3}, ExactnessCase{ModelKind::kSage, 2},
                                         ExactnessCase{ModelKind::kGin, 2}, ExactnessCase{ModelKind::kAppnp, 2})),
    [](const auto& test_info) {
      const ExactnessCase& c = std::get<1>(test_info.param);
      return test::backend_name(std::get<0>(test_info.param)) + "_" + to_string(c.kind) + std::to_string(c.layers);
    });

// Bag-of-words-like features: about one entry in ten non-zero, and some rows empty.
Dataset with_sparse_features(Dataset data) {
  std::mt19937_64 rng(11);
  for (std::int64_t r = 0; r < data.features.rows(); ++r) {
    for (std::int64_t c = 0; c < data.features.cols(); ++c) {
      if (r % 13 == 5 || rng() % 10 != 0) data.features(r, c) = 0.0F;
    }
  }
  return data;
}

using SparseInputsExactness = Exactness;

// The first layer multiplies sparse features as sparse rows: the same training as over dense rows, within rounding,
// in memory, without a budget and within budgets, in both modes, on every model; each run within its budget.
TEST_P(SparseInputsExactness, TrainingOverSparseRowsMatchesTrainingOverDenseRows) {
  const Dataset data = with_sparse_features(test::random_dataset(300, 900, 40, 4, 9));
  const ModelConfig config = test::training_config(model_case().kind, model_case().layers);
  const std::uint32_t epochs = 3;
  const Trace reference = train_in_memory(kind(), data, config, epochs);
  const Trace in_memory = train_in_memory(kind(), data, config, epochs, SparseInputs::kOn);
  expect_close(reference, in_memory, 1e-5);
  const Model model(config, data.features.cols(), data.num_classes);
  const std::int64_t minimum =
      minimum_device_budget(model, whole_local_graph(data.graph), {}, false,
                            input_shape(sparse_inputs(SparseInputs::kOn, data.features.view())));
  for (const ExecutionMode mode : {ExecutionMode::kReuse, ExecutionMode::kRecompute}) {
    const Trace unlimited =
        train_budgeted(kind(), data, config, epochs, {kUnlimited, mode, CachePolicy::kStAware}, SparseInputs::kOn);
    expect_close(reference, unlimited, 1e-5);
    const std::int64_t unlimited_peak = unlimited.execution.front().peak_device_bytes;
    // The baseline at a quarter; reuse at a quarter and a tenth, under two policies.
    std::vector<std::pair<double, CachePolicy>> budgets = {{0.25, CachePolicy::kStAware}};
    if (mode == ExecutionMode::kReuse)
      budgets.insert(budgets.end(), {{0.1, CachePolicy::kStAware}, {0.1, CachePolicy::kLru}});
    for (const auto& [fraction, policy] : budgets) {
      const auto budget = std::max(minimum, static_cast<std::int64_t>(fraction * static_cast<double>(unlimited_peak)));
      SCOPED_TRACE(fmt::format("budget {:.0f}%, {}, {}", 100 * fraction, to_string(mode), to_string(policy)));
      const Trace budgeted = train_budgeted(kind(), data, config, epochs, {budget, mode, policy}, SparseInputs::kOn);
      expect_close(reference, budgeted, 1e-5);
      for (const auto& m : budgeted.execution) EXPECT_LE(m.peak_device_bytes, budget);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, SparseInputsExactness,
    ::testing::Combine(test::all_backends(),
                       ::testing::Values(ExactnessCase{ModelKind::kGcn, 2}, ExactnessCase{ModelKind::kGat, 2},
                                         ExactnessCase{ModelKind::kSage, 2}, ExactnessCase{ModelKind::kGin, 2},
                                         ExactnessCase{ModelKind::kAppnp, 2})),
    [](const auto& test_info) {
      const ExactnessCase& c = std::get<1>(test_info.param);
      return test::backend_name(std::get<0>(test_info.param)) + "_" + to_string(c.kind) + std::to_string(c.layers);
    });

// Auto takes the features as sparse rows where at most one entry in kSparseInputsDensity is non-zero.
TEST(SparseInputs, AutoTakesSparseRowsUpToItsDensity) {
  Matrix features(8, 32, 0.0F);
  for (std::int64_t k = 0; k < 16; ++k) features(k % 8, (5 * k) % 32) = 1.0F;  // 16 of 256: one in 16
  EXPECT_TRUE(sparse_inputs(SparseInputs::kAuto, features.view()).has_value());
  EXPECT_FALSE(sparse_inputs(SparseInputs::kOff, features.view()).has_value());
  features(7, 31) = 2.0F;  // one more
  EXPECT_FALSE(sparse_inputs(SparseInputs::kAuto, features.view()).has_value());
  const std::optional<SparseRows> forced = sparse_inputs(SparseInputs::kOn, features.view());
  ASSERT_TRUE(forced.has_value());
  EXPECT_EQ(forced->nonzeros(), 17);
  EXPECT_EQ(forced->max_row_nonzeros(), 3);
  EXPECT_EQ(input_shape(forced), (InputShape{true, 3}));
  // Features a file stores dense stay dense under auto (nj plan reads none of their values), as on any rank that does.
  features(7, 31) = 0.0F;
  EXPECT_TRUE(takes_sparse_inputs(SparseInputs::kAuto, features.view(), true, nullptr));
  EXPECT_FALSE(takes_sparse_inputs(SparseInputs::kAuto, features.view(), false, nullptr));
  EXPECT_TRUE(takes_sparse_inputs(SparseInputs::kOn, features.view(), false, nullptr));
  EXPECT_EQ(parse_sparse_inputs("on"), SparseInputs::kOn);
  EXPECT_THROW(parse_sparse_inputs("yes"), InputError);
}

class SubgraphExecutorTest : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override { NJ_SKIP_WITHOUT_BACKEND(kind()); }
  DeviceKind kind() const { return GetParam(); }
};

TEST_P(SubgraphExecutorTest, GatOnHubsStaysWithinTheSmallestBudget) {
  const Dataset data = graph_with_hubs();
  const ModelConfig config = test::training_config(ModelKind::kGat, 2);
  const Trace reference = train_in_memory(kind(), data, config, 2);
  const Model model(config, data.features.cols(), data.num_classes);
  for (const ExecutionMode mode : {ExecutionMode::kReuse, ExecutionMode::kRecompute}) {
    const std::int64_t minimum = minimum_device_budget(model, whole_local_graph(data.graph));
    for (const std::int64_t budget : {minimum, minimum + minimum / 3}) {
      for (const CachePolicy policy : {CachePolicy::kStAware, CachePolicy::kSizeOrder, CachePolicy::kBelady}) {
        SCOPED_TRACE(fmt::format("{} bytes, {}, {}", budget, to_string(mode), to_string(policy)));
        const Trace budgeted = train_budgeted(kind(), data, config, 2, {budget, mode, policy});
        expect_close(reference, budgeted, 1e-5);
        for (const auto& m : budgeted.execution) EXPECT_LE(m.peak_device_bytes, budget);
      }
    }
    // One byte less than the minimum is refused up front, with the minimum in the message.
    try {
      train_budgeted(kind(), data, config, 1, {minimum - 1, mode, CachePolicy::kStAware});
      ADD_FAILURE() << "a budget below the minimum was accepted";
    } catch (const InputError& e) {
      // The suggested budget is enough.
      const std::string message = e.what();
      const auto at = message.find("use --device-memory ");
      ASSERT_NE(at, std::string::npos) << message;
      const std::string suggested = message.substr(at + 20, message.find(' ', at + 20) - (at + 20));
      EXPECT_GE(parse_byte_size(suggested), minimum);
      EXPECT_NO_THROW(
          plan_epoch(model, whole_local_graph(data.graph), {parse_byte_size(suggested), mode, CachePolicy::kStAware}));
    }
  }
}

// Wide sparse rows (4,096 columns, whose offsets alone take 32 KiB a step) train within the smallest budget the plan
// names for them, in both modes: the plan counts every array a sparse transform step holds.
TEST_P(SubgraphExecutorTest, WideSparseInputsStayWithinTheSmallestBudget) {
  Dataset data = test::random_dataset(200, 600, 4096, 3, 8);
  for (std::int64_t k = 0; k < data.features.size(); ++k) {
    if (k % 97 != 0) data.features.data()[k] = 0.0F;
  }
  const ModelConfig config = test::training_config(ModelKind::kGcn, 2);
  const Trace reference = train_in_memory(kind(), data, config, 2);
  const Model model(config, data.features.cols(), data.num_classes);
  const InputShape shape = input_shape(sparse_inputs(SparseInputs::kOn, data.features.view()));
  for (const ExecutionMode mode : {ExecutionMode::kReuse, ExecutionMode::kRecompute}) {
    const std::int64_t minimum = minimum_device_budget(model, whole_local_graph(data.graph), {}, false, shape);
    SCOPED_TRACE(fmt::format("{} bytes, {}", minimum, to_string(mode)));
    const Trace budgeted =
        train_budgeted(kind(), data, config, 2, {minimum, mode, CachePolicy::kStAware}, SparseInputs::kOn);
    expect_close(reference, budgeted, 1e-5);
    for (const auto& m : budgeted.execution) EXPECT_LE(m.peak_device_bytes, minimum);
  }
  // Where the sparse library takes the first layer's SpMMs (CUDA without --deterministic) it narrows their offsets,
  // the rows' forward and the columns' backward, whatever the layer's own aggregation: the smallest budget of every
  // model holds them too.
  for (const ModelKind model_kind : {ModelKind::kGcn, ModelKind::kGat, ModelKind::kSage}) {
    SCOPED_TRACE(to_string(model_kind));
    Model other(test::training_config(model_kind, 2), data.features.cols(), data.num_classes);
    const LocalGraph local = whole_local_graph(data.graph);
    SubgraphExecutorOptions options{0, ExecutionMode::kReuse, CachePolicy::kStAware};
    options.library = cuda_library_memory(false);
    options.inputs = shape;
    options.device_budget = minimum_device_budget(other, local, options.library, false, shape);
    EpochPlan plan = plan_epoch(other, local, options);
    plan.memory = forecast_device_memory(other, local, data.features.view(), plan);
    EXPECT_EQ(device_memory_shortfall(plan), 0) << describe_forecast(plan.memory);
  }
}

// Inputs narrower than the rows they would sum: over dense rows GCN's and SAGE's first layer sums them first
// ((Â·X)·W), over sparse rows it transforms them first (Â·(X·W)); the two are one function within rounding.
TEST_P(SubgraphExecutorTest, NarrowSparseInputsTransformFirstAndMatchDenseInputsSummedFirst) {
  const Dataset data = with_sparse_features(test::random_dataset(300, 900, 12, 4, 9));
  for (const ModelKind model_kind : {ModelKind::kGcn, ModelKind::kSage}) {
    SCOPED_TRACE(to_string(model_kind));
    const ModelConfig config = test::training_config(model_kind, 2);
    ASSERT_TRUE(aggregates_before_transform(Model(config, data.features.cols(), data.num_classes).layer(0), 0, false));
    const Trace reference = train_in_memory(kind(), data, config, 3);
    expect_close(reference, train_in_memory(kind(), data, config, 3, SparseInputs::kOn), 1e-5);
    expect_close(reference,
                 train_budgeted(kind(), data, config, 3, {kUnlimited, ExecutionMode::kReuse, CachePolicy::kStAware},
                                SparseInputs::kOn),
                 1e-5);
  }
}

// GCN's first layer sums its inputs first on these 10 features at hidden 8 (its backward then runs in the second
// layer's), GAT's transforms them first; a one-layer GCN on 3 of the features sums them first with no second layer
// to take its backward, so its sums go to the host and back or stay.
TEST_P(SubgraphExecutorTest, MeasuredTrafficAndPeakAreWhatThePlanSays) {
  for (const HubCase& hub_case : hub_cases()) {
    const auto& [model_kind, layers, data] = hub_case;
    const ModelConfig config = test::training_config(model_kind, layers);
    const Model model(config, data.features.cols(), data.num_classes);
    for (const ExecutionMode mode : {ExecutionMode::kReuse, ExecutionMode::kRecompute}) {
      for (const CachePolicy policy : {CachePolicy::kStAware, CachePolicy::kSizeOrder}) {
        SCOPED_TRACE(
            fmt::format("{} of {} layers, {}, {}", to_string(model_kind), layers, to_string(mode), to_string(policy)));
        const std::int64_t budget = 2 * minimum_device_budget(model, whole_local_graph(data.graph));
        const SubgraphExecutorOptions options{budget, mode, policy};
        const EpochPlan plan = plan_epoch(model, whole_local_graph(data.graph), options);
        EXPECT_LE(plan.peak_bytes_bound, budget);
        Planned settled;
        const Trace trace = train_budgeted(kind(), data, config, 2, options, SparseInputs::kOff, &settled);
        // What stays on the device for the run is no epoch's traffic, and widens the bound by its bytes.
        EXPECT_EQ(settled.peak_bytes_bound, plan.peak_bytes_bound + settled.staying_bytes);
        if (layers == 1 && mode == ExecutionMode::kReuse) {
          EXPECT_GT(settled.staying_sums_bytes, 0) << "the one-layer model keeps no sums on the device";
        }
        for (const ExecutionMetrics& m : trace.execution) {
          EXPECT_LE(m.peak_device_bytes, settled.peak_bytes_bound);
          EXPECT_EQ(m.h2d_bytes, settled.h2d_bytes);
          EXPECT_EQ(m.d2h_bytes, settled.d2h_bytes);
          if (mode == ExecutionMode::kReuse) {
            EXPECT_EQ(m.h2d_other[Traffic::kStructure], settled.structure_h2d_bytes);
          }
        }
        if (mode == ExecutionMode::kRecompute) {
          EXPECT_EQ(settled.h2d_bytes, plan.h2d_bytes) << "nothing stays";
        }
      }
    }
  }
}

// A step's block travels packed: its sources in 16 bits where it has at most narrow_source_limit of them, else 32.
// With the limit lowered below every block's sources, each block falls back to 32 bits: the same training (the
// device expands both into the same view; the planner sizes the wider blocks' steps, and so cuts the layers, a
// little differently, which only reorders sums), and more structure bytes.
TEST_P(SubgraphExecutorTest, BlocksWithTooManySourcesForSixteenBitsTrainTheSame) {
  const Dataset data = graph_with_hubs();
  for (const ModelKind model_kind : {ModelKind::kGcn, ModelKind::kGat}) {
    SCOPED_TRACE(to_string(model_kind));
    const ModelConfig config = test::training_config(model_kind, 2);
    const Model model(config, data.features.cols(), data.num_classes);
    SubgraphExecutorOptions narrow{2 * minimum_device_budget(model, whole_local_graph(data.graph)),
                                   ExecutionMode::kReuse, CachePolicy::kStAware};
    narrow.use_spare_room = false;  // every block travels, so that its bytes show
    SubgraphExecutorOptions wide = narrow;
    wide.narrow_source_limit = 1;
    const Trace a = train_budgeted(kind(), data, config, 2, narrow);
    const Trace b = train_budgeted(kind(), data, config, 2, wide);
    expect_close(a, b, 1e-5);
    for (std::size_t epoch = 0; epoch < a.execution.size(); ++epoch) {
      const ExecutionMetrics& m = a.execution[epoch];
      const ExecutionMetrics& w = b.execution[epoch];
      EXPECT_GT(m.h2d_other[Traffic::kStructure], 0);
      EXPECT_GT(w.h2d_other[Traffic::kStructure], m.h2d_other[Traffic::kStructure]) << "32-bit sources weigh more";
    }
  }
}

// A backend wrapper that counts the blocks it is asked to expand. `Expanding`, its kernels read a packed block only
// expanded, as the CUDA backend's do, and it refuses a block handed to it as it lies.
class BlockReadingBackend final : public ForwardingBackend {
 public:
  BlockReadingBackend(std::unique_ptr<Backend> inner, bool expanding, std::int64_t& expansions)
      : ForwardingBackend(std::move(inner)), expanding_(expanding), expansions_(expansions) {}
  LibraryMemory library_memory() const override {
    LibraryMemory memory = ForwardingBackend::library_memory();
    if (expanding_) memory.reads_packed_blocks = false;
    return memory;
  }

 private:
  void before(const KernelCall& call) override {
    const std::string_view kernel = call.kernel;
    if (kernel == "expand_block") ++expansions_;
    if (!expanding_ || call.block == nullptr) return;
    const bool transpose = kernel == "spmm_transpose" || kernel == "rooted_sum_transpose" || kernel == "gat_backward";
    NJ_EXPECTS(call.block->narrow_src_index == nullptr && call.block->src_factor == nullptr &&
                   (!transpose || call.block->has_out_edges()),
               "{} handed a block as it lies by an executor told to expand it", kernel);
  }

  bool expanding_;
  std::int64_t& expansions_;
};

// Where the backend reads packed blocks only expanded, each step expands its block on the device (its out-edges too
// backward), in room the plan counts: the smallest budget is larger, training within twice it matches full-graph
// training, and the epoch moves and peaks at what the plan says. Where it reads them as they lie, no step expands one.
TEST_P(SubgraphExecutorTest, BlocksExpandedOnTheDeviceTrainAsFullGraphTraining) {
  for (const HubCase& hub_case : hub_cases()) {
    const auto& [model_kind, layers, data] = hub_case;
    SCOPED_TRACE(fmt::format("{} of {} layers", to_string(model_kind), layers));
    const ModelConfig config = test::training_config(model_kind, layers);
    const Model model(config, data.features.cols(), data.num_classes);
    const LocalGraph local = whole_local_graph(data.graph);
    const LibraryMemory expanding{.reads_packed_blocks = false};
    EXPECT_GT(minimum_device_budget(model, local, expanding), minimum_device_budget(model, local));
    const SubgraphExecutorOptions options{2 * minimum_device_budget(model, local, expanding), ExecutionMode::kReuse,
                                          CachePolicy::kStAware};
    for (const bool expands : {true, false}) {
      SCOPED_TRACE(expands ? "expanding" : "as the backend reads them");
      Planned settled;
      std::int64_t expansions = 0;
      bool reads_packed = false;
      const Trace trace = train(kind(), data, config, 2, options.device_budget, [&](Resources& resources, Model& m) {
        resources.backend = std::make_unique<BlockReadingBackend>(std::move(resources.backend), expands, expansions);
        reads_packed = resources.backend->library_memory().reads_packed_blocks;
        auto executor = std::make_unique<SubgraphExecutor>(resources, m, local, data.features.view(), options, nullptr);
        const EpochPlan& plan = executor->plan();
        EXPECT_EQ(plan.options.library.reads_packed_blocks, reads_packed);
        settled = {plan.h2d_bytes, plan.d2h_bytes, 0, plan.peak_bytes_bound, 0, 0};
        return executor;
      });
      EXPECT_EQ(reads_packed, !expands && kind() == DeviceKind::kCpu);
      EXPECT_EQ(expansions > 0, !reads_packed) << expansions << " blocks expanded";
      expect_close(train_in_memory(kind(), data, config, 2), trace, 1e-5);
      for (const ExecutionMetrics& m : trace.execution) {
        EXPECT_LE(m.peak_device_bytes, settled.peak_bytes_bound);
        EXPECT_EQ(m.h2d_bytes, settled.h2d_bytes);
        EXPECT_EQ(m.d2h_bytes, settled.d2h_bytes);
      }
    }
  }
}

// What the blocks' room would move under LRU and Belady's rule replays the steps that read blocks, each uploading
// its packed block where the room does not hold it: with no room, every read, which is what the executor moves; with
// a budget whose room holds every block, nothing. On 3 features GCN's first layer sums its inputs first; alone, it
// has backward steps, which read no block.
TEST(SubgraphExecutor, BlocksRoomUnderLruAndBeladyCountsTheReadsItMisses) {
  for (const HubCase& hub_case : hub_cases()) {
    const auto& [model_kind, layers, data] = hub_case;
    SCOPED_TRACE(fmt::format("{} of {} layers on {} features", to_string(model_kind), layers, data.features.cols()));
    Model model(test::training_config(model_kind, layers), data.features.cols(), data.num_classes);
    const LocalGraph local = whole_local_graph(data.graph);
    const auto settled = [&](std::int64_t budget, bool use_spare_room) {
      SubgraphExecutorOptions options{budget, ExecutionMode::kReuse, CachePolicy::kStAware};
      options.use_spare_room = use_spare_room;
      EpochPlan plan = plan_epoch(model, local, options);
      settle_device_memory(model, local, data.features.view(), plan);
      return plan;
    };
    const std::int64_t minimum = minimum_device_budget(model, local);
    const EpochPlan travelling = settled(2 * minimum, false);
    EXPECT_EQ(travelling.staying_block_bytes, 0);
    EXPECT_GT(travelling.structure_h2d_bytes, 0);
    for (const CachePolicy policy : {CachePolicy::kLru, CachePolicy::kBelady}) {
      EXPECT_EQ(structure_bytes_in_room(model, travelling, policy), travelling.structure_h2d_bytes)
          << to_string(policy);
    }
    std::int64_t budget = 2 * minimum;
    while (settled(budget, true).structure_h2d_bytes > 0) budget *= 2;
    const EpochPlan roomy = settled(budget, true);
    EXPECT_GT(roomy.staying_block_bytes, 0);
    for (const CachePolicy policy : {CachePolicy::kLru, CachePolicy::kBelady}) {
      EXPECT_EQ(structure_bytes_in_room(model, roomy, policy), 0) << to_string(policy);
    }
    EXPECT_EQ(structure_bytes_in_room(model, plan_epoch(model, local, {}), CachePolicy::kBelady), 0) << "no budget";
  }
}

// An inference plan reads each block once an epoch, in the same order every epoch: in a room for some blocks but not
// all (half the room its blocks stay in), LRU has always pushed out the block read next and uploads every read, and
// Belady's rule keeps what fits and uploads less.
TEST(SubgraphExecutor, BlocksRoomOfAnInferencePlanDefeatsLruButNotBelady) {
  const Dataset data = graph_with_hubs();
  Model model(test::training_config(ModelKind::kGat, 2), data.features.cols(), data.num_classes);
  const LocalGraph local = whole_local_graph(data.graph);
  SubgraphExecutorOptions options{minimum_device_budget(model, local, {}, true), ExecutionMode::kReuse,
                                  CachePolicy::kStAware};
  options.forward_only = true;
  options.use_spare_room = false;
  EpochPlan plan = plan_epoch(model, local, options);
  settle_device_memory(model, local, data.features.view(), plan);
  const std::int64_t every_read = plan.structure_h2d_bytes;
  ASSERT_GT(every_read, 0);
  plan.staying_block_bytes = every_read / 2;
  EXPECT_EQ(structure_bytes_in_room(model, plan, CachePolicy::kLru), every_read);
  EXPECT_LT(structure_bytes_in_room(model, plan, CachePolicy::kBelady), every_read);
  EXPECT_GE(structure_bytes_in_room(model, plan, CachePolicy::kBelady), every_read - plan.staying_block_bytes);
}

// Where a first layer sums its inputs, its blocks are read once an epoch (forward) and the second layer's twice: the
// room the budget leaves takes the second layer's first. A first-layer block then stays only where it fits in what
// every second-layer block that travels did not.
TEST(SubgraphExecutor, BlocksReadTwiceAnEpochTakeTheRoomBeforeBlocksReadOnce) {
  const Dataset data = test::random_dataset(3000, 30000, 3, 4, 7);
  Model model(test::training_config(ModelKind::kGcn, 2), data.features.cols(), data.num_classes);
  const LocalGraph local = whole_local_graph(data.graph);
  const std::int64_t minimum = minimum_device_budget(model, local);
  for (const std::int64_t budget : {3 * minimum, 4 * minimum, 6 * minimum}) {
    SCOPED_TRACE(budget);
    EpochPlan plan = plan_epoch(model, local, {budget, ExecutionMode::kReuse, CachePolicy::kStAware});
    settle_device_memory(model, local, data.features.view(), plan);
    const Pass& pass = plan.passes.front();
    ASSERT_TRUE(pass.first_layer_sums_inputs);
    const auto room_bytes = [&](std::size_t l, std::size_t k) {
      return arena_block_bytes(PackedBlock::bytes_for(packed_block_shape(model, pass, l, k, kNarrowSourceLimit)));
    };
    std::int64_t largest_staying_first = 0;
    std::int64_t smallest_travelling_second = std::numeric_limits<std::int64_t>::max();
    std::int64_t staying_second = 0;
    for (std::size_t k = 0; k < pass.layer_parts[0].size(); ++k) {
      if (pass.block_stays(0, k)) largest_staying_first = std::max(largest_staying_first, room_bytes(0, k));
    }
    for (std::size_t k = 0; k < pass.layer_parts[1].size(); ++k) {
      if (pass.block_stays(1, k)) {
        ++staying_second;
      } else {
        smallest_travelling_second = std::min(smallest_travelling_second, room_bytes(1, k));
      }
    }
    EXPECT_GT(staying_second, 0);
    EXPECT_LT(smallest_travelling_second, std::numeric_limits<std::int64_t>::max()) << "every block stays";
    EXPECT_LT(largest_staying_first, smallest_travelling_second);
  }
}

// What an epoch of a settled plan moves: rows both ways and the blocks that travel.
std::int64_t epoch_bytes(const EpochPlan& plan) { return plan.h2d_bytes + plan.d2h_bytes + plan.structure_h2d_bytes; }

// Within a budget, each phase's pools grow into the room the forecast leaves that phase: no phase's pool shrinks, no
// phase peaks past the budget, the cache moves no more than with the pools as planned, and somewhere less; the room
// goes first to the pools or to what stays, whichever moves less; and training with the grown pools moves what the
// plan says and equals training in memory.
TEST_P(SubgraphExecutorTest, EachPhasesPoolsGrowIntoTheRoomItLeaves) {
  bool grew = false;
  bool moved_less = false;
  bool orders_differ = false;
  // A graph whose rows the pools do not hold at these budgets.
  const Dataset data = test::random_dataset(4000, 40000, 16, 4, 7);
  for (const ModelKind model_kind : {ModelKind::kGcn, ModelKind::kGat}) {
    const int layers = 2;
    const ModelConfig config = test::training_config(model_kind, layers);
    Model model(config, data.features.cols(), data.num_classes);
    const LocalGraph local = whole_local_graph(data.graph);
    const std::int64_t minimum = minimum_device_budget(model, local);
    for (const std::int64_t budget : {2 * minimum, 3 * minimum}) {
      SCOPED_TRACE(fmt::format("{}, budget {}", to_string(model_kind), budget));
      const auto settled = [&](RoomFirst first) {
        SubgraphExecutorOptions options{budget, ExecutionMode::kReuse, CachePolicy::kStAware};
        options.room_first = first;
        EpochPlan plan = plan_epoch(model, local, options);
        settle_device_memory(model, local, data.features.view(), plan);
        return plan;
      };
      const EpochPlan planned = plan_epoch(model, local, {budget, ExecutionMode::kReuse, CachePolicy::kStAware});
      const Pass& before = planned.passes.front();
      for (const RoomFirst first : {RoomFirst::kStaying, RoomFirst::kPools}) {
        const EpochPlan plan = settled(first);
        const Pass& pass = plan.passes.front();
        // A phase of no steps (GCN's first layer backward, fused into the second's) is never marked.
        const auto& peaks = plan.memory.phase_peak_footprint_bytes;
        ASSERT_GE(peaks.size(), pass.trace.capacity_rows.size() - 1);
        for (std::size_t phase = 0; phase < pass.trace.capacity_rows.size(); ++phase) {
          EXPECT_GE(pass.pool_bytes(phase), before.pool_bytes(phase)) << "phase " << phase;
          EXPECT_LE(phase < peaks.size() ? peaks[phase] : 0, budget / kArenaAlignment * kArenaAlignment)
              << "phase " << phase;
          grew = grew || pass.pool_bytes(phase) > before.pool_bytes(phase);
        }
        EXPECT_LE(pass.cache.total_bytes(), before.cache.total_bytes());
        moved_less = moved_less || pass.cache.total_bytes() < before.cache.total_bytes();
      }
      const std::int64_t staying_first = epoch_bytes(settled(RoomFirst::kStaying));
      const std::int64_t pools_first = epoch_bytes(settled(RoomFirst::kPools));
      EXPECT_EQ(epoch_bytes(settled(RoomFirst::kCheaper)), std::min(staying_first, pools_first));
      orders_differ = orders_differ || staying_first != pools_first;

      if (budget != 2 * minimum) continue;  // training at one budget is enough, and takes the time
      SubgraphExecutorOptions options{budget, ExecutionMode::kReuse, CachePolicy::kStAware};
      options.room_first = RoomFirst::kPools;
      Planned predicted;
      const Trace trace = train_budgeted(kind(), data, config, 2, options, SparseInputs::kOff, &predicted);
      for (const ExecutionMetrics& m : trace.execution) {
        EXPECT_LE(m.peak_device_bytes, budget);
        EXPECT_EQ(m.h2d_bytes, predicted.h2d_bytes);
        EXPECT_EQ(m.d2h_bytes, predicted.d2h_bytes);
      }
      expect_close(trace, train_in_memory(kind(), data, config, 2), 1e-5);
    }
  }
  EXPECT_TRUE(grew) << "no phase's pools grew";
  EXPECT_TRUE(moved_less) << "no grown pools moved less";
  EXPECT_TRUE(orders_differ) << "both orders move the same everywhere";
}

// Within a budget each layer is chained to the next: the next layer transforms each subgraph's outputs as they are
// aggregated, and hands their gradients back to its aggregation backward, so that neither goes to the host and back;
// and in training the backward half may compute the outputs again (from the first layer's sums, or from the
// transformed rows an attention layer's aggregation backward reads: by default on a GPU only), so that they never
// reach the host. Against the same plans
// unchained, and chained without computing outputs again, the streams move by hand what each spares: per chained
// layer, its outputs up for the next transform, and (where it has an aggregation backward) their gradients down and
// up; per layer whose outputs are computed again, the outputs down and up again. The plan moves what it predicts and
// trains as in memory.
TEST_P(SubgraphExecutorTest, ChainedLayersKeepOutputsAndTheirGradientsOffTheHost) {
  // Features narrower than GCN's hidden rows, which its first layer sums before it transforms them.
  const Dataset data = test::random_dataset(3000, 24000, 6, 4, 11);
  const LocalGraph local = whole_local_graph(data.graph);
  for (const ModelKind model_kind : {ModelKind::kGcn, ModelKind::kGat}) {
    for (const int layers : {2, 3}) {
      SCOPED_TRACE(fmt::format("{}, {} layers", to_string(model_kind), layers));
      const ModelConfig config = test::training_config(model_kind, layers);
      const Model model(config, data.features.cols(), data.num_classes);
      SubgraphExecutorOptions options{2 * minimum_device_budget(model, local), ExecutionMode::kReuse,
                                      CachePolicy::kStAware};
      // By default, outputs are computed again on a GPU only.
      const EpochPlan on_cpu = plan_epoch(model, local, options);
      options.library.memory_apart_from_host = true;
      const EpochPlan on_gpu = plan_epoch(model, local, options);
      options.library.memory_apart_from_host = false;
      options.recompute_outputs = RecomputeOutputs::kOn;
      const EpochPlan recomputed = plan_epoch(model, local, options);
      options.recompute_outputs = RecomputeOutputs::kOff;
      const EpochPlan chained = plan_epoch(model, local, options);
      options.chain_layers = false;
      const EpochPlan unchained = plan_epoch(model, local, options);
      const Pass& pass = recomputed.passes.front();
      ASSERT_EQ(pass.chained.size(), static_cast<std::size_t>(layers - 1));
      EXPECT_EQ(pass.first_layer_sums_inputs, model_kind == ModelKind::kGcn);
      EXPECT_TRUE(std::ranges::none_of(unchained.passes.front().chained, [](char c) { return c != 0; }));
      EXPECT_TRUE(std::ranges::none_of(chained.passes.front().outputs_recomputed, [](char c) { return c != 0; }));
      std::int64_t chaining_h2d = 0;
      std::int64_t chaining_d2h = 0;
      std::int64_t recomputing = 0;
      for (int l = 0; l + 1 < layers; ++l) {
        const auto layer = static_cast<std::size_t>(l);
        ASSERT_TRUE(pass.chained_to_next(layer)) << "layer " << l + 1;
        ASSERT_EQ(pass.transform_chunks[layer + 1].size(), pass.layer_parts[layer].size());
        for (std::size_t k = 0; k < pass.layer_parts[layer].size(); ++k) {
          EXPECT_TRUE(std::ranges::equal(pass.transform_chunks[layer + 1][k], pass.destinations(layer, k)));
        }
        // From the first layer's sums, or from the rows an attention layer's aggregation backward reads.
        const bool again = (l == 0 && pass.first_layer_sums_inputs) || model_kind == ModelKind::kGat;
        EXPECT_EQ(pass.output_recomputed(layer), again) << "layer " << l + 1;
        EXPECT_EQ(on_gpu.passes.front().output_recomputed(layer), again) << "layer " << l + 1;
        EXPECT_FALSE(on_cpu.passes.front().output_recomputed(layer)) << "layer " << l + 1;
        const std::int64_t outputs = data.num_vertices() * model.layer(layer).out_dim() * std::int64_t{sizeof(float)};
        chaining_h2d += outputs;
        if (again) recomputing += outputs;
        // A first layer that sums its inputs has no aggregation backward: the next layer's transform backward takes
        // its backward already.
        if (l == 0 && pass.first_layer_sums_inputs) continue;
        chaining_h2d += outputs;
        chaining_d2h += outputs;
      }
      const Pass& before = unchained.passes.front();
      const Pass& between = chained.passes.front();
      EXPECT_EQ(before.stream_h2d_bytes - between.stream_h2d_bytes, chaining_h2d);
      EXPECT_EQ(before.stream_d2h_bytes - between.stream_d2h_bytes, chaining_d2h);
      EXPECT_EQ(between.stream_h2d_bytes - pass.stream_h2d_bytes, recomputing);
      EXPECT_EQ(between.stream_d2h_bytes - pass.stream_d2h_bytes, recomputing);

      options.chain_layers = true;
      options.recompute_outputs = RecomputeOutputs::kOn;
      Planned predicted;
      const Trace trace = train_budgeted(kind(), data, config, 2, options, SparseInputs::kOff, &predicted);
      for (const ExecutionMetrics& m : trace.execution) {
        EXPECT_LE(m.peak_device_bytes, options.device_budget);
        EXPECT_EQ(m.h2d_bytes, predicted.h2d_bytes);
        EXPECT_EQ(m.d2h_bytes, predicted.d2h_bytes);
      }
      expect_close(trace, train_in_memory(kind(), data, config, 2), 1e-5);
    }
  }
}

// Where the loss reads only the training split's logits (SubgraphExecutorOptions::loss_reads), a training pass brings
// only those to the host and only their gradients back: against the same plan told nothing, each way moves the other
// vertices' logit rows fewer, and the loss is handed exactly the training vertices' rows. Training stays as in memory
// and moves what the plan predicts, within a budget, without one, and in the recompute baseline.
TEST_P(SubgraphExecutorTest, LossReadsOnlyTheTrainingSplitsLogits) {
  const Dataset data = test::random_dataset(900, 5400, 12, 5, 23);
  const LocalGraph local = whole_local_graph(data.graph);
  const auto training = static_cast<std::int64_t>(std::ranges::count(data.train_mask, 1));
  ASSERT_GT(training, 0);
  ASSERT_LT(training, data.num_vertices());
  for (const ModelKind model_kind : {ModelKind::kGcn, ModelKind::kGat}) {
    const ModelConfig config = test::training_config(model_kind, 2);
    const Model model(config, data.features.cols(), data.num_classes);
    const std::int64_t logit_row = model.layer(1).out_dim() * std::int64_t{sizeof(float)};
    const std::int64_t minimum = minimum_device_budget(model, local);
    for (const auto& [budget, mode] :
         {std::pair{2 * minimum, ExecutionMode::kReuse}, std::pair{kUnlimited, ExecutionMode::kReuse},
          std::pair{4 * minimum, ExecutionMode::kRecompute}}) {
      SCOPED_TRACE(fmt::format("{}, {} bytes, {}", to_string(model_kind), budget, to_string(mode)));
      SubgraphExecutorOptions options{budget, mode, CachePolicy::kStAware};
      const EpochPlan every_row = plan_epoch(model, local, options);
      options.loss_reads = data.train_mask;
      const EpochPlan read_rows = plan_epoch(model, local, options);
      // The recompute baseline takes the loss of each closure's own destinations, every vertex once.
      const std::int64_t spared = (data.num_vertices() - training) * logit_row;
      EXPECT_EQ(every_row.h2d_bytes - read_rows.h2d_bytes, spared);
      EXPECT_EQ(every_row.d2h_bytes - read_rows.d2h_bytes, spared);

      Planned predicted;
      const Trace trace = train_budgeted(kind(), data, config, 2, options, SparseInputs::kOff, &predicted);
      for (const ExecutionMetrics& m : trace.execution) {
        EXPECT_EQ(m.h2d_bytes, predicted.h2d_bytes);
        EXPECT_EQ(m.d2h_bytes, predicted.d2h_bytes);
      }
      expect_close(trace, train_in_memory(kind(), data, config, 2), 1e-5);

      // The loss sees the training vertices' rows, each once; an evaluation after it brings every logit back.
      Resources resources = test::backend_resources(kind(), budget, 2);
      Model trained(config, data.features.cols(), data.num_classes);
      SubgraphExecutor executor(resources, trained, local, data.features.view(), options);
      std::vector<vid_t> seen;
      executor.train_step(trained, 0, [&](ConstRows logits, const vid_t* vertices, Rows grad) {
        EXPECT_EQ(logits.rows, grad.rows);
        if (logits.rows > 0) {
          EXPECT_NE(vertices, nullptr);
        }
        if (vertices != nullptr) seen.insert(seen.end(), vertices, vertices + logits.rows);
        return 0.0;
      });
      const ConstRows evaluated = executor.evaluate(trained);
      Resources whole = test::backend_resources(kind(), kUnlimited, 2);
      InMemoryExecutor in_memory(whole, trained, local, data.features.view());
      const ConstRows expected_logits = in_memory.evaluate(trained);
      ASSERT_EQ(evaluated.rows, expected_logits.rows);
      for (vid_t v = 0; v < data.num_vertices(); ++v) {
        for (std::int64_t c = 0; c < evaluated.cols; ++c) {
          ASSERT_NEAR(evaluated.row(v)[c], expected_logits.row(v)[c], 1e-4F) << "vertex " << v;
        }
      }
      std::ranges::sort(seen);
      std::vector<vid_t> expected;
      for (vid_t v = 0; v < data.num_vertices(); ++v) {
        if (data.train_mask[static_cast<std::size_t>(v)] != 0) expected.push_back(v);
      }
      EXPECT_EQ(seen, expected);
    }
  }
}

TEST(SubgraphExecutor, RecomputeRatioIsOneUnderReuseAndAboveOneForTheBaseline) {
  const Dataset data = test::grid_dataset(20, 20, 9);
  const Model model(test::training_config(ModelKind::kGcn, 2), data.features.cols(), data.num_classes);
  const std::int64_t budget = 4 * minimum_device_budget(model, whole_local_graph(data.graph));
  const EpochPlan reuse =
      plan_epoch(model, whole_local_graph(data.graph), {budget, ExecutionMode::kReuse, CachePolicy::kStAware});
  const EpochPlan recompute =
      plan_epoch(model, whole_local_graph(data.graph), {budget, ExecutionMode::kRecompute, CachePolicy::kSizeOrder});
  EXPECT_EQ(reuse.rows_computed, reuse.rows_needed);
  EXPECT_GT(recompute.closures.size(), 1U);
  EXPECT_GT(recompute.rows_computed, recompute.rows_needed);
  // Every vertex is a destination of exactly one subgraph in each layer.
  const Pass& pass = reuse.passes.front();
  for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) {
    std::vector<int> seen(static_cast<std::size_t>(data.num_vertices()), 0);
    for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
      for (const vid_t v : pass.destinations(l, k)) ++seen[static_cast<std::size_t>(v)];
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int count) { return count == 1; }));
  }
}

// Destinations of each layer's subgraphs, one subgraph after another.
std::vector<std::vector<vid_t>> cut_destinations(const Pass& pass) {
  std::vector<std::vector<vid_t>> layers(pass.layer_parts.size());
  for (std::size_t l = 0; l < layers.size(); ++l) {
    for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
      const auto dsts = pass.destinations(l, k);
      layers[l].insert(layers[l].end(), dsts.begin(), dsts.end());
    }
  }
  return layers;
}

TEST(SubgraphExecutor, CutInVertexIdsTakesConsecutiveIdsAndBreadthFirstSearchesTheGraph) {
  const Dataset data = test::grid_dataset(20, 20, 9);
  const LocalGraph local = whole_local_graph(data.graph);
  const Model model(test::training_config(ModelKind::kGcn, 2), data.features.cols(), data.num_classes);
  const std::int64_t budget = 4 * minimum_device_budget(model, local);
  std::vector<vid_t> ids(static_cast<std::size_t>(data.num_vertices()));
  std::iota(ids.begin(), ids.end(), vid_t{0});
  const EpochPlan by_id =
      plan_epoch(model, local, {budget, ExecutionMode::kReuse, CachePolicy::kStAware, CutOrder::kVertexIds});
  const EpochPlan breadth_first =
      plan_epoch(model, local, {budget, ExecutionMode::kReuse, CachePolicy::kStAware, CutOrder::kBreadthFirst});
  const auto by_id_cut = cut_destinations(by_id.passes.front());
  const auto breadth_first_cut = cut_destinations(breadth_first.passes.front());
  for (std::size_t l = 0; l < by_id_cut.size(); ++l) {
    SCOPED_TRACE(fmt::format("layer {}", l + 1));
    EXPECT_GT(by_id.passes.front().layer_parts[l].size(), 1U);  // the budget cuts the layer
    EXPECT_EQ(by_id_cut[l], ids);
    // The breadth-first order starts from the grid's lowest-degree vertex and visits every vertex once, not in ids.
    EXPECT_NE(breadth_first_cut[l], ids);
    EXPECT_TRUE(std::is_permutation(breadth_first_cut[l].begin(), breadth_first_cut[l].end(), ids.begin()));
  }
  EXPECT_STREQ(to_string(CutOrder::kVertexIds), "vertex-id");
  EXPECT_STREQ(to_string(CutOrder::kBreadthFirst), "breadth-first");
}

INSTANTIATE_TEST_SUITE_P(Backends, SubgraphExecutorTest, test::all_backends(), test::BackendName());

}  // namespace
}  // namespace nj
