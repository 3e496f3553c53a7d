#include "pass_exchange.hpp"

#include <algorithm>

#include "nj/exec/exchange_side.hpp"

namespace nj {

PassExchange::PassExchange(Communicator* ranks, const LocalGraph& local, const Model& model,
                           bool first_layer_sums_inputs, const std::vector<Rows>& homes,
                           const std::vector<Rows>& outputs, const std::vector<Rows>& output_gradients)
    : exchange_(ranks, local, model.num_layers()),
      homes_(homes),
      outputs_(outputs),
      output_gradients_(output_gradients),
      num_owned_(local.num_owned) {
  const auto boundary = static_cast<std::int64_t>(exchange_.boundary_rows().size());
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    received_gradients_.emplace_back(boundary, exchanged_gradient_width(model, l, first_layer_sums_inputs));
    boundary_rows_.emplace_back(boundary, exchanged_width(model, l, first_layer_sums_inputs));
  }
}

Rows PassExchange::forward_rows(const Pass& pass, std::size_t layer) const {
  return pass.mirrors_transformed(layer) ? outputs_[layer - 1] : homes_[2 * layer];
}

Rows PassExchange::backward_rows(const Pass& pass, std::size_t layer) const {
  return pass.mirrors_transformed(layer) ? output_gradients_[layer - 1] : homes_[2 * layer + 1];
}

void PassExchange::begin_forward() {
  phase_ = 0;
  started_ = false;
  in_backward_ = false;
}

void PassExchange::begin_backward() { in_backward_ = true; }

// A phase's exchange carries the rows its layer aggregates forward, or their gradients backward (none for a first
// layer that sums its inputs); for a layer that transforms its mirrors, its inputs forward and the previous layer's
// output gradients backward.
void PassExchange::advance(const Pass& pass, std::size_t k) {
  const auto& points = pass.exchange_points;
  const std::size_t layers = pass.layer_parts.size();
  const std::size_t phases_running = std::min(points.size(), in_backward_ ? 2 * layers : layers);
  while (phase_ < phases_running) {
    const bool forward = phase_ < layers;
    const auto layer = static_cast<std::uint32_t>(forward ? phase_ : 2 * layers - 1 - phase_);
    if (!forward && pass.sums_inputs(layer)) {  // no gradient of the inputs travels
      ++phase_;
      continue;
    }
    if (!started_) {
      if (points[phase_].start > k) return;
      if (forward) {
        start_rows(pass, layer);
      } else {
        exchange_.start_gradients(layer, mirror_rows(backward_rows(pass, layer)));
      }
      started_ = true;
    }
    if (points[phase_].finish > k) return;
    if (forward) {
      exchange_.finish_rows(mirror_rows(forward_rows(pass, layer)));
    } else {
      exchange_.finish_gradients(received_gradients_[layer].view());
      if (pass.mirrors_transformed(layer)) add_received_gradients(pass, layer);
    }
    started_ = false;
    ++phase_;
  }
}

// The boundary rows of what layer l aggregates leave for the peers that mirror them.
void PassExchange::start_rows(const Pass& pass, std::uint32_t layer) {
  const std::vector<vid_t>& rows = exchange_.boundary_rows();
  Matrix& packed = boundary_rows_[layer];
  const Rows home = forward_rows(pass, layer);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const float* row = home.row(rows[i]);
    std::copy(row, row + packed.cols(), packed.row(static_cast<std::int64_t>(i)));
  }
  exchange_.start_rows(layer, packed.view());
}

// What the mirrors sent for the boundary rows' inputs, added to the previous layer's output gradients, which the
// backward of that layer reads next.
void PassExchange::add_received_gradients(const Pass& pass, std::uint32_t layer) {
  const std::vector<vid_t>& rows = exchange_.boundary_rows();
  const Matrix& sums = received_gradients_[layer];
  const Rows gradients = backward_rows(pass, layer);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const float* sum = sums.row(static_cast<std::int64_t>(i));
    float* row = gradients.row(rows[i]);
    for (std::int64_t c = 0; c < sums.cols(); ++c) row[c] += sum[c];
  }
}

}  // namespace nj
