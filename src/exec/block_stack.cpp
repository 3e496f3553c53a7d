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

BlockStack::BlockStack(Backend& backend, const Model& model, std::vector<BlockPart> parts,
                       std::span<const gid_t> owned_gid, vid_t num_local, RowsAllocator& allocator,
                       BoundaryExchange& exchange)
    : backend_(backend), parts_(std::move(parts)), owned_gid_(owned_gid), exchange_(exchange) {
  const auto owned = static_cast<std::int64_t>(owned_gid.size());
  NJ_EXPECTS(owned == exchange.num_owned() && (num_local == owned || exchange.has_peers()),
             "{} owned of {} local rows, {} owned by the exchange", owned, num_local, exchange.num_owned());
  std::int64_t aggregated = 0;
  std::int64_t largest_scattered = 0;
  for (const BlockPart& part : parts_) {
    aggregated += part.block.num_dst;
    if (!part.destinations.empty()) largest_scattered = std::max<std::int64_t>(largest_scattered, part.block.num_dst);
  }
  NJ_EXPECTS(aggregated == owned, "the parts aggregate {} rows of {} owned", aggregated, owned);
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const Layer& layer = model.layer(l);
    z_.push_back(allocator.allocate(num_local, layer.row_width(), "transformed rows"));
    outputs_.push_back(allocator.allocate(owned, layer.out_dim(), "layer outputs"));
    grad_outputs_.push_back(allocator.allocate(owned, layer.out_dim(), "output gradients"));
    grad_z_.push_back(allocator.allocate(num_local, layer.row_width(), "transformed-row gradients"));
    dropped_.push_back(model.config().dropout > 0.0F ? allocator.allocate(owned, layer.in_dim(), "dropped inputs")
                                                     : Rows{});
    part_rows_.push_back(largest_scattered > 0 ? allocator.allocate(largest_scattered, layer.out_dim(), "part rows")
                                               : Rows{});
  }
  kept_.resize(model.num_layers());
}

ConstRows BlockStack::dropped_input(const Model& model, std::size_t l, std::uint32_t epoch, bool training) {
  const ConstRows input = layer_input(l);
  const float p = model.config().dropout;
  if (!training || p <= 0.0F) return input;
  backend_.dropout(input, owned_gid_.data(),
                   feature_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch), p, dropped_[l]);
  return dropped_[l];
}

void BlockStack::aggregate(const Model& model, std::size_t l, const BlockPart& part, std::uint32_t epoch,
                           bool training) {
  const bool in_place = part.destinations.empty();
  const Rows out = in_place ? outputs_[l] : part_rows_[l].slice(0, part.block.num_dst);
  model.layer(l).aggregate(backend_, part.block,
                           attention_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch), training,
                           z_[l], out);
  if (!in_place) backend_.copy_rows(out, nullptr, outputs_[l], part.destinations.data(), out.rows);
}

void BlockStack::aggregate_backward(const Model& model, std::size_t l, const BlockPart& part, std::uint32_t epoch) {
  ConstRows grad_y = grad_outputs_[l];
  if (!part.destinations.empty()) {
    const Rows gathered = part_rows_[l].slice(0, part.block.num_dst);
    backend_.copy_rows(grad_y, part.destinations.data(), gathered, nullptr, gathered.rows);
    grad_y = gathered;
  }
  // One part writes every row's gradient; several add theirs into rows zeroed first.
  model.layer(l).aggregate_backward(backend_, part.block,
                                    attention_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch),
                                    true, z_[l], grad_y, grad_z_[l], parts_.size() > 1);
}

ConstRows BlockStack::forward(Model& model, std::uint32_t epoch, bool training, ConstRows input) {
  NJ_EXPECTS(input.rows == outputs_[0].rows, "input has {} rows for {} owned", input.rows, outputs_[0].rows);
  input_ = input;
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    Layer& layer = model.layer(l);
    layer.prepare();
    kept_[l] = dropped_input(model, l, epoch, training);
    layer.transform(backend_, kept_[l], z_[l].slice(0, kept_[l].rows));
    // The parts that read no mirror aggregate while the mirrors' rows travel.
    exchange_.start_rows(static_cast<std::uint32_t>(l), z_[l]);
    for (const bool after_exchange : {false, true}) {
      if (after_exchange) exchange_.finish_rows(z_[l]);
      for (const BlockPart& part : parts_) {
        if (part.reads_mirrors == after_exchange) aggregate(model, l, part, epoch, training);
      }
    }
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
    if (parts_.size() > 1) backend_.zero_rows(grad_z_[l], nullptr, grad_z_[l].rows);
    // The parts that read mirrors first: the mirrors' gradients then travel home while the others run.
    for (const bool reading_mirrors : {true, false}) {
      for (const BlockPart& part : parts_) {
        if (part.reads_mirrors == reading_mirrors) aggregate_backward(model, l, part, epoch);
      }
      if (reading_mirrors) exchange_.start_gradients(static_cast<std::uint32_t>(l), grad_z_[l]);
    }
    const auto& boundary = exchange_.boundary_rows();
    Matrix sums(static_cast<std::int64_t>(boundary.size()), grad_z_[l].cols);
    exchange_.finish_gradients(sums.view());
    backend_.add_rows(sums.view(), nullptr, grad_z_[l], boundary.data(), sums.rows());
    const Rows grad_x = l > 0 ? grad_outputs_[l - 1] : Rows{};
    layer.transform_backward(backend_, kept_[l], grad_z_[l].slice(0, kept_[l].rows), grad_x);
    if (l > 0 && model.config().dropout > 0.0F) {
      // Dropout's backward applies the same mask and scale to the gradient.
      backend_.dropout(grad_x, owned_gid_.data(),
                       feature_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch),
                       model.config().dropout, grad_x);
    }
    layer.finish_backward();
  }
}

}  // namespace nj
