#include "kernels/cuda/kernels.hpp"

namespace nj::cuda_kernels {
namespace {

constexpr int kThreads = 128;

// Threads for `work` items, one each; a grid-stride loop covers what one launch's grid cannot.
unsigned blocks_for(std::int64_t work) {
  constexpr std::int64_t kMaxBlocks = 65535;
  const std::int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

__device__ std::int64_t first_item() { return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ std::int64_t item_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// Row kernels run a warp a row: the lanes split the row's columns (rowmath::LaneColumns), so that a warp's loads
// of a gathered row are one coalesced transaction instead of 32 threads each walking a row of its own.
constexpr int kWarp = static_cast<int>(rowmath::LaneColumns::kStep);
unsigned warp_blocks_for(std::int64_t rows) { return blocks_for(rows * kWarp); }
__device__ std::int64_t first_row() { return first_item() / kWarp; }
__device__ std::int64_t row_stride() { return item_stride() / kWarp; }
__device__ rowmath::LaneColumns lane_columns() { return {static_cast<std::int64_t>(threadIdx.x % kWarp)}; }

__global__ void spmm_kernel(SparseBlockView b, ConstDeviceRows in, DeviceRows out) {
  for (std::int64_t i = first_row(); i < b.num_dst; i += row_stride()) {
    rowmath::spmm_row(b, static_cast<vid_t>(i), in.data, in.cols, out.row(i), lane_columns());
  }
}

__global__ void spmm_transpose_kernel(SparseBlockView b, ConstDeviceRows grad_out, DeviceRows grad_in,
                                      bool accumulate) {
  for (std::int64_t j = first_row(); j < b.num_src; j += row_stride()) {
    const auto source = static_cast<vid_t>(j);
    rowmath::spmm_transpose_row(b, source, grad_out.data, grad_out.cols, grad_in.row(b.gradient_row_of(source)),
                                accumulate, lane_columns());
  }
}

__global__ void rooted_sum_kernel(SparseBlockView b, rowmath::RootedSum sum, ConstDeviceRows z, DeviceRows out) {
  for (std::int64_t i = first_row(); i < b.num_dst; i += row_stride()) {
    rowmath::rooted_sum_row(b, sum, static_cast<vid_t>(i), z.data, z.cols, out.row(i), lane_columns());
  }
}

__global__ void rooted_sum_transpose_kernel(SparseBlockView b, rowmath::RootedSum sum, ConstDeviceRows grad_out,
                                            DeviceRows grad_z, bool accumulate) {
  for (std::int64_t j = first_row(); j < b.num_src; j += row_stride()) {
    const auto source = static_cast<vid_t>(j);
    rowmath::rooted_sum_transpose_row(b, sum, source, grad_out.data, grad_z.row(b.gradient_row_of(source)), grad_z.cols,
                                      accumulate, lane_columns());
  }
}

// Every lane computes the destination's attention (its loads of the scores are broadcast) and its own columns.
__global__ void gat_forward_kernel(SparseBlockView b, rowmath::GatShape shape, RandomStream attention,
                                   ConstDeviceRows z, DeviceRows out) {
  for (std::int64_t i = first_row(); i < b.num_dst; i += row_stride()) {
    rowmath::gat_forward_row(b, shape, attention, static_cast<vid_t>(i), z.data, out.row(i), lane_columns());
  }
}

// gat_backward's workspace: per edge its heads' coefficients and score gradients, then per destination its
// heads' score gradients (rowmath::gat_backward_workspace_floats).
struct GatWorkspace {
  float* edge;
  float* dst_score_grad;
};

// The destination pass writes per-edge values only (no row of features): a thread a destination.
__global__ void gat_backward_dst_kernel(SparseBlockView b, rowmath::GatShape shape, RandomStream attention,
                                        ConstDeviceRows z, ConstDeviceRows grad_out, GatWorkspace w) {
  for (std::int64_t i = first_item(); i < b.num_dst; i += item_stride()) {
    rowmath::gat_backward_row(b, shape, attention, static_cast<vid_t>(i), z.data, grad_out.row(i), w.edge,
                              w.dst_score_grad + i * shape.heads);
  }
}

__global__ void gat_backward_src_kernel(SparseBlockView b, rowmath::GatShape shape, ConstDeviceRows grad_out,
                                        DeviceRows grad_z, bool accumulate, GatWorkspace w) {
  for (std::int64_t j = first_row(); j < b.num_src; j += row_stride()) {
    const auto source = static_cast<vid_t>(j);
    // Destinations are the first sources: each adds its own score gradient after its out-edges.
    const float* own = j < b.num_dst ? w.dst_score_grad + j * shape.heads : nullptr;
    rowmath::gat_backward_source_row(b, shape, source, w.edge, own, grad_out.data,
                                     grad_z.row(b.gradient_row_of(source)), accumulate, lane_columns());
  }
}

__global__ void dropout_kernel(ConstDeviceRows in, const gid_t* row_gid, RandomStream random, float p, DeviceRows out) {
  for (std::int64_t k = first_item(); k < in.size(); k += item_stride()) {
    const std::int64_t r = k / in.cols;
    const std::int64_t c = k % in.cols;
    out.row(r)[c] = rowmath::dropout_element(random, row_gid[r], c, p, in.row(r)[c]);
  }
}

__global__ void dropout_row_entries_kernel(SparseBlockView x, const gid_t* row_gid, RandomStream random, float p,
                                           float* weights) {
  for (std::int64_t i = first_item(); i < x.num_dst; i += item_stride()) {
    rowmath::dropout_row_entries(x, static_cast<vid_t>(i), row_gid, random, p, weights);
  }
}

__global__ void dropout_column_entries_kernel(SparseBlockView x, const gid_t* row_gid, RandomStream random, float p,
                                              float* out_weights) {
  for (std::int64_t j = first_item(); j < x.num_src; j += item_stride()) {
    rowmath::dropout_column_entries(x, static_cast<vid_t>(j), row_gid, random, p, out_weights);
  }
}

__global__ void bias_activation_kernel(ConstDeviceRows y, const float* bias, rowmath::Activation act, DeviceRows h) {
  for (std::int64_t k = first_item(); k < y.size(); k += item_stride()) {
    const std::int64_t c = k % y.cols;
    h.data[k] = rowmath::bias_activation_element(act, y.data[k], bias != nullptr ? bias[c] : 0.0F);
  }
}

__global__ void activation_backward_kernel(rowmath::Activation act, ConstDeviceRows h, ConstDeviceRows grad_h,
                                           DeviceRows grad_y) {
  for (std::int64_t k = first_item(); k < h.size(); k += item_stride()) {
    grad_y.data[k] = rowmath::activation_backward_element(act, h.data[k], grad_h.data[k]);
  }
}

// Column sums in rowmath::column_sum's order (the block sums of kColumnSumBlockRows rows, added in block order),
// with the blocks summed in parallel: a thread block takes 32 columns; its 32 rows of threads sum 32 row blocks at
// a time into shared memory, and the first row adds them to each column's total in order.
constexpr int kSumColumns = 32;
constexpr int kSumBlocks = 32;
__global__ void column_sums_kernel(ConstDeviceRows in, float* out, bool accumulate) {
  __shared__ float partial[kSumBlocks][kSumColumns];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kSumColumns + threadIdx.x;
  const bool column = c < in.cols;
  float total = column && accumulate ? out[c] : 0.0F;
  for (std::int64_t round = 0; round * kSumBlocks * rowmath::kColumnSumBlockRows < in.rows; ++round) {
    const std::int64_t first = (round * kSumBlocks + threadIdx.y) * rowmath::kColumnSumBlockRows;
    const std::int64_t end =
        first + rowmath::kColumnSumBlockRows < in.rows ? first + rowmath::kColumnSumBlockRows : in.rows;
    partial[threadIdx.y][threadIdx.x] =
        column && first < in.rows ? rowmath::column_block_sum(in.data, in.cols, first, end, c) : 0.0F;
    __syncthreads();
    if (threadIdx.y == 0) {
      for (int k = 0; k < kSumBlocks && (round * kSumBlocks + k) * rowmath::kColumnSumBlockRows < in.rows; ++k) {
        total += partial[k][threadIdx.x];
      }
    }
    __syncthreads();
  }
  if (column && threadIdx.y == 0) out[c] = total;
}

__global__ void move_rows_kernel(ConstDeviceRows src, const vid_t* src_rows, DeviceRows dst, const vid_t* dst_rows,
                                 std::int64_t count, bool accumulate) {
  for (std::int64_t i = first_row(); i < count; i += row_stride()) {
    rowmath::move_row(src.row(src_rows != nullptr ? src_rows[i] : i), dst.row(dst_rows != nullptr ? dst_rows[i] : i),
                      src.cols, accumulate, lane_columns());
  }
}

__global__ void zero_rows_kernel(DeviceRows dst, const vid_t* rows, std::int64_t count) {
  for (std::int64_t i = first_row(); i < count; i += row_stride()) {
    rowmath::zero_row(dst.row(rows != nullptr ? rows[i] : i), dst.cols, lane_columns());
  }
}

__global__ void expand_in_edges_kernel(PackedBlockView b, ExpandedArrays out) {
  for (std::int64_t i = first_item(); i < b.num_dst; i += item_stride()) {
    rowmath::expand_in_edges(b, static_cast<vid_t>(i), out);
  }
}

__global__ void count_out_edges_kernel(PackedBlockView b, eid_t* offsets) {
  for (std::int64_t e = first_item(); e < b.edges; e += item_stride()) {
    atomicAdd(reinterpret_cast<unsigned long long*>(offsets + b.source(e) + 1), 1ULL);
  }
}

// offsets[1..count] summed in place, and cursor[j] = offsets[j]: one block, each thread summing a run of its own.
__global__ void offsets_from_counts_kernel(eid_t* offsets, std::int64_t count, eid_t* cursor) {
  __shared__ eid_t run_total[kThreads];
  const std::int64_t per_thread = (count + kThreads - 1) / kThreads;
  const std::int64_t first = 1 + threadIdx.x * per_thread;
  const std::int64_t last = first + per_thread < count + 1 ? first + per_thread : count + 1;
  eid_t sum = 0;
  for (std::int64_t j = first; j < last; ++j) sum += offsets[j];
  run_total[threadIdx.x] = sum;
  __syncthreads();
  eid_t before = 0;
  for (unsigned t = 0; t < threadIdx.x; ++t) before += run_total[t];
  for (std::int64_t j = first; j < last; ++j) {
    before += offsets[j];
    offsets[j] = before;
  }
  __syncthreads();
  for (std::int64_t j = threadIdx.x; j < count; j += kThreads) cursor[j] = offsets[j];
}

__global__ void place_out_edges_kernel(PackedBlockView b, eid_t* cursor, eid_t* out_edge) {
  for (std::int64_t i = first_item(); i < b.num_dst; i += item_stride()) {
    for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
      const auto k = atomicAdd(reinterpret_cast<unsigned long long*>(cursor + b.source(e)), 1ULL);
      out_edge[k] = e;
    }
  }
}

// Each source's out-edges into edge order: a heap sort in place, one thread a source.
__global__ void sort_out_edges_kernel(const eid_t* offsets, vid_t sources, eid_t* out_edge) {
  for (std::int64_t s = first_item(); s < sources; s += item_stride()) {
    eid_t* list = out_edge + offsets[s];
    const eid_t n = offsets[s + 1] - offsets[s];
    const auto sift_down = [list](eid_t root, eid_t end) {
      while (2 * root + 1 < end) {
        eid_t child = 2 * root + 1;
        if (child + 1 < end && list[child] < list[child + 1]) ++child;
        if (list[root] >= list[child]) return;
        const eid_t held = list[root];
        list[root] = list[child];
        list[child] = held;
        root = child;
      }
    };
    for (eid_t start = n / 2; start-- > 0;) sift_down(start, n);
    for (eid_t end = n; end-- > 1;) {
      const eid_t held = list[0];
      list[0] = list[end];
      list[end] = held;
      sift_down(0, end);
    }
  }
}

// The rest of out-edge k once out_edge holds its in-edge: the destination (the in-edge's CSR row) and the weight.
__global__ void finish_out_edges_kernel(PackedBlockView b, ExpandedArrays out) {
  for (std::int64_t k = first_item(); k < b.edges; k += item_stride()) {
    const eid_t e = out.out_edge[k];
    vid_t low = 0;
    vid_t high = b.num_dst;  // the destination i has dst_offsets[i] <= e < dst_offsets[i + 1]
    while (high - low > 1) {
      const vid_t mid = low + (high - low) / 2;
      (b.dst_offsets[mid] <= e ? low : high) = mid;
    }
    rowmath::place_out_edge(b, k, e, low, out);
  }
}

__global__ void narrow_offsets_kernel(const eid_t* in, std::int64_t count, std::int32_t* out) {
  for (std::int64_t i = first_item(); i < count; i += item_stride()) out[i] = static_cast<std::int32_t>(in[i]);
}

}  // namespace

cudaError_t spmm(cudaStream_t stream, const SparseBlockView& block, ConstDeviceRows in, DeviceRows out) {
  spmm_kernel<<<warp_blocks_for(block.num_dst), kThreads, 0, stream>>>(block, in, out);
  return cudaPeekAtLastError();
}

cudaError_t spmm_transpose(cudaStream_t stream, const SparseBlockView& block, ConstDeviceRows grad_out,
                           DeviceRows grad_in, bool accumulate) {
  spmm_transpose_kernel<<<warp_blocks_for(block.num_src), kThreads, 0, stream>>>(block, grad_out, grad_in, accumulate);
  return cudaPeekAtLastError();
}

cudaError_t rooted_sum(cudaStream_t stream, const SparseBlockView& block, const rowmath::RootedSum& sum,
                       ConstDeviceRows z, DeviceRows out) {
  rooted_sum_kernel<<<warp_blocks_for(block.num_dst), kThreads, 0, stream>>>(block, sum, z, out);
  return cudaPeekAtLastError();
}

cudaError_t rooted_sum_transpose(cudaStream_t stream, const SparseBlockView& block, const rowmath::RootedSum& sum,
                                 ConstDeviceRows grad_out, DeviceRows grad_z, bool accumulate) {
  rooted_sum_transpose_kernel<<<warp_blocks_for(block.num_src), kThreads, 0, stream>>>(block, sum, grad_out, grad_z,
                                                                                       accumulate);
  return cudaPeekAtLastError();
}

cudaError_t gat_forward(cudaStream_t stream, const SparseBlockView& block, const rowmath::GatShape& shape,
                        const RandomStream& attention, ConstDeviceRows z, DeviceRows out) {
  gat_forward_kernel<<<warp_blocks_for(block.num_dst), kThreads, 0, stream>>>(block, shape, attention, z, out);
  return cudaPeekAtLastError();
}

cudaError_t gat_backward(cudaStream_t stream, const SparseBlockView& block, const rowmath::GatShape& shape,
                         const RandomStream& attention, ConstDeviceRows z, ConstDeviceRows grad_out, DeviceRows grad_z,
                         bool accumulate, DeviceSpan<float> workspace) {
  const GatWorkspace w{workspace.data,
                       workspace.data + rowmath::gat_dst_score_grad_offset(block.num_edges(), shape.heads)};
  gat_backward_dst_kernel<<<blocks_for(block.num_dst), kThreads, 0, stream>>>(block, shape, attention, z, grad_out, w);
  gat_backward_src_kernel<<<warp_blocks_for(block.num_src), kThreads, 0, stream>>>(block, shape, grad_out, grad_z,
                                                                                   accumulate, w);
  return cudaPeekAtLastError();
}

cudaError_t dropout(cudaStream_t stream, ConstDeviceRows in, DeviceSpan<const gid_t> row_gid,
                    const RandomStream& random, float p, DeviceRows out) {
  dropout_kernel<<<blocks_for(in.size()), kThreads, 0, stream>>>(in, row_gid.data, random, p, out);
  return cudaPeekAtLastError();
}

cudaError_t dropout_entries(cudaStream_t stream, const SparseBlockView& x, DeviceSpan<const gid_t> row_gid,
                            const RandomStream& random, float p, DeviceSpan<float> weights,
                            DeviceSpan<float> out_weights) {
  if (!weights.empty() && x.num_dst > 0) {
    dropout_row_entries_kernel<<<blocks_for(x.num_dst), kThreads, 0, stream>>>(x, row_gid.data, random, p,
                                                                               weights.data);
  }
  if (!out_weights.empty() && x.num_src > 0) {
    dropout_column_entries_kernel<<<blocks_for(x.num_src), kThreads, 0, stream>>>(x, row_gid.data, random, p,
                                                                                  out_weights.data);
  }
  return cudaPeekAtLastError();
}

cudaError_t bias_activation(cudaStream_t stream, ConstDeviceRows y, DeviceSpan<const float> bias,
                            rowmath::Activation act, DeviceRows h) {
  bias_activation_kernel<<<blocks_for(y.size()), kThreads, 0, stream>>>(y, bias.data, act, h);
  return cudaPeekAtLastError();
}

cudaError_t activation_backward(cudaStream_t stream, rowmath::Activation act, ConstDeviceRows h, ConstDeviceRows grad_h,
                                DeviceRows grad_y) {
  activation_backward_kernel<<<blocks_for(h.size()), kThreads, 0, stream>>>(act, h, grad_h, grad_y);
  return cudaPeekAtLastError();
}

cudaError_t column_sums(cudaStream_t stream, ConstDeviceRows in, DeviceSpan<float> out, bool accumulate) {
  if (in.cols == 0) return cudaSuccess;
  const auto tiles = static_cast<unsigned>((in.cols + kSumColumns - 1) / kSumColumns);
  column_sums_kernel<<<tiles, dim3(kSumColumns, kSumBlocks), 0, stream>>>(in, out.data, accumulate);
  return cudaPeekAtLastError();
}

cudaError_t move_rows(cudaStream_t stream, ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst,
                      DeviceSpan<const vid_t> dst_rows, std::int64_t count, bool accumulate) {
  if (count == 0) return cudaSuccess;
  move_rows_kernel<<<warp_blocks_for(count), kThreads, 0, stream>>>(src, src_rows.data, dst, dst_rows.data, count,
                                                                    accumulate);
  return cudaPeekAtLastError();
}

cudaError_t narrow_offsets(cudaStream_t stream, const eid_t* in, std::int64_t count, std::int32_t* out) {
  narrow_offsets_kernel<<<blocks_for(count), kThreads, 0, stream>>>(in, count, out);
  return cudaPeekAtLastError();
}

cudaError_t expand_block(cudaStream_t stream, const PackedBlockView& block, const ExpandedArrays& out, eid_t* cursor) {
  if (block.num_dst > 0 && (out.src_index != nullptr || out.edge_weight != nullptr)) {
    expand_in_edges_kernel<<<blocks_for(block.num_dst), kThreads, 0, stream>>>(block, out);
  }
  if (out.src_offsets == nullptr) return cudaPeekAtLastError();
  const auto offset_bytes = static_cast<std::size_t>(block.num_src + 1) * sizeof(eid_t);
  if (const cudaError_t status = cudaMemsetAsync(out.src_offsets, 0, offset_bytes, stream); status != cudaSuccess) {
    return status;
  }
  if (block.edges > 0) count_out_edges_kernel<<<blocks_for(block.edges), kThreads, 0, stream>>>(block, out.src_offsets);
  offsets_from_counts_kernel<<<1, kThreads, 0, stream>>>(out.src_offsets, block.num_src, cursor);
  if (block.edges == 0) return cudaPeekAtLastError();
  place_out_edges_kernel<<<blocks_for(block.num_dst), kThreads, 0, stream>>>(block, cursor, out.out_edge);
  sort_out_edges_kernel<<<blocks_for(block.num_src), kThreads, 0, stream>>>(out.src_offsets, block.num_src,
                                                                            out.out_edge);
  finish_out_edges_kernel<<<blocks_for(block.edges), kThreads, 0, stream>>>(block, out);
  return cudaPeekAtLastError();
}

cudaError_t zero_rows(cudaStream_t stream, DeviceRows dst, DeviceSpan<const vid_t> rows, std::int64_t count) {
  if (count == 0) return cudaSuccess;
  zero_rows_kernel<<<warp_blocks_for(count), kThreads, 0, stream>>>(dst, rows.data, count);
  return cudaPeekAtLastError();
}

}  // namespace nj::cuda_kernels
