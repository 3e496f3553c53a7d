#pragma once
// What a command that runs a model on a rank's part of a graph sets up before its first step (nj train, nj plan,
// and the commands to come): where the data comes from and how the rank's part is loaded and numbered, and which
// executor runs the model over it. The device and its communicator come from nj/runtime.
#include <memory>
#include <string>

#include "nj/comm/communicator.hpp"
#include "nj/exec/executor.hpp"
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
  // Several ranks over a dataset file partition it in memory, each computing the same partition.
  PartitionMethod partition_method = PartitionMethod::kMetis;
  bool normalize_rows = false;  // divide each feature row by its sum
};

// The part of the graph this rank runs on: its shard of the partition folder, its part of the dataset partitioned
// in memory, or, on one rank, the whole dataset; numbered in `order` and its features normalised as `source`
// asks. Logs what was loaded and how long it took.
Shard load_rank_shard(const DataSource& source, VertexOrder order, Communicator& comm);

// The executor `choice` names over `shard` on `resources`, exchanging over `comm`; logs a subgraph executor's plan.
// Whether its first layer takes the features as sparse rows is decided over every rank of `comm` (a collective,
// takes_sparse_inputs). The subgraph executor keeps what it reads of the graph: the shard's in-edge copy is dropped.
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

// Logs a plan's subgraphs, pool and step budgets and predicted traffic.
void log_plan(const EpochPlan& plan);

}  // namespace nj
