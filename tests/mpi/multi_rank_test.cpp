// Training on P ranks computes the same function as one process: per epoch the loss, and after the last epoch
// every weight gradient, equal a single-process in-memory run within 1e-5 relative (the gradient's in the max
// norm); for GCN and GAT, METIS and random partitions, in-memory and subgraph execution, unlimited and 25 %
// budgets. PyG's reference steps hold on the ranks' shards. The exchange moves exactly mirror rows × the narrower of
// the layer's input and transformed widths × 4 bytes per layer and direction (SAGE's second layer sends its inputs),
// and the subgraph executor's gradients agree with finite differences of the loss, element by element and along one
// direction. ctest runs this binary alone (one rank) and under mpirun with 2, 3 and 4.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <tuple>

#include "mpi/job.hpp"
#include "nj/comm/device_communicator.hpp"
#include "nj/comm/gather.hpp"
#include "nj/exec/exchange_side.hpp"
#include "nj/exec/executor.hpp"
#include "nj/exec/host_footprint.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/io/plain_text.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/partition/partition.hpp"
#include "nj/runtime/rank_communicator.hpp"
#include "nj/train/checkpoint.hpp"
#include "nj/train/loss.hpp"
#include "nj/train/trainer.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"
#include "support/training_reference.hpp"

namespace nj {
namespace {

struct TrainingRun {
  std::vector<double> losses;
  std::vector<std::string> names;  // of the parameters
  std::vector<Matrix> gradients;   // after the last epoch, summed over ranks (what Adam stepped with)
  std::vector<EpochMetrics> epochs;
};

enum class Execution { kInMemory, kReuse };

struct ExecutorSetup {
  Execution execution = Execution::kInMemory;
  std::int64_t budget = kUnlimited;
  CachePolicy policy = CachePolicy::kStAware;
  // The in-memory executor's rows leave from device memory through the device communicator (as nj train runs
  // it), or through host staging over the job's own communicator.
  bool device_exchange = true;
  SparseInputs inputs = SparseInputs::kOff;  // whether the first layer takes the features as sparse rows
};

ModelConfig model_config(ModelKind kind, int hidden = 6) {
  ModelConfig c;
  c.kind = kind;
  c.layers = 2;
  c.hidden = hidden;
  c.heads = 2;
  c.dropout = 0.4F;
  c.attention_dropout = 0.3F;
  c.gin_eps = 0.2F;
  c.propagation_steps = 3;
  c.activation = default_activation(kind);
  c.seed = 11;
  return c;
}

std::unique_ptr<Executor> make_executor(Resources& resources, Model& model, const Shard& shard,
                                        const ExecutorSetup& setup, Communicator& comm) {
  if (setup.execution == Execution::kInMemory) {
    return std::make_unique<InMemoryExecutor>(resources, model, shard.local, shard.features.view(), &comm,
                                              setup.inputs);
  }
  return std::make_unique<SubgraphExecutor>(resources, model, shard.local, shard.features.view(),
                                            SubgraphExecutorOptions{setup.budget, ExecutionMode::kReuse, setup.policy},
                                            &comm, setup.inputs);
}

// Trains `epochs` epochs on a backend, evaluating every eval_every (0: never).
TrainingRun train(DeviceKind kind, const Shard& shard, const ModelConfig& config, const ExecutorSetup& setup,
                  Communicator& job, std::uint32_t epochs = 3, std::uint32_t eval_every = 0) {
  Resources resources =
      test::backend_resources(kind, setup.execution == Execution::kInMemory ? kUnlimited : setup.budget, 1, &job);
  const auto device_comm = setup.device_exchange ? make_rank_communicator(job, resources) : nullptr;
  Communicator& comm = device_comm ? *device_comm : job;
  Model model(config, shard.features.cols(), shard.num_classes);
  auto executor = make_executor(resources, model, shard, setup, comm);
  TrainOptions options;
  options.epochs = epochs;
  options.eval_every = eval_every;
  Trainer trainer(model, *executor, comm, targets_of(shard), options);
  TrainingRun run;
  trainer.fit([&](const EpochMetrics& m) {
    run.losses.push_back(m.loss);
    run.epochs.push_back(m);
  });
  for (const Parameter* p : model.parameters()) {
    run.names.push_back(p->name);
    run.gradients.push_back(p->grad);
  }
  return run;
}

// Each rank's part of `data` under a partition into as many parts as the job has ranks.
Shard rank_shard(const Dataset& data, PartitionMethod method, Communicator& comm) {
  PartitionOptions options;
  options.method = method;
  options.parts = comm.size();
  options.seed = 4;
  PartitionInfo info;
  const auto part_of = assign_parts(data, options, info);
  return make_shard(data, part_of, comm.rank(), info);
}

void expect_same_function(const TrainingRun& reference, const TrainingRun& run) {
  ASSERT_EQ(reference.losses.size(), run.losses.size());
  for (std::size_t e = 0; e < run.losses.size(); ++e) {
    EXPECT_NEAR(run.losses[e], reference.losses[e], 1e-5 * std::abs(reference.losses[e])) << "epoch " << e + 1;
  }
  ASSERT_EQ(reference.gradients.size(), run.gradients.size());
  for (std::size_t p = 0; p < run.gradients.size(); ++p) {
    const std::span<const float> expected = reference.gradients[p].span();
    const std::span<const float> actual = run.gradients[p].span();
    float largest = 0.0F;
    for (const float g : expected) largest = std::max(largest, std::abs(g));
    ASSERT_GT(largest, 0.0F) << run.names[p] << " has no gradient";
    // Relative in the max norm of the parameter's gradient: sums in another order differ by rounding relative
    // to their terms, not to an element's (possibly cancelled) total. A bias gradient is a column sum of
    // ∂L/∂Y over all vertices whose terms cancel by an order of magnitude (the output layer's sums softmax
    // minus one-hot), so the rounding of the logits shows there ten times larger.
    const bool bias = run.names[p].ends_with(".bias");
    const double tolerance = (bias ? 1e-4 : 1e-5) * largest;
    for (std::size_t k = 0; k < expected.size(); ++k) {
      EXPECT_NEAR(actual[k], expected[k], tolerance) << run.names[p] << " element " << k;
    }
  }
}

// Every rank skips alike where there is no GPU: none waits for another.
template <typename Param>
class OnBackend : public ::testing::TestWithParam<Param> {
 protected:
  static DeviceKind kind_of(DeviceKind kind) { return kind; }
  template <typename... Others>
  static DeviceKind kind_of(const std::tuple<DeviceKind, Others...>& param) {
    return std::get<0>(param);
  }
  DeviceKind kind() const { return kind_of(this->GetParam()); }
  void SetUp() override { NJ_SKIP_WITHOUT_BACKEND(kind()); }
};

// A model of the multi-rank suites. On their 12 features GCN's first layer transforms first at hidden 6 and sums
// its inputs first at hidden 8 (aggregates_before_transform), where the exchange carries the dropped inputs
// forward and no gradients of them backward.
struct MultiRankModel {
  const char* name;
  ModelKind kind;
  int hidden;
};

class MultiRank : public OnBackend<std::tuple<DeviceKind, MultiRankModel>> {
 protected:
  ModelConfig run_config() const {
    const MultiRankModel& m = std::get<1>(GetParam());
    return model_config(m.kind, m.hidden);
  }
  static Dataset dataset() { return test::random_dataset(400, 2400, 12, 4, 9); }
};

TEST_P(MultiRank, TrainingEqualsOneProcessForEveryPartitionAndExecutor) {
  Communicator& comm = test::job();
  const Dataset data = dataset();
  const ModelConfig config = run_config();
  auto single = make_single_process_communicator();
  const TrainingRun reference = train(kind(), whole_graph_shard(data), config, {}, *single);

  for (const PartitionMethod method : {PartitionMethod::kMetis, PartitionMethod::kRandom}) {
    const Shard shard = rank_shard(data, method, comm);
    const TrainingRun unlimited = train(kind(), shard, config, {Execution::kReuse}, comm);
    // A quarter of this rank's unlimited peak, or the least the rank's graph runs in where that is more.
    const std::int64_t peak = unlimited.epochs.front().execution.peak_device_bytes;
    const Model model(config, shard.features.cols(), shard.num_classes);
    const std::int64_t quarter = std::max(peak / 4, minimum_device_budget(model, shard.local));
    const ExecutorSetup setups[] = {{Execution::kInMemory},
                                    {.execution = Execution::kInMemory, .device_exchange = false},
                                    {Execution::kReuse, quarter, CachePolicy::kStAware},
                                    {Execution::kReuse, quarter, CachePolicy::kLru},
                                    {Execution::kReuse, quarter, CachePolicy::kSizeOrder},
                                    {Execution::kReuse, quarter, CachePolicy::kBelady}};
    {
      SCOPED_TRACE(fmt::format("{} partition, reuse, unlimited budget", to_string(method)));
      expect_same_function(reference, unlimited);
    }
    for (const ExecutorSetup& setup : setups) {
      SCOPED_TRACE(fmt::format("{} partition, {} at {} bytes ({})", to_string(method),
                               setup.execution == Execution::kInMemory ? "in-memory" : "reuse", setup.budget,
                               to_string(setup.policy)));
      SCOPED_TRACE(setup.device_exchange ? "rows exchanged from device memory" : "rows exchanged from host memory");
      const TrainingRun run = train(kind(), shard, config, setup, comm);
      expect_same_function(reference, run);
      for (const EpochMetrics& m : run.epochs) EXPECT_LE(m.execution.peak_device_bytes, setup.budget);
    }
  }
}

TEST_P(MultiRank, ExchangeMovesMirrorRowsTimesRowWidth) {
  Communicator& comm = test::job();
  const Dataset data = dataset();
  const ModelConfig config = run_config();
  const Shard shard = rank_shard(data, PartitionMethod::kMetis, comm);
  const Model model(config, shard.features.cols(), shard.num_classes);
  std::int64_t sent_rows = 0;
  for (const PeerRows& p : shard.local.peers) sent_rows += static_cast<std::int64_t>(p.send.size());
  std::vector<std::int64_t> mirrors = {shard.local.num_mirrors()};
  comm.all_reduce_sum(mirrors);
  if (comm.size() > 1) {
    EXPECT_GT(mirrors[0], 0);
  }

  for (const ExecutorSetup& setup : {ExecutorSetup{Execution::kInMemory}, ExecutorSetup{Execution::kReuse}}) {
    const TrainingRun run = train(kind(), shard, config, setup, comm, 2);
    for (const EpochMetrics& m : run.epochs) {
      ASSERT_EQ(m.execution.exchange.size(), model.num_layers());
      ASSERT_EQ(m.exchange.size(), model.num_layers());
      for (std::size_t l = 0; l < model.num_layers(); ++l) {
        // Both runs are without a budget: a first layer that sums its inputs sends them, and no gradients. A later
        // layer that reads its neighbours sends the narrower of its inputs and its transformed rows, both ways.
        const Layer& layer = model.layer(l);
        const bool sums_inputs = aggregates_before_transform(layer, l, false);
        const std::int64_t width = exchanged_width(model, l, sums_inputs);
        if (l > 0 && layer.aggregation().reads_neighbours) {
          EXPECT_EQ(width, std::min(layer.in_dim(), layer.row_width())) << "layer " << l + 1;
        }
        const std::int64_t row_bytes = width * static_cast<std::int64_t>(sizeof(float));
        const std::int64_t gradient_row_bytes = sums_inputs ? 0 : row_bytes;
        const auto& forward = m.execution.exchange[l][0];
        const auto& backward = m.execution.exchange[l][1];
        // This rank: forward it sends its boundary rows to each peer that mirrors them and receives its mirrors;
        // backward the reverse.
        EXPECT_EQ(forward.bytes_sent, sent_rows * row_bytes) << "layer " << l + 1;
        EXPECT_EQ(forward.bytes_received, shard.local.num_mirrors() * row_bytes) << "layer " << l + 1;
        EXPECT_EQ(backward.bytes_sent, shard.local.num_mirrors() * gradient_row_bytes) << "layer " << l + 1;
        EXPECT_EQ(backward.bytes_received, sent_rows * gradient_row_bytes) << "layer " << l + 1;
        // The job: every mirror row crosses once per layer and direction (that runs), and the metrics say so.
        for (const std::size_t direction : {0U, 1U}) {
          const ExchangeSummary& summary = m.exchange[l][direction];
          const std::int64_t bytes = direction == 0 ? row_bytes : gradient_row_bytes;
          EXPECT_EQ(summary.bytes_sent, mirrors[0] * bytes) << "layer " << l + 1;
          EXPECT_EQ(summary.bytes_received, mirrors[0] * bytes) << "layer " << l + 1;
          EXPECT_EQ(summary.rows_sent, bytes > 0 ? mirrors[0] : 0) << "layer " << l + 1;
        }
      }
    }
  }
}

// The last rank's contiguous part shares no edge with the others: it has no peers while they have, so it reaches
// its first sum over the ranks without an exchange before it. The device communicator is connected when it is
// made, where every rank arrives alike, so training still meets the others and equals one process.
TEST_P(MultiRank, ARankWithoutPeersTrainsWithTheOthers) {
  Communicator& comm = test::job();
  Dataset data = dataset();
  const vid_t n = data.num_vertices();
  const auto last_part = [&](vid_t v) { return static_cast<std::int64_t>(v) * comm.size() / n == comm.size() - 1; };
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
  for (vid_t v = 0; v < n; ++v) {
    for (eid_t e = data.graph.offsets[v]; e < data.graph.offsets[v + 1]; ++e) {
      const vid_t u = data.graph.sources[static_cast<std::size_t>(e)];
      if (last_part(u) != last_part(v)) continue;
      src.push_back(u);
      dst.push_back(v);
    }
  }
  data.graph = build_csr(n, src, dst);
  const ModelConfig config = run_config();
  auto single = make_single_process_communicator();
  const TrainingRun reference = train(kind(), whole_graph_shard(data), config, {}, *single);
  const Shard shard = rank_shard(data, PartitionMethod::kContiguous, comm);
  if (comm.rank() == comm.size() - 1) {
    EXPECT_TRUE(shard.local.peers.empty());
  }
  for (const Execution execution : {Execution::kInMemory, Execution::kReuse}) {
    SCOPED_TRACE(execution == Execution::kInMemory ? "in-memory" : "reuse");
    expect_same_function(reference, train(kind(), shard, config, {execution}, comm));
  }
}

TEST_P(MultiRank, EveryRankMovesThePlannedBytes) {
  Communicator& comm = test::job();
  const Dataset data = dataset();
  const ModelConfig config = run_config();
  const Shard shard = rank_shard(data, PartitionMethod::kMetis, comm);
  Model model(config, shard.features.cols(), shard.num_classes);
  const std::int64_t minimum = minimum_device_budget(model, shard.local);
  for (const std::int64_t budget : {kUnlimited, 3 * minimum}) {
    SCOPED_TRACE(fmt::format("budget {}", budget));
    Resources resources = test::backend_resources(kind(), budget, 1);
    SubgraphExecutor executor(resources, model, shard.local, shard.features.view(),
                              {budget, ExecutionMode::kReuse, CachePolicy::kStAware}, &comm);
    TrainOptions options;
    options.epochs = 2;
    options.eval_every = 0;
    Trainer trainer(model, executor, comm, targets_of(shard), options);
    const EpochPlan& plan = executor.plan();
    trainer.fit([&](const EpochMetrics& m) {
      EXPECT_EQ(m.execution.h2d_bytes, plan.h2d_bytes);
      EXPECT_EQ(m.execution.d2h_bytes, plan.d2h_bytes);
      EXPECT_LE(m.execution.peak_device_bytes, plan.peak_bytes_bound);
      EXPECT_LE(m.execution.peak_device_bytes, budget);
    });
  }
}

// Global ids beyond 2^32, spread out and in no order (test::spread_id), on shards written to a file and read back:
// with dropout, P ranks train what one process trains on the whole graph under the same ids (the masks follow the
// ids); without dropout, what one process trains under the dataset's own ids 0..n-1. In memory and within a
// quarter of the unlimited peak; GAT's attention dropout addresses edges by both ends' ids.
class MultiRankSpreadIds : public OnBackend<std::tuple<DeviceKind, ModelKind>> {};
TEST_P(MultiRankSpreadIds, TrainWhatSmallIdsTrain) {
  const auto [backend, model_kind] = GetParam();
  Communicator& comm = test::job();
  const Dataset data = test::random_dataset(400, 2400, 12, 4, 9);
  const auto spread = [](Shard shard) {
    for (gid_t& id : shard.local.global_id) id = test::spread_id(id);
    return shard;
  };
  const test::TempDir dir;
  write_shard(dir.file("part.h5"), spread(rank_shard(data, PartitionMethod::kMetis, comm)));
  const Shard shard = read_shard(dir.file("part.h5"));
  ASSERT_GT(*std::ranges::max_element(shard.local.global_id), gid_t{1} << 32);

  ModelConfig with_dropout = model_config(model_kind);
  ModelConfig without_dropout = with_dropout;
  without_dropout.dropout = 0.0F;
  without_dropout.attention_dropout = 0.0F;
  auto single = make_single_process_communicator();
  const TrainingRun unlimited = train(backend, shard, with_dropout, {Execution::kReuse}, comm);
  const Model model(with_dropout, shard.features.cols(), shard.num_classes);
  const std::int64_t quarter =
      std::max(unlimited.epochs.front().execution.peak_device_bytes / 4, minimum_device_budget(model, shard.local));
  for (const auto& [config, reference_shard, name] :
       {std::tuple{with_dropout, spread(whole_graph_shard(data)), "with dropout, against the same ids"},
        std::tuple{without_dropout, whole_graph_shard(data), "without dropout, against ids 0..n-1"}}) {
    SCOPED_TRACE(name);
    const TrainingRun reference = train(backend, reference_shard, config, {}, *single);
    expect_same_function(reference, train(backend, shard, config, {Execution::kInMemory}, comm));
    expect_same_function(reference,
                         train(backend, shard, config, {Execution::kReuse, quarter, CachePolicy::kStAware}, comm));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, MultiRank,
                         ::testing::Combine(test::all_backends(),
                                            ::testing::Values(MultiRankModel{"gcn", ModelKind::kGcn, 6},
                                                              MultiRankModel{"gcn_sums_inputs", ModelKind::kGcn, 8},
                                                              MultiRankModel{"gat", ModelKind::kGat, 6},
                                                              MultiRankModel{"sage", ModelKind::kSage, 6},
                                                              MultiRankModel{"gin", ModelKind::kGin, 6},
                                                              MultiRankModel{"appnp", ModelKind::kAppnp, 6})),
                         [](const auto& test_info) {
                           return test::backend_name(std::get<0>(test_info.param)) + "_" +
                                  std::get<1>(test_info.param).name;
                         });

// The subgraph executor's backward, within a budget that splits every layer into several steps, against
// central finite differences of the job's loss, on however many ranks the job has.
struct GradientCase {
  const char* name;
  ModelKind kind;
  std::uint64_t seed;
};

class SubgraphExecutorGradients : public OnBackend<std::tuple<DeviceKind, GradientCase>> {
 protected:
  const GradientCase& gradient_case() const { return std::get<1>(GetParam()); }
};

TEST_P(SubgraphExecutorGradients, MatchFiniteDifferences) {
  Communicator& comm = test::job();
  const Dataset data = test::random_dataset(40, 120, 5, 3, 21);
  ModelConfig config = model_config(gradient_case().kind);
  config.hidden = 3;
  config.activation = Activation::kElu;  // smooth, so that finite differences see no kinks
  config.seed = gradient_case().seed;
  config.gin_train_eps = true;  // ε's gradient summed over the ranks (MultiRank trains GIN with ε fixed)
  const Shard shard = rank_shard(data, PartitionMethod::kMetis, comm);
  Model model(config, shard.features.cols(), shard.num_classes);
  const std::int64_t budget = 2 * minimum_device_budget(model, shard.local);
  Resources resources = test::backend_resources(kind(), budget, 1);
  SubgraphExecutor executor(resources, model, shard.local, shard.features.view(),
                            {budget, ExecutionMode::kReuse, CachePolicy::kStAware}, &comm);
  const auto train_count = static_cast<float>(shard.global_train);
  const std::uint32_t epoch = 2;
  const LossFunction loss_function = [&](ConstRows logits, const vid_t* vertices, Rows grad) {
    EXPECT_EQ(vertices, nullptr);
    return masked_softmax_cross_entropy(logits, shard.labels.data(), shard.train_mask.data(), 1.0F / train_count, grad);
  };
  auto loss = [&] {
    std::vector<double> total = {executor.train_step(model, epoch, loss_function)};
    comm.all_reduce_sum(total);
    return total[0] / train_count;
  };
  for (Parameter* p : model.parameters()) p->grad.fill(0.0F);
  loss();
  // The step's gradients, already summed over the ranks (Executor::train_step).
  std::vector<Matrix> analytic;
  for (Parameter* p : model.parameters()) analytic.push_back(p->grad);

  test::expect_gradients_match_finite_differences(model, analytic, loss);
  test::expect_directional_derivative(model, analytic, loss);
}

// GAT's seed is one whose step along the directional check's direction crosses no LeakyReLU kink: a step that does
// changes the derivative on one side by up to a quarter (so do some seeds), while with a linear attention
// activation every seed passes.
INSTANTIATE_TEST_SUITE_P(Models, SubgraphExecutorGradients,
                         ::testing::Combine(test::all_backends(),
                                            ::testing::Values(GradientCase{"gcn", ModelKind::kGcn, 3},
                                                              GradientCase{"gat", ModelKind::kGat, 7},
                                                              GradientCase{"sage", ModelKind::kSage, 3},
                                                              GradientCase{"gin", ModelKind::kGin, 3},
                                                              GradientCase{"appnp", ModelKind::kAppnp, 3})),
                         [](const auto& test_info) {
                           return test::backend_name(std::get<0>(test_info.param)) + "_" +
                                  std::get<1>(test_info.param).name;
                         });

// A directed graph cut into blocks of consecutive ids: every in-edge comes from a lower id, so the first rank
// has no mirror (it only sends) and the last sends nothing (it only receives). Evaluating after every epoch
// runs forward-only passes between the training steps.
using MultiRankDirected = OnBackend<DeviceKind>;
TEST_P(MultiRankDirected, SendOnlyAndReceiveOnlyRanksEqualOneProcess) {
  Communicator& comm = test::job();
  Dataset data = test::random_dataset(200, 0, 6, 3, 5);
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
  for (vid_t v = 0; v < data.num_vertices(); ++v) {
    for (const vid_t step : {1, 7}) {
      if (v + step < data.num_vertices()) src.push_back(v), dst.push_back(v + step);
    }
  }
  data.graph = build_csr(data.num_vertices(), src, dst);
  const ModelConfig config = model_config(ModelKind::kGcn);
  auto single = make_single_process_communicator();
  const TrainingRun reference = train(kind(), whole_graph_shard(data), config, {}, *single, 3, 1);
  const Shard shard = rank_shard(data, PartitionMethod::kContiguous, comm);
  if (comm.size() > 1) {
    EXPECT_EQ(shard.local.num_mirrors() == 0, comm.rank() == 0);
  }
  const Model model(config, shard.features.cols(), shard.num_classes);
  const std::int64_t budget = 3 * minimum_device_budget(model, shard.local);
  for (const ExecutorSetup& setup : {ExecutorSetup{Execution::kInMemory}, ExecutorSetup{Execution::kReuse},
                                     ExecutorSetup{Execution::kReuse, budget, CachePolicy::kStAware}}) {
    SCOPED_TRACE(
        fmt::format("{} at {} bytes", setup.execution == Execution::kInMemory ? "in-memory" : "reuse", setup.budget));
    const TrainingRun run = train(kind(), shard, config, setup, comm, 3, 1);
    expect_same_function(reference, run);
    for (std::size_t e = 0; e < run.epochs.size(); ++e) {
      EXPECT_EQ(run.epochs[e].accuracy.val, reference.epochs[e].accuracy.val) << "epoch " << e + 1;
    }
  }
}

// A real graph: GCN on Cora over METIS shards, in memory and within a quarter of each rank's unlimited peak.
using MultiRankCora = OnBackend<DeviceKind>;
TEST_P(MultiRankCora, GcnEqualsOneProcess) {
  NJ_SKIP_WITHOUT_DATA();
  Communicator& comm = test::job();
  Dataset data = read_plain_folder((test::data_dir() / "cora").string(), ConvertOptions{});
  row_normalize(data.features);
  const ModelConfig config = model_config(ModelKind::kGcn);
  auto single = make_single_process_communicator();
  const TrainingRun reference = train(kind(), whole_graph_shard(data), config, {}, *single);
  const Shard shard = rank_shard(data, PartitionMethod::kMetis, comm);
  const TrainingRun unlimited = train(kind(), shard, config, {Execution::kReuse}, comm);
  const std::int64_t quarter = unlimited.epochs.front().execution.peak_device_bytes / 4;
  expect_same_function(reference, unlimited);
  expect_same_function(reference, train(kind(), shard, config, {Execution::kInMemory}, comm));
  expect_same_function(reference,
                       train(kind(), shard, config, {Execution::kReuse, quarter, CachePolicy::kStAware}, comm));
  // Its bag-of-words features multiplied as sparse rows on every rank: the same function as dense rows on one.
  const SparseInputs sparse = SparseInputs::kOn;
  SCOPED_TRACE("sparse inputs");
  expect_same_function(reference, train(kind(), shard, config, {.inputs = sparse}, comm));
  const TrainingRun sparse_unlimited =
      train(kind(), shard, config, {.execution = Execution::kReuse, .inputs = sparse}, comm);
  expect_same_function(reference, sparse_unlimited);
  const Model model(config, shard.features.cols(), shard.num_classes);
  const std::int64_t sparse_quarter = std::max(
      sparse_unlimited.epochs.front().execution.peak_device_bytes / 4,
      minimum_device_budget(model, shard.local, {}, false, input_shape(sparse_inputs(sparse, shard.features.view()))));
  EXPECT_LT(sparse_quarter, quarter);
  expect_same_function(
      reference,
      train(kind(), shard, config, {.execution = Execution::kReuse, .budget = sparse_quarter, .inputs = sparse}, comm));
}

// PyG's three Adam steps (tests/fixtures/training_reference.h5) on the job's METIS shards: each step's loss,
// every gradient summed over the ranks and every parameter after Adam, in memory, and subgraph by subgraph
// without a budget and within a quarter of that run's peak.
class MultiRankReference : public OnBackend<std::tuple<DeviceKind, ModelKind, WeightDecayScope>> {};
TEST_P(MultiRankReference, StepsMatchPyG) {
  const auto [backend, model_kind, scope] = GetParam();
  Communicator& comm = test::job();
  const test::TrainingReference reference(model_kind, scope);
  const Shard shard = rank_shard(reference.dataset(), PartitionMethod::kMetis, comm);
  std::int64_t unlimited_peak = 0;
  const auto steps = [&](const ExecutorSetup& setup) {
    Resources resources = test::backend_resources(backend, setup.budget, 1, &comm);
    const auto device_comm = make_rank_communicator(comm, resources);
    Communicator& rank_comm = device_comm ? *device_comm : comm;
    Model model(reference.model_config(), shard.features.cols(), shard.num_classes);
    reference.load_initial_weights(model);
    auto executor = make_executor(resources, model, shard, setup, rank_comm);
    const TrainOptions options = reference.train_options();
    Trainer trainer(model, *executor, rank_comm, targets_of(shard), options);
    std::uint32_t steps_checked = 0;
    trainer.fit([&](const EpochMetrics& m) {
      reference.expect_step(m, model);
      EXPECT_LE(m.execution.peak_device_bytes, setup.budget);
      if (setup.execution == Execution::kReuse && setup.budget == kUnlimited) {
        unlimited_peak = std::max(unlimited_peak, m.execution.peak_device_bytes);
      }
      ++steps_checked;
    });
    EXPECT_EQ(steps_checked, options.epochs);
  };
  {
    SCOPED_TRACE("in-memory");
    steps({Execution::kInMemory});
  }
  {
    SCOPED_TRACE("reuse, unlimited budget");
    steps({Execution::kReuse});
  }
  const Model model(reference.model_config(), shard.features.cols(), shard.num_classes);
  const std::int64_t quarter = std::max(unlimited_peak / 4, minimum_device_budget(model, shard.local));
  SCOPED_TRACE(fmt::format("reuse at {} bytes", quarter));
  steps({Execution::kReuse, quarter, CachePolicy::kStAware});
}

INSTANTIATE_TEST_SUITE_P(PyG, MultiRankReference,
                         ::testing::Combine(test::all_backends(), ::testing::Values(ModelKind::kGcn, ModelKind::kGat),
                                            ::testing::Values(WeightDecayScope::kAll, WeightDecayScope::kFirstLayer)),
                         [](const auto& test_info) {
                           return fmt::format("{}_{}_decay_{}", test::backend_name(std::get<0>(test_info.param)),
                                              to_string(std::get<1>(test_info.param)),
                                              test::decay_scope_name(std::get<2>(test_info.param)));
                         });

INSTANTIATE_TEST_SUITE_P(Backends, MultiRankDirected, test::all_backends(), test::BackendName());
INSTANTIATE_TEST_SUITE_P(Backends, MultiRankCora, test::all_backends(), test::BackendName());
INSTANTIATE_TEST_SUITE_P(Models, MultiRankSpreadIds,
                         ::testing::Combine(test::all_backends(), ::testing::Values(ModelKind::kGcn, ModelKind::kGat)),
                         [](const auto& test_info) {
                           return fmt::format("{}_{}", test::backend_name(std::get<0>(test_info.param)),
                                              to_string(std::get<1>(test_info.param)));
                         });

// Every rank computes the identity of the graph that one process computes (what a checkpoint records): its edges'
// hash is in global ids, whatever the partition and the vertex order.
TEST(GraphIdentityOverRanks, IsOneProcesses) {
  Communicator& comm = test::job();
  const Dataset data = test::random_dataset(200, 1200, 4, 3, 6);
  const GraphIdentity whole = identify_graph(whole_graph_shard(Dataset(data)), *make_single_process_communicator());
  for (const PartitionMethod method : {PartitionMethod::kMetis, PartitionMethod::kRandom}) {
    Shard shard = rank_shard(data, method, comm);
    order_vertices(shard, VertexOrder::kCommunity);
    EXPECT_EQ(identify_graph(shard, comm), whole) << to_string(method);
  }
}

// Ranks whose features differ in density decide alike whether the first layer takes them as sparse rows: by the
// whole graph's density, and dense where any rank's file stores them dense.
TEST(SparseInputsChoice, EveryRankDecidesByTheWholeGraph) {
  Communicator& comm = test::job();
  // Rank r holds 40 rows of 32 entries with 1 + 2r non-zero entries a row: one in 16 over two ranks (1 + 3 of 32
  // in every two rows), denser beyond.
  const auto nonzero = [](int rank) { return 1 + 2 * rank; };
  Matrix features(40, 32, 0.0F);
  for (std::int64_t r = 0; r < features.rows(); ++r) {
    for (std::int64_t c = 0; c < nonzero(comm.rank()); ++c) features(r, c) = 1.0F;
  }
  std::int64_t total = 0;
  for (int rank = 0; rank < comm.size(); ++rank) total += nonzero(rank);
  const bool sparse_enough = total * kSparseInputsDensity <= std::int64_t{32} * comm.size();
  EXPECT_EQ(takes_sparse_inputs(SparseInputs::kAuto, features.view(), true, &comm), sparse_enough);
  // One rank stored dense makes every rank dense.
  EXPECT_FALSE(takes_sparse_inputs(SparseInputs::kAuto, features.view(), comm.rank() != comm.size() - 1, &comm));
  EXPECT_TRUE(takes_sparse_inputs(SparseInputs::kOn, features.view(), false, &comm));
}

// Every rank's rows reach rank 0, whole or in pieces of any size, with some ranks owning none; their ids are beyond
// 32 bits, spread out and in no order, and the root gets every row once, in ascending order of id.
TEST(GatherRows, EveryRowReachesTheRootInOrderOfItsId) {
  Communicator& comm = test::job();
  const std::int64_t total = 101;
  const std::int64_t cols = 3;
  for (const std::size_t piece : {kGatherPieceFloats, std::size_t{1}, std::size_t{7}}) {
    SCOPED_TRACE(piece);
    // Rank r owns the vertices congruent to r modulo the ranks, in descending order; the last rank owns none of
    // them when there are several (rank 0 takes its share).
    const int owners = comm.size() > 1 ? comm.size() - 1 : 1;
    std::vector<gid_t> ids;
    for (std::int64_t v = total - 1; v >= 0; --v) {
      if (v % owners == comm.rank()) ids.push_back(test::spread_id(v));
    }
    Matrix rows(static_cast<std::int64_t>(ids.size()), cols);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      for (std::int64_t c = 0; c < cols; ++c) {
        // The row names its id: its low 20 bits, and its high word, each exact in a float.
        const auto id = static_cast<std::uint64_t>(ids[i]);
        rows.view().row(static_cast<std::int64_t>(i))[c] =
            static_cast<float>(c == 0 ? id & 0xFFFFFU : (id >> 32U) + static_cast<std::uint64_t>(c));
      }
    }
    const GatheredRows gathered = gather_rows(comm, ids, rows.view(), total, 0, piece);
    if (comm.rank() != 0) {
      EXPECT_EQ(gathered.rows.rows(), 0);
      continue;
    }
    std::vector<gid_t> expected;
    for (std::int64_t v = 0; v < total; ++v) expected.push_back(test::spread_id(v));
    std::ranges::sort(expected);
    ASSERT_EQ(gathered.ids, expected);
    ASSERT_EQ(gathered.rows.rows(), total);
    for (std::int64_t r = 0; r < total; ++r) {
      const auto id = static_cast<std::uint64_t>(expected[static_cast<std::size_t>(r)]);
      ASSERT_EQ(gathered.rows.view().row(r)[0], static_cast<float>(id & 0xFFFFFU)) << "row " << r;
      for (std::int64_t c = 1; c < cols; ++c) {
        ASSERT_EQ(gathered.rows.view().row(r)[c], static_cast<float>((id >> 32U) + static_cast<std::uint64_t>(c)));
      }
    }
  }
}

}  // namespace
}  // namespace nj
