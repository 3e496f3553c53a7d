#pragma once
// What a command that runs a model on a rank's part of a graph sets up before its first step (nj train, nj plan,
// and the commands to come): where the data comes from and how the rank's part is loaded and numbered, and which
// executor runs the model over it. The device and its communicator come from nj/runtime.
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "nj/comm/communicator.hpp"
#include "nj/exec/exchange_side.hpp"
#include "nj/exec/executor.hpp"
#include "nj/exec/host_footprint.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "nj/graph/shard.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/model/model.hpp"
#include "nj/partition/partition.hpp"
#include "nj/runtime/resources.hpp"

namespace nj {

// Which executor runs the model, and how a rank numbers its vertices.
struct ExecutorChoice {
  bool in_memory = false;  // the in-memory executor; else the subgraph executor with `options`
  bool automatic = false;  // chosen because no budget was given (--execution auto)
  SubgraphExecutorOptions options;
  VertexOrder vertex_order = VertexOrder::kCommunity;
  SparseInputs sparse_inputs = SparseInputs::kAuto;  // whether the first layer takes the features as sparse rows
};

// Where a rank's data comes from: a dataset file, or a partition folder with one shard per rank.
struct DataSource {
  std::string dataset;
  std::string partitions;
  // How several ranks over a dataset file partition it: scotch and contiguous in parallel, each rank reading a slice
  // of the file (nj/partition/parallel.hpp); metis and random in memory, each rank reading the whole file and
  // computing the same partition.
  PartitionMethod partition_method = PartitionMethod::kScotch;
  bool normalize_rows = false;  // divide each feature row by its sum
};

// The part of the graph this rank runs on: its shard of the partition folder, its part of the dataset partitioned
// in parallel or in memory, or, on one rank, the whole dataset; numbered in `order` and its features normalised as
// `source` asks. Logs what was loaded and how long it took.
Shard load_rank_shard(const DataSource& source, VertexOrder order, Communicator& comm);

// A rank's run, planned before anything of it is allocated: what nj plan reports, and what nj train checks against
// the host memory it may use and then runs. Its device figures are counted, not estimated: a training step (an
// inference plan: one evaluation) replayed on a planning device with the executor's own code.
// Bytes a rank sends its peers per epoch for layer l: forward, its boundary rows of what the layer exchanges; backward,
// its mirrors' gradients of them (none for a first layer that sums its inputs, nor in an inference plan). What
// ExchangeStats counts as sent.
struct ExchangeForecast {
  ExchangeSide side = ExchangeSide::kTransformedRows;
  std::int64_t row_width = 0;  // floats
  std::int64_t forward_bytes = 0;
  std::int64_t backward_bytes = 0;
};

struct PlannedRun {
  std::optional<SparseRows> sparse_inputs;  // the first layer's inputs as sparse rows, where it takes them so
  std::optional<EpochPlan> plan;            // the subgraph executor's, settled; none for the in-memory executor
  MemoryForecast device;                    // the device's peak, and what an epoch copies each way
  std::int64_t plan_host_bytes = 0;         // what the plan's structures hold, measured on the heap while planning
  std::int64_t executor_host_bytes = 0;     // what the subgraph executor holds beside them (executor_host_bytes)
  bool first_layer_sums_inputs = false;     // whether layer 1 aggregates its inputs before it transforms them
  std::vector<ExchangeForecast> exchange;   // per layer, what this rank sends its peers an epoch
  // What the run holds beside its loaded data, with `process_bytes` for the process itself.
  RunHostUse host_use(std::int64_t process_bytes) const;
  // What this rank sends its peers an epoch, over every layer and both directions.
  std::int64_t exchange_bytes_sent() const;
  // The plan's first pass (reuse's one pass, what the host keeps and the device keeps for the run are decided on);
  // null for the in-memory executor and for a recompute plan, whose passes are cut as they run.
  const Pass* first_pass() const { return plan && !plan->passes.empty() ? &plan->passes.front() : nullptr; }
};

// Host memory as a budget the planner meets, as it meets the device's (src/run/host_budget.cpp): where the fastest
// plan's forecast does not fit the host memory a rank may use, it is planned again keeping fewer tensors in host
// memory, one lighter choice at a time, in the order of what each costs an epoch, until one fits.
struct HostBudget {
  std::int64_t bytes = -1;  // what the rank may use; < 0: unknown, nothing to meet
  std::string source;       // "given by --host-memory", ...: for the log
  // The rank's host memory at its peak for a run planned with a choice: what nj plan prints and nj train checks.
  std::function<HostFootprint(const ExecutorChoice&, const PlannedRun&)> forecast;
};

// A run planned within a host budget: the plan, its forecast, and what was given up for it.
struct HostFittedRun {
  PlannedRun run;
  ExecutorChoice choice;  // what `run` was planned as
  HostFootprint host;
  // What planning within the budget changed, in the order it was tried ("the first layer's outputs computed again
  // in the backward half", ...); empty where the fastest plan fits.
  std::vector<std::string> lighter;
  bool fits = true;  // whether `host` is within the budget; else `run` is the lightest plan, which the caller refuses
};

// Plans `choice` with `plan`; where its forecast exceeds `budget`, plans again with each lighter choice that applies,
// each keeping the previous ones, and returns the first that fits, or the lightest, which the caller refuses
// (require_host_memory). The choices, lightest last:
//   1. the first layer's outputs computed again in the backward half, not kept on the host, where it is chained and
//      sums its inputs (--recompute-outputs auto only: an explicit off is kept);
//   2. subgraph blocks built by each step as it runs, not kept on the host (as a --host-blocks below theirs);
//   3. on a device whose memory is host memory (the CPU device), a smaller device budget: 7/8 of the one given,
//      then 6/8, 5/8 and 4/8, while it still plans.
// In-memory runs plan as they are. Logs each choice made.
HostFittedRun plan_within_host_memory(const ExecutorChoice& choice, const HostBudget& budget,
                                      const std::function<PlannedRun(const ExecutorChoice&)>& plan);

// Plans what `choice` runs over `local`: the in-memory executor's step replayed, or the subgraph executor's plan
// settled (choice.options says what it runs on: the library memory and whether the device is a GPU). `sparse`: whether
// the first layer takes `features` as sparse rows (then they are built here from `features`, which must hold values;
// else only their shape is read). `loss_reads`: as SubgraphExecutorOptions::loss_reads. `threads`: the run's compute
// threads (0: OpenMP's default), for the executor's host bytes. `exchange_space`: where the rank's communicator
// exchanges rows from (Communicator::exchange_space).
PlannedRun plan_run(const ExecutorChoice& choice, Model& model, const LocalGraph& local, ConstRows features,
                    bool sparse, std::span<const std::uint8_t> loss_reads, int threads,
                    MemorySpace exchange_space = MemorySpace::kHost);
// plan_run for this rank's `shard` on `resources`, as `make_executor` runs it, within `host` (plan_within_host_memory):
// whether the first layer takes the features as sparse rows is decided over every rank of `comm` (a collective,
// takes_sparse_inputs), once; a training plan's loss reads the training split's logits only.
HostFittedRun plan_rank_run(const ExecutorChoice& choice, const Resources& resources, Model& model, const Shard& shard,
                            Communicator& comm, int threads, const HostBudget& host = {});
// The executor of a planned run over `shard`, exchanging over `comm`; logs a subgraph executor's plan. The subgraph
// executor keeps what it reads of the graph: the shard's in-edge copy is dropped.
std::unique_ptr<Executor> make_executor(PlannedRun run, Resources& resources, Model& model, Shard& shard,
                                        Communicator& comm);
// Both at once.
std::unique_ptr<Executor> make_executor(const ExecutorChoice& choice, Resources& resources, Model& model, Shard& shard,
                                        Communicator& comm);

// Throws InputError where the ranks hold shards of different partitions or datasets (mixed folders would exchange
// rows that do not match, silently): compares what every shard records about the whole. A collective.
void check_same_partition(Communicator& comm, const Shard& shard);

// Where a rank computes: its device and that device's resources, and with several ranks the communicator that sends
// from device memory (NCCL on CUDA) over the job's, where there is one.
struct RankDevice {
  DeviceChoice device;
  Resources resources;
  std::unique_ptr<Communicator> device_comm;
  // What the executor exchanges boundary rows over.
  Communicator& exchange_comm(Communicator& job) { return device_comm ? *device_comm : job; }
};

// Makes rank.device's resources for `choice` (in-memory execution has the device to itself, without a budget) and
// connects the device communicator. Counting the ranks on each card and connecting are collectives: every rank
// must reach this, in the same order, once its data is set up (a rank that failed before would leave the others
// waiting). Making the device may fail on one rank alone: agreed over `comm`.
void set_up_rank_device(RankDevice& rank, const ExecutorChoice& choice, int threads, bool deterministic,
                        Communicator& comm);

// Logs a plan's subgraphs, pool and step budgets and forecast traffic; layers as `model`'s user counts them.
void log_plan(const Model& model, const EpochPlan& plan);

}  // namespace nj
