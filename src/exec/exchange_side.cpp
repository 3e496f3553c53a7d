#include "nj/exec/exchange_side.hpp"

namespace nj {

const char* to_string(ExchangeSide side) { return side == ExchangeSide::kInputs ? "inputs" : "transformed rows"; }

bool transforms_mirrors(const Model& model, std::size_t l) {
  const Layer& layer = model.layer(l);
  return l > 0 && layer.aggregation().reads_neighbours && layer.in_dim() < layer.row_width();
}

ExchangeSide exchange_side(const Model& model, std::size_t l, bool first_layer_sums_inputs) {
  const bool inputs = l == 0 ? first_layer_sums_inputs : transforms_mirrors(model, l);
  return inputs ? ExchangeSide::kInputs : ExchangeSide::kTransformedRows;
}

std::int64_t exchanged_width(const Model& model, std::size_t l, bool first_layer_sums_inputs) {
  const Layer& layer = model.layer(l);
  return exchange_side(model, l, first_layer_sums_inputs) == ExchangeSide::kInputs ? layer.in_dim() : layer.row_width();
}

std::int64_t exchanged_gradient_width(const Model& model, std::size_t l, bool first_layer_sums_inputs) {
  return l == 0 && first_layer_sums_inputs ? 0 : exchanged_width(model, l, first_layer_sums_inputs);
}

}  // namespace nj
