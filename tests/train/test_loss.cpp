// The training loss, computed on the host: its gradient against central finite differences, masked rows, and
// a sum that does not depend on the thread count.
#include <gtest/gtest.h>
#include <omp.h>

#include <random>

#include "nj/train/loss.hpp"

namespace nj {
namespace {

Matrix random_logits(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  Matrix m(rows, cols);
  for (auto& x : m.span()) x = normal(rng);
  return m;
}

TEST(Loss, GradientMatchesFiniteDifferencesAndMaskedRowsGetNone) {
  Matrix logits = random_logits(6, 4, 12);
  const std::vector<std::int32_t> labels = {0, 3, 1, 2, 2, 1};
  const std::vector<std::uint8_t> mask = {1, 0, 1, 1, 0, 1};
  Matrix grad(6, 4);
  Matrix scratch(6, 4);
  masked_softmax_cross_entropy(logits.view(), labels.data(), mask.data(), 0.25F, grad.view());
  const float eps = 1e-2F;
  for (std::int64_t k = 0; k < logits.size(); ++k) {
    const float saved = logits.data()[k];
    logits.data()[k] = saved + eps;
    const double up = masked_softmax_cross_entropy(logits.view(), labels.data(), mask.data(), 1.0F, scratch.view());
    logits.data()[k] = saved - eps;
    const double down = masked_softmax_cross_entropy(logits.view(), labels.data(), mask.data(), 1.0F, scratch.view());
    logits.data()[k] = saved;
    const double numeric = 0.25 * (up - down) / (2.0 * eps);
    EXPECT_NEAR(grad.data()[k], numeric, 1e-3 + 2e-2 * std::abs(numeric)) << "element " << k;
  }
  for (std::int64_t c = 0; c < 4; ++c) {
    EXPECT_EQ(grad(1, c), 0.0F);
    EXPECT_EQ(grad(4, c), 0.0F);
  }
}

TEST(Loss, SumDoesNotDependOnTheThreadCount) {
  // More rows than one reduction block, so that several threads take part.
  const Matrix logits = random_logits(5000, 7, 3);
  std::vector<std::int32_t> labels(5000);
  std::vector<std::uint8_t> mask(5000);
  for (std::size_t r = 0; r < labels.size(); ++r) {
    labels[r] = static_cast<std::int32_t>(r % 7);
    mask[r] = r % 3 == 0 ? 0 : 1;
  }
  Matrix grad(5000, 7);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = masked_softmax_cross_entropy(logits.view(), labels.data(), mask.data(), 1.0F, grad.view());
  omp_set_num_threads(4);
  const double four = masked_softmax_cross_entropy(logits.view(), labels.data(), mask.data(), 1.0F, grad.view());
  omp_set_num_threads(threads);
  EXPECT_EQ(one, four);
  EXPECT_GT(one, 0.0);
}

}  // namespace
}  // namespace nj
