#pragma once
// The training loss, on the host where the logits are: they are few (one row per owned vertex, one column per
// class), and its row math is the one device kernels use.
#include <cstdint>

#include "nj/core/matrix.hpp"

namespace nj {

// Softmax cross-entropy over the rows whose mask is set: writes scale·(softmax − onehot) into grad for those
// rows (0 elsewhere) and returns the sum of their losses, the same for every thread count.
double masked_softmax_cross_entropy(ConstRows logits, const std::int32_t* labels, const std::uint8_t* mask, float scale,
                                    Rows grad);

}  // namespace nj
