#pragma once
// The memory-managed subgraph executor. Vertex data lives in host memory; each layer runs as steps (a chunk
// of rows transformed, a subgraph aggregated, forward and backward) sized to a device-memory budget, and only
// what a step needs is moved to the device. Two execution modes:
//  - reuse (the paper's embedding reuse): layer by layer, every vertex's rows are computed once per epoch and
//    read by every subgraph that needs them; rows with no reader left are released at once. The epoch's
//    access trace is planned offline by a cache policy (cache_plan.hpp) and replayed. The plan's types and its
//    planner are in epoch_plan.hpp.
//  - recompute (the baseline of a graph-unaware swapping framework running a split full-graph model): each
//    subgraph is pushed through all layers with its whole L-hop in-closure, so shared vertices are recomputed
//    in every subgraph that needs them. A closure too large for the device is paged through it by the same
//    steps and cache policy, so the baseline runs within any budget reuse runs within.
// Both compute exactly the gradients of full-graph training: dropout masks depend only on global ids, and
// gradients of shared rows are summed over the subgraphs that read them.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nj/exec/epoch_plan.hpp"
#include "nj/exec/executor.hpp"
#include "nj/runtime/resources.hpp"

namespace nj {
// Replays one training step of `plan` (an inference plan: one evaluation) on a planning device (planning_device.hpp),
// with kernels that do nothing and a rank detached from its peers: exactly what the run allocates on the device, and
// how the arena places it. The replay runs `model`'s prepare() and finish_backward(), and adds zeros to its gradients
// (planning copies to the host write zeros): the model's values do not change. Of `features`, only the shape is read,
// unless the plan takes them as sparse rows and `sparse_features` (those rows) is null.
MemoryForecast forecast_device_memory(Model& model, const LocalGraph& local, ConstRows features, const EpochPlan& plan,
                                      const SparseRows* sparse_features = nullptr);
// The plan's device memory, forecast into plan.memory. Within a budget reuse's pass then keeps on the device for the
// run, uploaded once, what it would move every epoch and fits where the budget exceeds that peak, the most often
// moved first: a first layer's sums, packed blocks and feature chunks (Pass::sums_stay, blocks_stay, inputs_stay),
// and the forecast is made again with them; plan.structure_h2d_bytes is what the other blocks move an epoch. The
// executor and nj plan both settle their plans so.
void settle_device_memory(Model& model, const LocalGraph& local, ConstRows features, EpochPlan& plan,
                          const SparseRows* sparse_features = nullptr);
// What the packed blocks of a settled budgeted plan would move an epoch if the room its staying blocks take
// (plan.staying_block_bytes) were run under `policy` (kLru or kBelady; room_schedule.hpp) instead of keeping them for
// the run; 0 for a plan that packs no blocks. Beside plan.structure_h2d_bytes, what keeping them moves.
std::int64_t structure_bytes_in_room(const Model& model, const EpochPlan& plan, CachePolicy policy);
// Host bytes the executor holds beside the plan while it runs: where each row is on the device; within a budget, the
// CPU device's cursors for expanding packed blocks; and where steps build their subgraphs' blocks, the builder's
// per-vertex scratch, the largest block, and a copy of the sources of each block that stays on the device for the run
// (`threads`: OpenMP's).
std::int64_t executor_host_bytes(const EpochPlan& plan, std::size_t layers, int threads);
// How many bytes the plan's budget lacks for its forecast peak footprint (0: it fits).
std::int64_t device_memory_shortfall(const EpochPlan& plan);
// "rows 1.2M, graph 300K, ..., alignment and fragmentation 12K": the forecast's peak by category.
std::string describe_forecast(const MemoryForecast& forecast);

// The epoch planned for `model` over `local` with `options` (whose library says what it runs on; its
// inputs are set from `sparse_features`, the features as sparse rows where the first layer takes them so, else null),
// its device memory settled; throws nj::InputError, naming the shortfall, where the budget cannot hold its peak.
EpochPlan settled_plan(Model& model, const LocalGraph& local, ConstRows features, SubgraphExecutorOptions options,
                       const SparseRows* sparse_features = nullptr);

class SubgraphExecutor final : public Executor {
 public:
  // `model` and `features` (the owned vertices' rows) must outlive the executor; `comm` may be null when
  // `local` has no peers.
  // Plans the epoch and forecasts its device memory by replaying one training step on a planning device
  // (which leaves `model`'s values as they were); throws nj::InputError, naming the shortfall, when the
  // device's budget cannot hold it.
  // `inputs` says whether the first layer takes the features as sparse rows (options.inputs is set from it).
  SubgraphExecutor(Resources& resources, Model& model, const LocalGraph& local, ConstRows features,
                   const SubgraphExecutorOptions& options, Communicator* comm = nullptr,
                   SparseInputs inputs = SparseInputs::kOff);
  // Runs a plan settled by settled_plan for these features (`sparse_features` as it was given there).
  SubgraphExecutor(Resources& resources, Model& model, const LocalGraph& local, ConstRows features, EpochPlan settled,
                   std::optional<SparseRows> sparse_features, Communicator* comm = nullptr);
  ~SubgraphExecutor() override;
  ConstRows evaluate(Model& model) override;
  // Layers below the last: of an inference plan (SubgraphExecutorOptions::forward_only) in reuse mode only.
  ConstRows layer_outputs(std::size_t l) override;
  double train_step(Model& model, std::uint32_t epoch, const LossFunction& loss) override;
  ExecutionMetrics take_metrics() override;
  const EpochPlan& plan() const;

 private:
  friend MemoryForecast forecast_device_memory(Model&, const LocalGraph&, ConstRows, const EpochPlan&,
                                               const SparseRows*);
  struct State;
  void start(Resources& resources, Model& model, const LocalGraph& local, ConstRows features, Communicator* comm);
  std::optional<SparseRows> sparse_features_;
  EpochPlan plan_;
  std::unique_ptr<State> state_;
};

}  // namespace nj
