#pragma once
// An executor runs a model's forward and backward passes over a graph and decides where the data lives while
// it does. The training loop sees only this interface: the in-memory executor below keeps everything in host
// memory and runs each layer on the whole graph at once; the subgraph executor runs the same layers block by
// block within a device-memory budget.
#include <cstdint>
#include <vector>

#include "nj/core/matrix.hpp"
#include "nj/kernels/backend.hpp"
#include "nj/kernels/sparse_block.hpp"
#include "nj/model/model.hpp"

namespace nj {

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs every layer for `epoch` (the epoch addresses the dropout masks) and returns the logits of all vertices.
  virtual ConstRows forward(Model& model, std::uint32_t epoch, bool training) = 0;
  // Back-propagates ∂L/∂logits of the last training forward; adds into every parameter's gradient.
  virtual void backward(Model& model, std::uint32_t epoch, ConstRows grad_logits) = 0;
};

// The random streams of one layer in one epoch: what makes dropout identical however the work is split.
RandomStream feature_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch);
RandomStream attention_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch);

class InMemoryExecutor final : public Executor {
 public:
  // `features` must outlive the executor; vertex v has global id first_gid + v.
  InMemoryExecutor(Backend& backend, const Model& model, const CsrGraph& graph, ConstRows features,
                   gid_t first_gid = 0);
  ConstRows forward(Model& model, std::uint32_t epoch, bool training) override;
  void backward(Model& model, std::uint32_t epoch, ConstRows grad_logits) override;

 private:
  // The layer's input rows after dropout (kept for the backward pass): the rows themselves outside training.
  ConstRows dropped_input(const Model& model, std::size_t l, std::uint32_t epoch, bool training);
  ConstRows kept_input(const Model& model, std::size_t l) const;
  ConstRows layer_input(std::size_t l) const { return l == 0 ? features_ : ConstRows(outputs_[l - 1].view()); }

  Backend& backend_;
  SparseBlock block_;
  ConstRows features_;
  std::vector<Matrix> z_;        // per layer: transformed rows
  std::vector<Matrix> outputs_;  // per layer: act(Y + b); the last holds the logits
  std::vector<Matrix> grad_outputs_;
  std::vector<Matrix> grad_z_;
  std::vector<Matrix> dropped_;  // per layer: the input after dropout, when dropout is on
};

}  // namespace nj
