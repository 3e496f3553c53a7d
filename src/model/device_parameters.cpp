#include "nj/model/device_parameters.hpp"

#include "nj/device/arena.hpp"

namespace nj {
namespace {

constexpr auto kFloat = static_cast<std::int64_t>(sizeof(float));

// Each gradient starts on an arena unit of the shared buffer, as it would in an allocation of its own: the
// buffer takes what the separate gradients took (the planner's resident_bytes), and views stay aligned.
std::int64_t padded_floats(std::int64_t floats) { return arena_block_bytes(floats * kFloat) / kFloat; }
std::int64_t gradient_floats(const Layer& layer) {
  return padded_floats(layer.in_dim() * layer.row_width()) + padded_floats(layer.out_dim());
}
std::int64_t gradient_floats(const Model& model) {
  std::int64_t floats = 0;
  for (std::size_t l = 0; l < model.num_layers(); ++l) floats += gradient_floats(model.layer(l));
  return floats;
}

}  // namespace

std::int64_t DeviceParameters::bytes_for(const Model& model, bool with_gradients) {
  std::int64_t bytes = with_gradients ? gradient_floats(model) * kFloat : 0;
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    bytes += (layer.in_dim() * layer.row_width() + layer.out_dim()) * kFloat;
  }
  return bytes;
}

DeviceParameters::DeviceParameters(Transfers& transfers, const Model& model, bool first_layer_sums_inputs,
                                   bool with_gradients)
    : transfers_(transfers),
      first_layer_sums_inputs_(first_layer_sums_inputs),
      gradients_on_device_(transfers.device(), with_gradients ? gradient_floats(model) : 0, "parameters: gradients") {
  Device& device = transfers.device();
  float* next = gradients_on_device_.view().data;
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    const Matrix& weight = weight_of(model, l);
    NJ_EXPECTS(weight.size() == layer.in_dim() * layer.row_width(),
               "layer {}: the weight its inputs' sums are multiplied by has {} values, its W_eff {}", l + 1,
               weight.size(), layer.in_dim() * layer.row_width());
    // Without gradients the views stay empty: nothing writes them.
    const DeviceRows weight_grad = with_gradients ? DeviceRows(next, weight.rows(), weight.cols()) : DeviceRows{};
    const DeviceRows bias_grad =
        with_gradients ? DeviceRows(next + padded_floats(weight_grad.size()), 1, layer.out_dim()) : DeviceRows{};
    if (with_gradients) next += gradient_floats(layer);
    layers_.push_back({DeviceMatrix(device, weight.rows(), weight.cols(), "parameters: weights"),
                       DeviceMatrix(device, 1, layer.out_dim(), "parameters: biases"), weight_grad, bias_grad});
  }
}

const Matrix& DeviceParameters::weight_of(const Model& model, std::size_t l) const {
  const Layer& layer = model.layer(l);
  return l == 0 && first_layer_sums_inputs_ ? layer.input_sums_weight() : layer.effective_weight();
}

Matrix& DeviceParameters::weight_grad_of(Model& model, std::size_t l) const {
  Layer& layer = model.layer(l);
  return l == 0 && first_layer_sums_inputs_ ? layer.input_sums_weight_grad() : layer.effective_weight_grad();
}

void DeviceParameters::upload(Backend& backend, const Model& model) {
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    LayerParameters& p = layers_[l];
    transfers_.upload_array(weight_of(model, l).span(), p.weight.view().span(), Traffic::kParameters);
    transfers_.upload_array(model.layer(l).bias().value.span(), p.bias.view().span(), Traffic::kParameters);
  }
  const DeviceSpan<float> gradients = gradients_on_device_.view();
  if (gradients.size > 0) backend.zero_rows(DeviceRows(gradients.data, 1, gradients.size), {}, 1);
}

void DeviceParameters::finish_step(Model& model, const std::function<void(std::span<float>)>& sum_on_host) {
  const DeviceSpan<float> on_device = gradients_on_device_.view();
  NJ_EXPECTS(on_device.size > 0, "parameters made without gradients take no training step");
  // Every gradient reaches the host before any is added: a download that fails leaves the host gradients as they
  // were (GAT's effective-weight gradient is no parameter, so zero_grad would not clear it).
  gradients_.resize(static_cast<std::size_t>(on_device.size));
  transfers_.download_array(DeviceSpan<const float>(on_device), gradients_.data(), Traffic::kParameters);
  sum_on_host(std::span<float>(gradients_));
  const float* next = gradients_.data();
  const auto add_gradient = [&next](Matrix& host_grad) {
    for (std::int64_t i = 0; i < host_grad.size(); ++i) host_grad.data()[i] += next[i];
    next += padded_floats(host_grad.size());
  };
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    Layer& layer = model.layer(l);
    add_gradient(weight_grad_of(model, l));
    add_gradient(layer.bias().grad);
    layer.finish_backward();
  }
}

}  // namespace nj
