// Compile-only check (no GPU is needed, nothing runs it): the row math that CPU loops and CUDA kernels share,
// the block view and random streams it reads, and the device views kernels take, compile as CUDA C++17 device
// code without warnings. CI compiles this wherever nvcc is found, so a header that stops compiling for the
// device fails the build.
#include "nj/device/device_view.hpp"
#include "nj/kernels/row_math.hpp"

namespace nj {

__global__ void spmm_rows(SparseBlockView block, ConstDeviceRows in, DeviceRows out) {
  const auto i = static_cast<vid_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < block.num_dst) rowmath::spmm_row(block, i, in.data, in.cols, out.row(i));
}

__global__ void gat_rows(SparseBlockView block, rowmath::GatShape shape, RandomStream attention, const float* z,
                         float* out) {
  const auto i = static_cast<vid_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < block.num_dst) rowmath::gat_forward_row(block, shape, attention, i, z, out + i * shape.output_width());
}

__global__ void loss_rows(const float* logits, std::int64_t rows, std::int64_t classes, const int* labels,
                          float scale, float* grad, float* loss) {
  const std::int64_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) loss[r] = rowmath::softmax_cross_entropy_row(logits + r * classes, classes, labels[r], scale,
                                                             grad + r * classes);
}

}  // namespace nj
