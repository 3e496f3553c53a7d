#include <algorithm>

#include "nj/exec/executor.hpp"

namespace nj {

RandomStream feature_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch) {
  return {config.seed, RandomPurpose::kFeatureDropout, layer, epoch};
}

RandomStream attention_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch) {
  return {config.seed, RandomPurpose::kAttentionDropout, layer, epoch};
}

InMemoryExecutor::InMemoryExecutor(Backend& backend, const Model& model, const CsrGraph& graph, ConstRows features,
                                   gid_t first_gid)
    : backend_(backend), features_(features) {
  NJ_EXPECTS(features.rows == graph.num_vertices(), "features have {} rows for {} vertices", features.rows,
             graph.num_vertices());
  const CsrGraph prepared = model.prepare_graph(graph);
  block_ = whole_graph_block(prepared, model.edge_weights(prepared), first_gid);
  const std::int64_t n = graph.num_vertices();
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    z_.emplace_back(n, layer.row_width());
    outputs_.emplace_back(n, layer.out_dim());
    grad_outputs_.emplace_back(n, layer.out_dim());
    grad_z_.emplace_back(n, layer.row_width());
    if (model.config().dropout > 0.0F) dropped_.emplace_back(n, layer.in_dim());
  }
}

ConstRows InMemoryExecutor::dropped_input(const Model& model, std::size_t l, std::uint32_t epoch, bool training) {
  const ConstRows input = layer_input(l);
  const float p = model.config().dropout;
  if (!training || p <= 0.0F) return input;
  const Rows out = dropped_[l].view();
  backend_.dropout(input, block_.src_gid.data(),
                   feature_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch), p, out);
  return out;
}

ConstRows InMemoryExecutor::kept_input(const Model& model, std::size_t l) const {
  return model.config().dropout > 0.0F ? ConstRows(dropped_[l].view()) : layer_input(l);
}

ConstRows InMemoryExecutor::forward(Model& model, std::uint32_t epoch, bool training) {
  const SparseBlockView block = block_.view();
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    Layer& layer = model.layer(l);
    layer.prepare();
    layer.transform(backend_, dropped_input(model, l, epoch, training), z_[l].view());
    const Rows out = outputs_[l].view();
    layer.aggregate(backend_, block, attention_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch),
                    training, z_[l].view(), out);
    backend_.bias_activation(out, layer.bias().value.data(), model.activation_after(l), out);
  }
  return outputs_.back().view();
}

void InMemoryExecutor::backward(Model& model, std::uint32_t epoch, ConstRows grad_logits) {
  const SparseBlockView block = block_.view();
  const std::size_t last = model.num_layers() - 1;
  std::copy(grad_logits.data, grad_logits.data + grad_logits.size(), grad_outputs_[last].data());
  for (std::size_t l = last + 1; l-- > 0;) {
    Layer& layer = model.layer(l);
    const Rows grad_y = grad_outputs_[l].view();
    backend_.activation_backward(model.activation_after(l), outputs_[l].view(), grad_y, grad_y);
    backend_.column_sums(grad_y, layer.bias().grad.data(), true);
    const Rows grad_z = grad_z_[l].view();
    layer.aggregate_backward(backend_, block,
                             attention_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch), true,
                             z_[l].view(), grad_y, grad_z, false);
    const Rows grad_x = l > 0 ? grad_outputs_[l - 1].view() : Rows{};
    layer.transform_backward(backend_, kept_input(model, l), grad_z, grad_x);
    if (l > 0 && model.config().dropout > 0.0F) {
      // Dropout's backward applies the same mask and scale to the gradient.
      backend_.dropout(grad_x, block_.src_gid.data(),
                       feature_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch),
                       model.config().dropout, grad_x);
    }
    layer.finish_backward();
  }
}

}  // namespace nj
