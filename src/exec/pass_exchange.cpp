#include "pass_exchange.hpp"

#include <algorithm>

#include "nj/exec/host_footprint.hpp"

namespace nj {

PassExchange::PassExchange(Communicator* ranks, const LocalGraph& local, const Model& model,
                           bool first_layer_sums_inputs, const std::vector<Rows>& homes)
    : exchange_(ranks, local, model.num_layers()), homes_(homes), num_owned_(local.num_owned) {
  const auto boundary = static_cast<std::int64_t>(exchange_.boundary_rows().size());
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const std::int64_t width = aggregated_width(model, l, first_layer_sums_inputs);
    // A first layer that sums its inputs receives no gradients of them.
    received_gradients_.emplace_back(boundary, l == 0 && first_layer_sums_inputs ? 0 : width);
    boundary_rows_.emplace_back(boundary, width);
  }
}

void PassExchange::begin_forward() {
  phase_ = 0;
  started_ = false;
  in_backward_ = false;
}

void PassExchange::begin_backward() { in_backward_ = true; }

// A phase's exchange carries the rows its layer aggregates forward, or their gradients backward (none for a first
// layer that sums its inputs).
void PassExchange::advance(const Pass& pass, std::size_t k) {
  const auto& points = pass.exchange_points;
  const std::size_t layers = pass.layer_parts.size();
  const std::size_t phases_running = std::min(points.size(), in_backward_ ? 2 * layers : layers);
  while (phase_ < phases_running) {
    const bool forward = phase_ < layers;
    const auto layer = static_cast<std::uint32_t>(forward ? phase_ : 2 * layers - 1 - phase_);
    if (!forward && layer == 0 && pass.first_layer_sums_inputs) {  // no gradient of the inputs travels
      ++phase_;
      continue;
    }
    if (!started_) {
      if (points[phase_].start > k) return;
      if (forward) {
        start_rows(layer);
      } else {
        exchange_.start_gradients(layer, mirror_rows(homes_[2 * layer + 1]));
      }
      started_ = true;
    }
    if (points[phase_].finish > k) return;
    if (forward) {
      exchange_.finish_rows(mirror_rows(homes_[2 * layer]));
    } else {
      exchange_.finish_gradients(received_gradients_[layer].view());
    }
    started_ = false;
    ++phase_;
  }
}

// The boundary rows of what layer l aggregates leave for the peers that mirror them.
void PassExchange::start_rows(std::uint32_t layer) {
  const std::vector<vid_t>& rows = exchange_.boundary_rows();
  Matrix& packed = boundary_rows_[layer];
  const Rows home = homes_[2 * layer];
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const float* row = home.row(rows[i]);
    std::copy(row, row + packed.cols(), packed.row(static_cast<std::int64_t>(i)));
  }
  exchange_.start_rows(layer, packed.view());
}

}  // namespace nj
