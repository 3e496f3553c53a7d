#pragma once
// An executor runs a model's forward and backward passes over a graph and decides where the data lives while
// it does. The training loop sees only this interface: the in-memory executor keeps everything on the device (the
// GPU, or on the CPU backend the device emulated in host memory) and runs each layer on the whole graph at once; the
// subgraph executor (subgraph_executor.hpp) keeps the vertex rows in host memory and runs the same layers block by
// block within a device-memory budget.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "nj/core/matrix.hpp"
#include "nj/device/planning_device.hpp"
#include "nj/device/transfers.hpp"
#include "nj/exec/boundary_exchange.hpp"
#include "nj/exec/sparse_inputs.hpp"
#include "nj/exec/subgraph.hpp"
#include "nj/model/model.hpp"
#include "nj/runtime/resources.hpp"

namespace nj {

// The loss of some vertices' logits: returns the sum of their losses and writes ∂L/∂logits into grad.
// `vertices` names the vertex of each row (nullptr: row v is vertex v). Told which vertices the loss reads
// (SubgraphExecutorOptions::loss_reads), the subgraph executor hands it those rows alone, possibly none.
using LossFunction = std::function<double(ConstRows logits, const vid_t* vertices, Rows grad)>;

// What an executor measured since the last take_metrics().
struct ExecutionMetrics {
  std::int64_t h2d_bytes = 0;  // rows (what the plan predicts)
  std::int64_t d2h_bytes = 0;
  // Everything else that moved, by what it carried (its kRows is 0): the graph's blocks, cache slots and vertex ids,
  // the parameters and their gradients.
  TrafficBytes h2d_other, d2h_other;
  std::int64_t pageable_copies = 0;  // copies whose host side was not page-locked
  std::int64_t cache_hits = 0;
  std::int64_t cache_misses = 0;
  std::int64_t rows_computed = 0;      // aggregated rows, all layers; equals rows_needed when nothing is recomputed
  std::int64_t rows_needed = 0;        // vertices × layers
  std::int64_t peak_device_bytes = 0;  // requested bytes live at once
  std::int64_t peak_device_footprint_bytes = 0;  // the arena's extent: with alignment and fragmentation
  double compute_seconds = 0.0;
  double plan_seconds = 0.0;    // planning done while training (the recompute baseline cuts its closures)
  double copy_seconds = 0.0;    // time spent copying
  double wait_seconds = 0.0;    // time compute waited for copies
  LayerExchangeStats exchange;  // boundary rows exchanged with other ranks, per layer and direction
  double recompute_ratio() const {
    return rows_needed > 0 ? static_cast<double>(rows_computed) / static_cast<double>(rows_needed) : 1.0;
  }
  double hit_rate() const {
    const auto total = cache_hits + cache_misses;
    return total > 0 ? static_cast<double>(cache_hits) / static_cast<double>(total) : 1.0;
  }
};

// What the device measured since the last call, into `metrics`: the bytes Transfers counted, by what they carried,
// page-locked copies, peaks and copy time; then the device's counters start again. Every byte the device copied
// was counted there (nj::Error otherwise).
void take_device_metrics(Transfers& transfers, ExecutionMetrics& metrics);

class Executor {
 public:
  virtual ~Executor() = default;
  // Logits of the owned vertices without dropout (the epoch is irrelevant outside training).
  virtual ConstRows evaluate(Model& model) = 0;
  // What layer l output for the owned vertices in the last evaluate(), after its activation, in the logits' row
  // order (the last layer's are the logits). Its first Layer::embedding_width() columns are the layer's own.
  virtual ConstRows layer_outputs(std::size_t l) = 0;
  // One training pass for `epoch` (which addresses the dropout masks): forward, the loss through `loss`, and
  // backward, adding into every parameter's gradient the step's gradient summed over all ranks (one sum of every
  // gradient at once, through the executor's communicator). Returns this rank's summed loss.
  virtual double train_step(Model& model, std::uint32_t epoch, const LossFunction& loss) = 0;
  virtual ExecutionMetrics take_metrics() { return {}; }
};

// The random streams of one layer in one epoch: what makes dropout identical however the work is split.
RandomStream feature_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch);
RandomStream attention_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch);

// Whether the in-memory executor runs layer l as aggregate-then-transform, Y = sum_inputs(X)·W', instead of
// Y = Â·(X·W_eff): for the first layer, whose input needs no gradient, where the layer has that order and it costs
// less (Layer::sums_inputs_first_pays: GCN, GIN with ε fixed, and SAGE as [mean X | X]·[W ; W_root], where one
// sum of in_dim-wide rows costs less than the two, forward and backward for ∂L/∂Z, the other order runs, whose
// mirror rows would also travel); the weight gradient is then sums_inputs(X)ᵀ·∂L/∂Y, from the sums kept. DGL's
// GraphConv and SAGEConv make a similar choice on every layer (they aggregate first where in ≤ out). The two orders
// differ only in the rounding of their sums. Sparse inputs are transformed first: their transform is an SpMM over the
// stored entries, and their sums would be dense.
bool aggregates_before_transform(const Layer& layer, std::size_t l, bool sparse_inputs);

// Runs every layer of a model on the whole local graph at once, with everything on the device (a GPU the graph
// fits in). Each layer transforms the owned rows (a layer that sums its inputs first drops them out); the
// mirrors' rows come from the exchange, which runs while the owned rows that read no mirror aggregate; backward,
// the rows that read mirrors run first, so that the mirrors' gradients travel home while the others run.
// What an in-memory run holds on its device and moves an epoch: one training step (`forward_only`: one evaluation)
// replayed on a planning device (planning_device.hpp) with kernels that do nothing, as forecast_device_memory replays
// the subgraph executor's. `sparse_features`: the features as sparse rows where the first layer takes them so (null:
// dense `features`, of which only the shape is read). `exchange_space`: where the rank's communicator exchanges rows
// from (Communicator::exchange_space), which decides what the exchange stages through the host. The replay adds zeros
// to `model`'s gradients and changes none of its values.
MemoryForecast forecast_in_memory(Model& model, const LocalGraph& local, ConstRows features,
                                  const SparseRows* sparse_features, bool forward_only = false,
                                  MemorySpace exchange_space = MemorySpace::kHost, const LibraryMemory& library = {});

class InMemoryExecutor final : public Executor {
 public:
  // `features`: the owned vertices' rows (copied to the device, as sparse rows where `inputs` takes them). `comm` may
  // be null when `local` has no peers.
  InMemoryExecutor(Resources& resources, const Model& model, const LocalGraph& local, ConstRows features,
                   Communicator* comm = nullptr, SparseInputs inputs = SparseInputs::kOff);
  // With the first layer's inputs decided: `sparse_features`, the features as sparse rows, or null for dense rows.
  InMemoryExecutor(Resources& resources, const Model& model, const LocalGraph& local, ConstRows features,
                   const SparseRows* sparse_features, Communicator* comm);
  ~InMemoryExecutor() override;
  ConstRows evaluate(Model& model) override;
  ConstRows layer_outputs(std::size_t l) override;
  double train_step(Model& model, std::uint32_t epoch, const LossFunction& loss) override;
  ExecutionMetrics take_metrics() override;

 private:
  friend MemoryForecast forecast_in_memory(Model&, const LocalGraph&, ConstRows, const SparseRows*, bool, MemorySpace,
                                           const LibraryMemory&);
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace nj
