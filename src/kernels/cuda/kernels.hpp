#pragma once
// Launchers of the CUDA backend's kernels, each on `stream`. Every kernel is a grid over rows (or columns) that
// calls the shared row math (nj/kernels/row_math.hpp) for its row, so the CPU tests cover the arithmetic.
// Each returns the launch's status (cudaPeekAtLastError), which the caller checks with NJ_CUDA_TRY.
// C++17: nvcc compiles kernels.cu, which includes this.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "nj/core/philox.hpp"
#include "nj/device/device_view.hpp"
#include "nj/kernels/row_math.hpp"
#include "nj/kernels/sparse_block_view.hpp"

namespace nj::cuda_kernels {

cudaError_t spmm(cudaStream_t stream, const SparseBlockView& block, ConstDeviceRows in, DeviceRows out);
cudaError_t spmm_transpose(cudaStream_t stream, const SparseBlockView& block, ConstDeviceRows grad_out,
                           DeviceRows grad_in, bool accumulate);
cudaError_t rooted_sum(cudaStream_t stream, const SparseBlockView& block, const rowmath::RootedSum& sum,
                       ConstDeviceRows z, DeviceRows out);
cudaError_t rooted_sum_transpose(cudaStream_t stream, const SparseBlockView& block, const rowmath::RootedSum& sum,
                                 ConstDeviceRows grad_out, DeviceRows grad_z, bool accumulate);
cudaError_t gat_forward(cudaStream_t stream, const SparseBlockView& block, const rowmath::GatShape& shape,
                        const RandomStream& attention, ConstDeviceRows z, DeviceRows out);
// The three passes of GAT's backward; `workspace` is laid out as the CPU backend lays it out.
cudaError_t gat_backward(cudaStream_t stream, const SparseBlockView& block, const rowmath::GatShape& shape,
                         const RandomStream& attention, ConstDeviceRows z, ConstDeviceRows grad_out, DeviceRows grad_z,
                         bool accumulate, DeviceSpan<float> workspace);
cudaError_t dropout(cudaStream_t stream, ConstDeviceRows in, DeviceSpan<const gid_t> row_gid,
                    const RandomStream& random, float p, DeviceRows out);
cudaError_t dropout_entries(cudaStream_t stream, const SparseBlockView& x, DeviceSpan<const gid_t> row_gid,
                            const RandomStream& random, float p, DeviceSpan<float> weights,
                            DeviceSpan<float> out_weights);
cudaError_t bias_activation(cudaStream_t stream, ConstDeviceRows y, DeviceSpan<const float> bias,
                            rowmath::Activation act, DeviceRows h);
cudaError_t activation_backward(cudaStream_t stream, rowmath::Activation act, ConstDeviceRows h, ConstDeviceRows grad_h,
                                DeviceRows grad_y);
cudaError_t column_sums(cudaStream_t stream, ConstDeviceRows in, DeviceSpan<float> out, bool accumulate);
// dst row (dst_rows ? dst_rows[i] : i) (+)= src row (src_rows ? src_rows[i] : i), i < count.
cudaError_t move_rows(cudaStream_t stream, ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst,
                      DeviceSpan<const vid_t> dst_rows, std::int64_t count, bool accumulate);
cudaError_t zero_rows(cudaStream_t stream, DeviceRows dst, DeviceSpan<const vid_t> rows, std::int64_t count);
// Backend::expand_block: the out-edges are counted and placed with atomics, then each source's are sorted into edge
// order, so that the expansion does not depend on the order threads run in.
cudaError_t expand_block(cudaStream_t stream, const PackedBlockView& block, const ExpandedArrays& out, eid_t* cursor);
// out[i] = in[i] for i < count, for cuSPARSE, which wants its CSR offsets and column indices of one width.
cudaError_t narrow_offsets(cudaStream_t stream, const eid_t* in, std::int64_t count, std::int32_t* out);

}  // namespace nj::cuda_kernels
