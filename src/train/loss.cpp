#include "nj/train/loss.hpp"

#include <algorithm>
#include <vector>

#include "nj/kernels/row_math.hpp"

namespace nj {

double masked_softmax_cross_entropy(ConstRows logits, const std::int32_t* labels, const std::uint8_t* mask, float scale,
                                    Rows grad) {
  constexpr std::int64_t kBlockRows = 1024;
  const std::int64_t blocks = (logits.rows + kBlockRows - 1) / kBlockRows;
  std::vector<double> partial(static_cast<std::size_t>(blocks), 0.0);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t end = std::min(logits.rows, (blk + 1) * kBlockRows);
    for (std::int64_t r = blk * kBlockRows; r < end; ++r) {
      float* g = grad.row(r);
      if (mask[r] == 0) {
        std::fill(g, g + logits.cols, 0.0F);
        continue;
      }
      partial[static_cast<std::size_t>(blk)] +=
          rowmath::softmax_cross_entropy_row(logits.row(r), logits.cols, labels[r], scale, g);
    }
  }
  double total = 0.0;
  for (const double p : partial) total += p;
  return total;
}

}  // namespace nj
