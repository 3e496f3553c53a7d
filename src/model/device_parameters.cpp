#include "nj/model/device_parameters.hpp"

#include <algorithm>

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

DeviceParameters::DeviceParameters(Device& device, const Model& model) : device_(device), staging_(device) {
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    layers_.push_back({DeviceMatrix(device, layer.in_dim(), layer.row_width(), "parameters: weights"),
                       DeviceMatrix(device, 1, layer.out_dim(), "parameters: biases"),
                       DeviceMatrix(device, layer.in_dim(), layer.row_width(), "parameters: weight gradients"),
                       DeviceMatrix(device, 1, layer.out_dim(), "parameters: bias gradients")});
  }
}

void DeviceParameters::upload(Backend& backend, const Model& model) {
  // Every layer's weight and bias go through one staging buffer: the previous step's copies from it are done,
  // since its gradients were waited for.
  std::int64_t floats = 0;
  for (const auto& p : layers_) floats += p.weight.view().size() + p.bias.view().size();
  device_.synchronize(uploaded_);  // the staging's last upload is done before it is refilled
  float* host = staging_.reserve(floats);
  Event copied;
  device_.wait(Stream::kHostToDevice, device_.record(Stream::kCompute));  // the last step's kernels read them
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = model.layer(l);
    LayerParameters& p = layers_[l];
    const Matrix& weight = layer.effective_weight();
    std::copy(weight.data(), weight.data() + weight.size(), host);
    copied = nj::upload(device_, p.weight.view(), ConstRows{host, weight.rows(), weight.cols()});
    host += weight.size();
    const Matrix& bias = layer.bias().value;
    std::copy(bias.data(), bias.data() + bias.size(), host);
    copied = nj::upload(device_, p.bias.view(), ConstRows{host, bias.rows(), bias.cols()});
    host += bias.size();
    backend.zero_rows(p.weight_grad.view(), {}, p.weight_grad.rows());
    backend.zero_rows(p.bias_grad.view(), {}, 1);
  }
  device_.wait(Stream::kCompute, copied);
  uploaded_ = copied;
}

void DeviceParameters::finish_backward(Backend& backend, Model& model, std::size_t l) {
  Layer& layer = model.layer(l);
  LayerParameters& p = layers_[l];
  const std::int64_t weight_floats = p.weight_grad.view().size();
  device_.synchronize(uploaded_);  // the staging's upload is done before it is refilled
  float* host = staging_.reserve(weight_floats + p.bias_grad.cols());
  device_.wait(Stream::kDeviceToHost, device_.record(Stream::kCompute));
  download(device_, Rows{host, p.weight_grad.rows(), p.weight_grad.cols()}, p.weight_grad.view());
  device_.synchronize(download(device_, Rows{host + weight_floats, 1, p.bias_grad.cols()}, p.bias_grad.view()));
  Matrix& weight_grad = layer.effective_weight_grad();
  for (std::int64_t i = 0; i < weight_floats; ++i) weight_grad.data()[i] += host[i];
  Matrix& bias_grad = layer.bias().grad;
  for (std::int64_t c = 0; c < bias_grad.cols(); ++c) bias_grad.data()[c] += host[weight_floats + c];
  layer.finish_backward();
  // Another pass over other rows (the recompute baseline) accumulates from zero again.
  backend.zero_rows(p.weight_grad.view(), {}, p.weight_grad.rows());
  backend.zero_rows(p.bias_grad.view(), {}, 1);
}

}  // namespace nj
