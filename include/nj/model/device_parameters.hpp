#pragma once
// The parameters as the kernels read them: on the device, for the whole run. The host keeps the master copy
// (the optimizer, the all-reduce and checkpoints work there); each training step uploads the weights once and
// adds the device gradients into the host ones when a layer's backward is done.
#include <cstdint>
#include <vector>

#include "nj/device/device.hpp"
#include "nj/device/transfers.hpp"
#include "nj/kernels/backend.hpp"
#include "nj/model/model.hpp"

namespace nj {

// One layer's: what its transform multiplies by and its bias, and their gradients.
struct LayerParameters {
  DeviceMatrix weight;       // in_dim × row_width (the effective weight)
  DeviceMatrix bias;         // 1 × out_dim
  DeviceMatrix weight_grad;  // accumulated by transform_backward
  DeviceMatrix bias_grad;    // accumulated by the aggregation backward's column sums
};

class DeviceParameters {
 public:
  DeviceParameters(Transfers& transfers, const Model& model);
  // Device bytes the constructor allocates for this model.
  static std::int64_t bytes_for(const Model& model);

  // After the layers were prepared: their weights and biases to the device, and the gradients zeroed. Kernels
  // issued afterwards see them.
  void upload(Backend& backend, const Model& model);
  // Adds layer l's device gradients into its host ones, finishes its backward (Layer::finish_backward) and
  // zeroes them on the device.
  void finish_backward(Backend& backend, Model& model, std::size_t l);

  LayerParameters& layer(std::size_t l) { return layers_[l]; }
  const LayerParameters& layer(std::size_t l) const { return layers_[l]; }

 private:
  Transfers& transfers_;
  std::vector<LayerParameters> layers_;
  std::vector<float> gradients_;  // a layer's downloaded weight and bias gradients
};

}  // namespace nj
