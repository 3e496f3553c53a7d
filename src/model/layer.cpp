#include "nj/model/layer.hpp"

namespace nj {

void Layer::transform(Backend& backend, ConstDeviceRows weight, ConstDeviceRows x, DeviceRows z) {
  backend.gemm(false, false, 1.0F, x, weight, 0.0F, z);
}

void Layer::sum_inputs(Backend& backend, const SparseBlockView& block, ConstDeviceRows x, DeviceRows sums) const {
  NJ_EXPECTS(aggregation().linear, "a layer whose aggregation is not linear states how it sums its inputs");
  // A linear aggregation draws nothing at random and is the same in training.
  aggregate(backend, block, RandomStream{}, false, x, sums);
}

void Layer::transform_backward(Backend& backend, ConstDeviceRows weight, DeviceRows weight_grad, ConstDeviceRows x,
                               ConstDeviceRows grad_z, DeviceRows grad_x) {
  backend.gemm(true, false, 1.0F, x, grad_z, 1.0F, weight_grad);
  if (!grad_x.empty()) backend.gemm(false, true, 1.0F, grad_z, weight, 0.0F, grad_x);
}

void Layer::transform(Backend& backend, ConstDeviceRows weight, const SparseBlockView& x, DeviceRows z) {
  backend.spmm(x, weight, z);
}

void Layer::transform_backward(Backend& backend, DeviceRows weight_grad, const SparseBlockView& x,
                               ConstDeviceRows grad_z) {
  backend.spmm_transpose(x, grad_z, weight_grad, true);
}

}  // namespace nj
