#pragma once
// The parameters as the kernels read them: on the device, for the whole run. The host keeps the master copy
// (the optimizer and checkpoints work there); each training step uploads the weights once, and once its
// backward is done adds the device gradients, summed over the ranks by the executor, into the host ones
// (finish_step).
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "nj/device/device.hpp"
#include "nj/device/transfers.hpp"
#include "nj/kernels/backend.hpp"
#include "nj/model/model.hpp"

namespace nj {

// One layer's: what its transform multiplies by and its bias, and their gradients (views into one buffer that
// holds every layer's, so that one sum over the ranks and one download carry them all).
struct LayerParameters {
  DeviceMatrix weight;     // the effective weight, in_dim × row_width (or the first layer's input_sums_weight)
  DeviceMatrix bias;       // 1 × out_dim
  DeviceRows weight_grad;  // accumulated by transform_backward
  DeviceRows bias_grad;    // accumulated by the aggregation backward's column sums
};

class DeviceParameters {
 public:
  // `first_layer_sums_inputs`: the first layer runs summing its inputs first (aggregates_before_transform), so
  // its weight is its input_sums_weight, of as many values as its W_eff. Without gradients (inference) only the
  // weights and biases are allocated, and finish_step must not be called.
  DeviceParameters(Transfers& transfers, const Model& model, bool first_layer_sums_inputs, bool with_gradients = true);
  // Device bytes the constructor allocates for this model.
  static std::int64_t bytes_for(const Model& model, bool with_gradients = true);

  // After the layers were prepared: their weights and biases to the device, and the gradients zeroed. Kernels
  // issued afterwards see them.
  void upload(Backend& backend, const Model& model);
  // Every layer's weight gradient, then bias gradient, on the device, in one buffer: what a sum over the ranks
  // takes in one call.
  DeviceSpan<float> gradients() { return gradients_on_device_.view(); }
  // After a step's backward: the device gradients to the host, `sum_on_host` applied to them there (a sum over the
  // ranks, or nothing), added into the host gradients; then each layer's backward finished (Layer::finish_backward).
  void finish_step(Model& model, const std::function<void(std::span<float>)>& sum_on_host);

  LayerParameters& layer(std::size_t l) { return layers_[l]; }
  const LayerParameters& layer(std::size_t l) const { return layers_[l]; }

 private:
  const Matrix& weight_of(const Model& model, std::size_t l) const;
  Matrix& weight_grad_of(Model& model, std::size_t l) const;

  Transfers& transfers_;
  bool first_layer_sums_inputs_;
  std::vector<LayerParameters> layers_;
  DeviceArray<float> gradients_on_device_;  // every layer's weight, then bias, gradient
  std::vector<float> gradients_;            // their download
};

}  // namespace nj
