#pragma once
// An executor runs a model's forward and backward passes over a graph and decides where the data lives while
// it does. The training loop sees only this interface: the in-memory executor keeps everything in host memory
// and runs each layer on the whole graph at once; the subgraph executor (subgraph_executor.hpp) runs the same
// layers block by block within a device-memory budget.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "nj/comm/boundary_exchange.hpp"
#include "nj/core/matrix.hpp"
#include "nj/exec/subgraph.hpp"
#include "nj/kernels/backend.hpp"
#include "nj/kernels/sparse_block.hpp"
#include "nj/model/model.hpp"

namespace nj {

// The loss of some vertices' logits: returns the sum of their losses and writes ∂L/∂logits into grad.
// `vertices` names the vertex of each row (nullptr: row v is vertex v).
using LossFunction = std::function<double(ConstRows logits, const vid_t* vertices, Rows grad)>;

// What an executor measured since the last take_metrics().
struct ExecutionMetrics {
  std::int64_t h2d_bytes = 0;
  std::int64_t d2h_bytes = 0;
  std::int64_t cache_hits = 0;
  std::int64_t cache_misses = 0;
  std::int64_t rows_computed = 0;  // aggregated rows, all layers; equals rows_needed when nothing is recomputed
  std::int64_t rows_needed = 0;    // vertices × layers
  std::int64_t peak_device_bytes = 0;
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

class Executor {
 public:
  virtual ~Executor() = default;
  // Logits of the owned vertices without dropout (the epoch is irrelevant outside training).
  virtual ConstRows evaluate(Model& model) = 0;
  // One training pass for `epoch` (which addresses the dropout masks): forward, the loss through `loss`, and
  // backward, adding into every parameter's gradient. Returns the summed loss.
  virtual double train_step(Model& model, std::uint32_t epoch, const LossFunction& loss) = 0;
  virtual ExecutionMetrics take_metrics() { return {}; }
};

// The random streams of one layer in one epoch: what makes dropout identical however the work is split.
RandomStream feature_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch);
RandomStream attention_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch);

// Where a BlockStack's buffers live.
class RowsAllocator {
 public:
  virtual ~RowsAllocator() = default;
  virtual Rows allocate(std::int64_t rows, std::int64_t cols, const char* what) = 0;
};

class HostRowsAllocator final : public RowsAllocator {
 public:
  Rows allocate(std::int64_t rows, std::int64_t cols, const char* what) override;

 private:
  std::vector<Matrix> buffers_;
};

// A part of a layer's destination rows with all of their in-edges. Its block reads source rows through src_row
// (local ids; nullptr: identity), and its destinations are rows `destinations` of the layer's output (empty:
// the part covers every owned row, in order, and writes the output in place).
struct BlockPart {
  SparseBlockView block;
  std::span<const vid_t> destinations;
  bool reads_mirrors = false;  // some source is a mirror, whose row the exchange brings
};

// Runs all layers of a model over the rows of a local graph that all live in one memory space (the in-memory
// executor). Each layer transforms the owned rows; the mirrors' transformed rows come from the exchange, which
// runs while the parts that read no mirror aggregate; backward, the parts that read mirrors run first, so that
// the mirrors' gradients travel home while the others run.
class BlockStack {
 public:
  // `owned_gid`: the global id of each owned row (what dropout masks are addressed by).
  BlockStack(Backend& backend, const Model& model, std::vector<BlockPart> parts, std::span<const gid_t> owned_gid,
             vid_t num_local, RowsAllocator& allocator, BoundaryExchange& exchange);
  // input: the owned rows. Returns the last layer's output (the owned rows' logits).
  ConstRows forward(Model& model, std::uint32_t epoch, bool training, ConstRows input);
  // Back-propagates from the gradient of the last training forward's output.
  void backward(Model& model, std::uint32_t epoch, ConstRows grad_output);

 private:
  ConstRows layer_input(std::size_t l) const { return l == 0 ? input_ : ConstRows(outputs_[l - 1]); }
  // The layer's input after dropout, kept for the backward pass; the input itself without dropout.
  ConstRows dropped_input(const Model& model, std::size_t l, std::uint32_t epoch, bool training);
  void aggregate(const Model& model, std::size_t l, const BlockPart& part, std::uint32_t epoch, bool training);
  void aggregate_backward(const Model& model, std::size_t l, const BlockPart& part, std::uint32_t epoch);

  Backend& backend_;
  std::vector<BlockPart> parts_;
  std::span<const gid_t> owned_gid_;
  BoundaryExchange& exchange_;
  ConstRows input_;
  std::vector<Rows> z_;        // per layer: transformed rows (owned and mirrors)
  std::vector<Rows> outputs_;  // per layer: act(Y + b) (owned); the last holds the logits
  std::vector<Rows> grad_outputs_;
  std::vector<Rows> grad_z_;
  std::vector<Rows> dropped_;    // per layer, when dropout is on
  std::vector<ConstRows> kept_;  // per layer: what transform_backward multiplies by
  std::vector<Rows> part_rows_;  // per layer: a part's output rows, or their gradients, before they are scattered
};

class InMemoryExecutor final : public Executor {
 public:
  // `features` (the owned vertices' rows) must outlive the executor; `comm` may be null when `local` has no
  // peers.
  InMemoryExecutor(Backend& backend, const Model& model, const LocalGraph& local, ConstRows features,
                   Communicator* comm = nullptr);
  ConstRows evaluate(Model& model) override;
  double train_step(Model& model, std::uint32_t epoch, const LossFunction& loss) override;
  ExecutionMetrics take_metrics() override;

 private:
  std::vector<Subgraph> parts_;  // the owned rows with their in-edges (BlockStack's parts)
  std::vector<gid_t> owned_gid_;
  ConstRows features_;
  HostRowsAllocator buffers_;
  BoundaryExchange exchange_;
  BlockStack stack_;
  Matrix grad_logits_;
};

}  // namespace nj
