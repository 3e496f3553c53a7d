#pragma once
// What each layer's exchange between ranks carries: the narrower of the layer's inputs and its transformed rows.
//
// The exchange brings every rank the rows of its mirrors that the layer's aggregation reads. Those are the
// transformed rows Z = X·W, but a rank may as well receive the mirrors' inputs X and transform them itself: the
// weights are the same on every rank. Where X is narrower than Z (SAGE's Z holds both halves, 2·out wide; GAT's adds
// the attention scores), sending X moves fewer bytes. Backward, each rank then takes its mirrors' transform
// backward itself (their share of ∂W, summed over the ranks with the rest) and sends ∂L/∂X instead of ∂L/∂Z.
//
// For a layer past the first, X is the previous layer's output H before this layer's dropout: the receiver drops
// the mirrors' rows out itself (the masks follow global ids), and sends back the gradient after the previous layer's
// activation backward, ∂L/∂Y, which the owner adds to its own. A first layer that sums its inputs
// (aggregates_before_transform) already aggregates, and so exchanges, its dropped inputs, and no gradient of them
// returns; otherwise the first layer sends Z (its inputs, the features, take no gradient, and are usually wider).
#include <cstddef>
#include <cstdint>

#include "nj/model/model.hpp"

namespace nj {

enum class ExchangeSide : std::uint8_t {
  kTransformedRows,  // Z forward, ∂L/∂Z backward
  kInputs,           // X forward; backward ∂L/∂Y of the previous layer, or nothing for a first layer's inputs
};
const char* to_string(ExchangeSide side);  // "transformed rows", "inputs"

// The side layer l's exchange carries; first_layer_sums_inputs as Pass::first_layer_sums_inputs.
ExchangeSide exchange_side(const Model& model, std::size_t l, bool first_layer_sums_inputs);
// Whether layer l (past the first) receives its mirrors' inputs and transforms them itself.
bool transforms_mirrors(const Model& model, std::size_t l);
// Floats per row of layer l's exchange, in each direction (0: nothing travels backward).
std::int64_t exchanged_width(const Model& model, std::size_t l, bool first_layer_sums_inputs);
std::int64_t exchanged_gradient_width(const Model& model, std::size_t l, bool first_layer_sums_inputs);

}  // namespace nj
