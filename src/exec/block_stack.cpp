#include "nj/exec/executor.hpp"

namespace nj {

RandomStream feature_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch) {
  return {config.seed, RandomPurpose::kFeatureDropout, layer, epoch};
}

RandomStream attention_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch) {
  return {config.seed, RandomPurpose::kAttentionDropout, layer, epoch};
}

Rows HostRowsAllocator::allocate(std::int64_t rows, std::int64_t cols, const char* /*what*/) {
  return buffers_.emplace_back(rows, cols).view();
}

BlockStack::BlockStack(Backend& backend, const Model& model, std::vector<SparseBlockView> blocks,
                       RowsAllocator& allocator, BoundaryExchange& exchange)
    : backend_(backend), blocks_(std::move(blocks)), exchange_(exchange) {
  NJ_EXPECTS(blocks_.size() == model.num_layers(), "{} blocks for {} layers", blocks_.size(), model.num_layers());
  for (std::size_t l = 0; l < blocks_.size(); ++l) {
    const Layer& layer = model.layer(l);
    const std::int64_t sources = blocks_[l].num_src;
    const std::int64_t destinations = blocks_[l].num_dst;
    NJ_EXPECTS(destinations == exchange.num_owned() && (sources == destinations || exchange.has_peers()),
               "layer {} aggregates {} of {} rows, with {} owned", l + 1, destinations, sources, exchange.num_owned());
    z_.push_back(allocator.allocate(sources, layer.row_width(), "transformed rows"));
    outputs_.push_back(allocator.allocate(destinations, layer.out_dim(), "layer outputs"));
    grad_outputs_.push_back(allocator.allocate(destinations, layer.out_dim(), "output gradients"));
    grad_z_.push_back(allocator.allocate(sources, layer.row_width(), "transformed-row gradients"));
    dropped_.push_back(
        model.config().dropout > 0.0F ? allocator.allocate(destinations, layer.in_dim(), "dropped inputs") : Rows{});
  }
  kept_.resize(blocks_.size());
}

std::int64_t BlockStack::rows_aggregated() const {
  std::int64_t rows = 0;
  for (const auto& block : blocks_) rows += block.num_dst;
  return rows;
}

ConstRows BlockStack::dropped_input(const Model& model, std::size_t l, std::uint32_t epoch, bool training) {
  const ConstRows input = layer_input(l);
  const float p = model.config().dropout;
  if (!training || p <= 0.0F) return input;
  backend_.dropout(input, blocks_[l].src_gid,
                   feature_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch), p, dropped_[l]);
  return dropped_[l];
}

ConstRows BlockStack::forward(Model& model, std::uint32_t epoch, bool training, ConstRows input) {
  NJ_EXPECTS(input.rows == blocks_[0].num_dst, "input has {} rows for {} destinations", input.rows, blocks_[0].num_dst);
  input_ = input;
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    Layer& layer = model.layer(l);
    layer.prepare();
    kept_[l] = dropped_input(model, l, epoch, training);
    layer.transform(backend_, kept_[l], z_[l].slice(0, kept_[l].rows));
    exchange_.start_rows(static_cast<std::uint32_t>(l), z_[l]);
    exchange_.finish_rows(z_[l]);
    layer.aggregate(backend_, blocks_[l],
                    attention_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch), training, z_[l],
                    outputs_[l]);
    backend_.bias_activation(outputs_[l], layer.bias().value.data(), model.activation_after(l), outputs_[l]);
  }
  return outputs_.back();
}

void BlockStack::backward(Model& model, std::uint32_t epoch, ConstRows grad_output) {
  const std::size_t last = model.num_layers() - 1;
  NJ_EXPECTS(grad_output.rows == grad_outputs_[last].rows && grad_output.cols == grad_outputs_[last].cols,
             "output gradient shape");
  std::copy(grad_output.data, grad_output.data + grad_output.size(), grad_outputs_[last].data);
  for (std::size_t l = last + 1; l-- > 0;) {
    Layer& layer = model.layer(l);
    const Rows grad_y = grad_outputs_[l];
    backend_.activation_backward(model.activation_after(l), outputs_[l], grad_y, grad_y);
    backend_.column_sums(grad_y, layer.bias().grad.data(), true);
    layer.aggregate_backward(backend_, blocks_[l],
                             attention_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch), true,
                             z_[l], grad_y, grad_z_[l], false);
    exchange_.start_gradients(static_cast<std::uint32_t>(l), grad_z_[l]);
    const auto& boundary = exchange_.boundary_rows();
    Matrix sums(static_cast<std::int64_t>(boundary.size()), grad_z_[l].cols);
    exchange_.finish_gradients(sums.view());
    backend_.add_rows(sums.view(), nullptr, grad_z_[l], boundary.data(), sums.rows());
    const Rows grad_x = l > 0 ? grad_outputs_[l - 1] : Rows{};
    layer.transform_backward(backend_, kept_[l], grad_z_[l].slice(0, kept_[l].rows), grad_x);
    if (l > 0 && model.config().dropout > 0.0F) {
      // Dropout's backward applies the same mask and scale to the gradient.
      backend_.dropout(grad_x, blocks_[l].src_gid,
                       feature_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch),
                       model.config().dropout, grad_x);
    }
    layer.finish_backward();
  }
}

}  // namespace nj
