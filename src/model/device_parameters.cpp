#include "nj/model/device_parameters.hpp"

namespace nj {
namespace {

constexpr auto kFloat = static_cast<std::int64_t>(sizeof(float));

std::int64_t layer_floats(const Layer& layer) { return 2 * (layer.in_dim() * layer.row_width() + layer.out_dim()); }

}  // namespace

std::int64_t DeviceParameters::bytes_for(const Model& model) {
  std::int64_t bytes = 0;
  for (std::size_t l = 0; l < model.num_layers(); ++l) bytes += layer_floats(model.layer(l)) * kFloat;
  return bytes;
}

DeviceParameters::DeviceParameters(Transfers& transfers, const Model& model) : transfers_(transfers) {
  Device& device = transfers.device();
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    layers_.push_back({DeviceMatrix(device, layer.in_dim(), layer.row_width(), "parameters: weights"),
                       DeviceMatrix(device, 1, layer.out_dim(), "parameters: biases"),
                       DeviceMatrix(device, layer.in_dim(), layer.row_width(), "parameters: weight gradients"),
                       DeviceMatrix(device, 1, layer.out_dim(), "parameters: bias gradients")});
  }
}

void DeviceParameters::upload(Backend& backend, const Model& model) {
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    LayerParameters& p = layers_[l];
    transfers_.upload_array(model.layer(l).effective_weight().span(), p.weight.view().span());
    transfers_.upload_array(model.layer(l).bias().value.span(), p.bias.view().span());
    backend.zero_rows(p.weight_grad.view(), {}, p.weight_grad.rows());
    backend.zero_rows(p.bias_grad.view(), {}, 1);
  }
}

void DeviceParameters::finish_backward(Backend& backend, Model& model, std::size_t l) {
  Layer& layer = model.layer(l);
  LayerParameters& p = layers_[l];
  // Both gradients reach the host before either is added: a download that fails leaves the layer's host
  // gradients as they were (GAT's effective-weight gradient is no parameter, so zero_grad would not clear it).
  const auto weight_floats = static_cast<std::size_t>(p.weight_grad.view().size());
  gradients_.resize(weight_floats + static_cast<std::size_t>(p.bias_grad.view().size()));
  transfers_.download_array(ConstDeviceRows(p.weight_grad.view()).span(), gradients_.data());
  transfers_.download_array(ConstDeviceRows(p.bias_grad.view()).span(), gradients_.data() + weight_floats);
  const auto add_gradient = [](const float* device_grad, Matrix& host_grad) {
    for (std::int64_t i = 0; i < host_grad.size(); ++i) host_grad.data()[i] += device_grad[i];
  };
  add_gradient(gradients_.data(), layer.effective_weight_grad());
  add_gradient(gradients_.data() + weight_floats, layer.bias().grad);
  layer.finish_backward();
  // Another pass over other rows (the recompute baseline) accumulates from zero again.
  backend.zero_rows(p.weight_grad.view(), {}, p.weight_grad.rows());
  backend.zero_rows(p.bias_grad.view(), {}, 1);
}

}  // namespace nj
