// nj's Adam against torch.optim.Adam: the parameters after each of four steps, one parameter with L2 weight decay
// and one without, with gradients that change every step and one far below eps. The reference values were
// computed by torch (scripts/reference/adam_reference.py), not by a second copy of nj's formula.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <span>

#include "nj/train/adam.hpp"

namespace nj {
namespace {

#include "adam_torch_reference.inc"

Parameter parameter(const char* name, std::array<std::int64_t, 2> shape, std::span<const float> values, bool decay) {
  Parameter p{name, Matrix(shape[0], shape[1]), Matrix(shape[0], shape[1]), decay};
  std::copy(values.begin(), values.end(), p.value.data());
  return p;
}

void expect_values(const Parameter& p, std::span<const float> expected, int step) {
  ASSERT_EQ(p.value.size(), static_cast<std::int64_t>(expected.size()));
  for (std::size_t k = 0; k < expected.size(); ++k) {
    // float32 on both sides, summed in a different order: a few units in the last place.
    EXPECT_NEAR(p.value.data()[k], expected[k], 2e-6F * std::max(1.0F, std::abs(expected[k])))
        << p.name << "[" << k << "] after step " << step;
  }
}

TEST(Adam, MatchesTorchWithBiasCorrectionEpsAndWeightDecay) {
  Parameter decayed = parameter("decayed", k_decayed_shape, k_decayed_initial, true);
  Parameter undecayed = parameter("undecayed", k_undecayed_shape, k_undecayed_initial, false);
  Adam adam({&decayed, &undecayed}, {.lr = kLr, .beta1 = kBeta1, .beta2 = kBeta2, .eps = kEps, .weight_decay = kDecay});
  for (int step = 0; step < kSteps; ++step) {
    adam.zero_grad();
    const auto s = static_cast<std::size_t>(step);
    std::copy(k_decayed_gradients[s].begin(), k_decayed_gradients[s].end(), decayed.grad.data());
    std::copy(k_undecayed_gradients[s].begin(), k_undecayed_gradients[s].end(), undecayed.grad.data());
    adam.step();
    expect_values(decayed, k_decayed_after[s], step + 1);
    expect_values(undecayed, k_undecayed_after[s], step + 1);
  }
  EXPECT_EQ(adam.steps(), kSteps);
}

}  // namespace
}  // namespace nj
