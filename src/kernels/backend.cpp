#include "nj/kernels/backend.hpp"

#include "nj/core/error.hpp"

namespace nj {

GemmShape gemm_shape(bool transpose_a, bool transpose_b, ConstDeviceRows a, ConstDeviceRows b, ConstDeviceRows c) {
  const std::int64_t m = transpose_a ? a.cols : a.rows;
  const std::int64_t k = transpose_a ? a.rows : a.cols;
  const std::int64_t n = transpose_b ? b.rows : b.cols;
  const std::int64_t b_rows = transpose_b ? b.cols : b.rows;
  NJ_EXPECTS(b_rows == k && c.rows == m && c.cols == n, "gemm shapes: op(A) {}x{}, op(B) {}x{}, C {}x{}", m, k, b_rows,
             n, c.rows, c.cols);
  return {m, n, k};
}

}  // namespace nj
