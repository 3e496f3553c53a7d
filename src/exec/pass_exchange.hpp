#pragma once
// The exchange of a running pass's boundary rows with the other ranks, as the step loop advances it: each phase's
// exchange starts and finishes at the steps the plan chose for it (Pass::exchange_points), forward with the rows a
// layer aggregates, backward with their gradients, so that the transfers overlap the steps in between. A layer that
// transforms its mirrors (exchange_side.hpp) exchanges its inputs instead: the previous layer's outputs forward,
// and their gradients backward, which are added to that layer's output gradients where they arrive.
#include <cstddef>
#include <vector>

#include "nj/core/matrix.hpp"
#include "nj/exec/boundary_exchange.hpp"
#include "nj/exec/epoch_plan.hpp"

namespace nj {

class PassExchange {
 public:
  // `homes`: per trace tensor, the host rows the exchange reads the boundary rows from and writes the mirrors'
  // rows into (2l: layer l's transformed rows, 2l+1: their gradients); `outputs` and `output_gradients`: per layer,
  // its outputs and ∂L/∂Y in pass rows, the rows exchanged for a next layer that transforms its mirrors. All must
  // outlive the exchange.
  PassExchange(Communicator* ranks, const LocalGraph& local, const Model& model, bool first_layer_sums_inputs,
               const std::vector<Rows>& homes, const std::vector<Rows>& outputs,
               const std::vector<Rows>& output_gradients);

  // The running pass starts its forward half (every phase's exchange from the first) or its backward half.
  void begin_forward();
  void begin_backward();

  // Starts and completes, in phase order, the pass's phase exchanges whose points lie at or before step k, up to
  // the last phase of the half that runs (a forward-only evaluation starts no backward exchange).
  void advance(const Pass& pass, std::size_t k);
  // Lets transfers in flight progress between steps.
  void poll() { exchange_.poll(); }

  // Per layer: what the mirrors sent for each boundary row, as the last backward exchange of the layer left it.
  ConstRows received_gradients(std::size_t layer) const { return received_gradients_[layer].view(); }
  LayerExchangeStats take_stats() { return exchange_.take_stats(); }

 private:
  void start_rows(const Pass& pass, std::uint32_t layer);
  void add_received_gradients(const Pass& pass, std::uint32_t layer);
  // The host rows layer l's exchange reads its boundary rows from and writes its mirrors' into, forward and backward:
  // the previous layer's outputs and their gradients where the pass transforms the layer's mirrors.
  Rows forward_rows(const Pass& pass, std::size_t layer) const;
  Rows backward_rows(const Pass& pass, std::size_t layer) const;
  Rows mirror_rows(Rows home) const { return home.slice(num_owned_, home.rows - num_owned_); }

  BoundaryExchange exchange_;
  const std::vector<Rows>& homes_;
  const std::vector<Rows>& outputs_;
  const std::vector<Rows>& output_gradients_;
  std::int64_t num_owned_;
  std::vector<Matrix> received_gradients_;  // per layer: what the mirrors sent for each boundary row
  std::vector<Matrix> boundary_rows_;       // per layer: the boundary rows leaving, packed
  std::size_t phase_ = 0;                   // the running pass's next phase exchange
  bool started_ = false;                    // that phase's exchange is in flight
  bool in_backward_ = false;                // the running pass runs its backward half
};

}  // namespace nj
