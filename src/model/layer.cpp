#include "nj/model/layer.hpp"

namespace nj {

void Layer::transform(Backend& backend, ConstRows x, Rows z) const {
  const Matrix& w = effective_weight();
  NJ_EXPECTS(x.cols == w.rows() && z.cols == w.cols() && x.rows == z.rows, "transform shapes {}x{} · {}x{} -> {}x{}",
             x.rows, x.cols, w.rows(), w.cols(), z.rows, z.cols);
  backend.gemm(false, false, x.rows, w.cols(), x.cols, 1.0F, x.data, x.cols, w.data(), w.cols(), 0.0F, z.data, z.cols);
}

void Layer::transform_backward(Backend& backend, ConstRows x, ConstRows grad_z, Rows grad_x) {
  Matrix& grad_w = effective_weight_grad();
  const Matrix& w = effective_weight();
  NJ_EXPECTS(x.rows == grad_z.rows && x.cols == grad_w.rows() && grad_z.cols == grad_w.cols(),
             "transform_backward shapes");
  backend.gemm(true, false, x.cols, grad_z.cols, x.rows, 1.0F, x.data, x.cols, grad_z.data, grad_z.cols, 1.0F,
               grad_w.data(), grad_w.cols());
  if (grad_x.data != nullptr) {
    backend.gemm(false, true, grad_z.rows, w.rows(), grad_z.cols, 1.0F, grad_z.data, grad_z.cols, w.data(), w.cols(),
                 0.0F, grad_x.data, grad_x.cols);
  }
}

}  // namespace nj
