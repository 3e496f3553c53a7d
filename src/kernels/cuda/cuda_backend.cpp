// The CUDA backend: cuBLAS for GEMM, cuSPARSE for GCN's aggregation and its backward, and kernels over the
// shared row math for the rest (kernels/cuda/kernels.cu). Everything runs on the device's compute stream.
//
// Deterministic mode runs the aggregation with the row-math kernels too: each destination row summed by one
// thread in edge order, as the CPU backend does, so a run repeats bit for bit. Without it cuSPARSE's SpMM runs
// where the block allows (weighted edges, sources in consecutive rows); a configuration cuSPARSE reports it does
// not support falls back to the row kernels, once, with a warning.
#include <spdlog/spdlog.h>

#include <cstdint>

#include "kernels/cuda/kernels.hpp"
#include "nj/device/cuda_check.hpp"
#include "nj/device/cuda_handle.hpp"
#include "nj/device/cuda_native.hpp"
#include "nj/kernels/backend.hpp"
#include "nj/kernels/cuda_libraries.hpp"

namespace nj {
namespace {

// A CSR matrix description for cuSPARSE (32-bit offsets and column indices: it supports no mix of widths),
// destroyed with the object. `status()` says whether cuSPARSE took it.
class CsrDescription {
 public:
  CsrDescription(std::int64_t rows, std::int64_t cols, std::int64_t nonzeros, const std::int32_t* offsets,
                 const vid_t* columns, const float* values)
      : status_(cuda_libraries().sparse_create_csr(
            &description_, rows, cols, nonzeros,
            // cuSPARSE's descriptors are not const-correct; SpMM does not write through them.
            const_cast<std::int32_t*>(offsets),  // NOLINT(cppcoreguidelines-pro-type-const-cast)
            const_cast<vid_t*>(columns),         // NOLINT(cppcoreguidelines-pro-type-const-cast)
            const_cast<float*>(values),          // NOLINT(cppcoreguidelines-pro-type-const-cast)
            CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F)) {}
  CsrDescription(const CsrDescription&) = delete;
  CsrDescription& operator=(const CsrDescription&) = delete;
  ~CsrDescription() {
    if (status_ == CUSPARSE_STATUS_SUCCESS) NJ_CUDA_TRY_NO_THROW(cuda_libraries().sparse_destroy_csr(description_));
  }
  cusparseStatus_t status() const { return status_; }
  cusparseSpMatDescr_t get() const { return description_; }

 private:
  cusparseSpMatDescr_t description_ = nullptr;
  cusparseStatus_t status_;
};

// Row-major dense rows for cuSPARSE.
class DenseDescription {
 public:
  DenseDescription(std::int64_t rows, std::int64_t cols, const float* values) {
    NJ_CUDA_TRY(cuda_libraries().sparse_create_dense(
        &description_, rows, cols, cols,
        const_cast<float*>(values),  // NOLINT(cppcoreguidelines-pro-type-const-cast)
        CUDA_R_32F, CUSPARSE_ORDER_ROW));
  }
  DenseDescription(const DenseDescription&) = delete;
  DenseDescription& operator=(const DenseDescription&) = delete;
  ~DenseDescription() { NJ_CUDA_TRY_NO_THROW(cuda_libraries().sparse_destroy_dense(description_)); }
  cusparseDnMatDescr_t get() const { return description_; }

 private:
  cusparseDnMatDescr_t description_ = nullptr;
};

cublasStatus_t destroy_blas(cublasHandle_t handle) { return cuda_libraries().blas_destroy(handle); }
cusparseStatus_t destroy_sparse(cusparseHandle_t handle) { return cuda_libraries().sparse_destroy(handle); }
using BlasHandle = CudaHandle<cublasHandle_t, destroy_blas>;
using SparseHandle = CudaHandle<cusparseHandle_t, destroy_sparse>;

// This backend's transposes gather over a block's out-edges: a packed block reaches them expanded
// (LibraryMemory::reads_packed_blocks is false here).
void expect_out_edges(const SparseBlockView& block, std::string_view kernel) {
  NJ_EXPECTS(block.has_out_edges(), "{} on the CUDA backend reads a block's out-edges, and this block has none",
             kernel);
}

class CudaBackend final : public Backend {
 public:
  // The libraries' workspaces are the memory the device keeps beside its arena for them (cuda_library_memory),
  // not cudaMallocs of their own: cuBLAS's through cublasSetWorkspace, cuSPARSE's as the buffer each SpMM is handed.
  CudaBackend(Device& device, bool deterministic)
      : libraries_(cuda_libraries()),
        device_(device),
        ordinal_(native_ordinal(device)),
        stream_(native_stream(device, Stream::kCompute)),
        library_(cuda_library_memory(deterministic)),
        use_sparse_library_(!deterministic),
        workspace_(native_library_workspace(device)) {
    NJ_EXPECTS(workspace_.size >= library_.workspace_bytes,
               "the device keeps {} bytes for the libraries' workspaces, which need {}", workspace_.size,
               library_.workspace_bytes);
    NJ_CUDA_TRY(cudaSetDevice(ordinal_));
    cublasHandle_t blas = nullptr;
    NJ_CUDA_TRY(libraries_.blas_create(&blas));
    blas_.reset(blas);
    NJ_CUDA_TRY(libraries_.blas_set_stream(blas, stream_));
    NJ_CUDA_TRY(libraries_.blas_set_workspace(blas, workspace_.data, static_cast<std::size_t>(kCublasWorkspaceBytes)));
    cusparseHandle_t sparse = nullptr;
    NJ_CUDA_TRY(libraries_.sparse_create(&sparse));
    sparse_.reset(sparse);
    NJ_CUDA_TRY(libraries_.sparse_set_stream(sparse, stream_));
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  // The libraries' handles go with the members, after the kernels that may use them are done.
  ~CudaBackend() override { NJ_CUDA_TRY_NO_THROW(cudaStreamSynchronize(stream_)); }

  std::string_view name() const override { return "cuda"; }
  LibraryMemory library_memory() const override { return library_; }

  void gemm(bool transpose_a, bool transpose_b, float alpha, ConstDeviceRows a, ConstDeviceRows b, float beta,
            DeviceRows c) override {
    const auto [m, n, k] = gemm_shape(transpose_a, transpose_b, a, b, c);
    if (m == 0 || n == 0) return;
    // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: the same buffers, the operands swapped.
    NJ_CUDA_TRY(libraries_.blas_sgemm(blas_.get(), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                      static_cast<int>(k), &alpha, b.data, static_cast<int>(b.cols), a.data,
                                      static_cast<int>(a.cols), &beta, c.data, static_cast<int>(c.cols)));
  }

  void spmm(const SparseBlockView& block, ConstDeviceRows in, DeviceRows out) override {
    expect_spmm_shapes(block, in, out);
    if (sparse_library_takes(block, false) &&
        sparse_library_spmm(block, false, block.num_dst, block.num_src, block.dst_offsets, block.src_index,
                            block.edge_weight, in.data, out, 0.0F)) {
      return;
    }
    NJ_CUDA_TRY(cuda_kernels::spmm(stream_, block, in, out));
  }

  void spmm_transpose(const SparseBlockView& block, ConstDeviceRows grad_out, DeviceRows grad_in,
                      bool accumulate) override {
    expect_spmm_shapes(block, grad_in, grad_out);
    expect_out_edges(block, "spmm_transpose");
    // The out-edge arrays are the transpose's CSR: rows are sources, columns destinations.
    if (sparse_library_takes(block, true) &&
        sparse_library_spmm(block, true, block.num_src, block.num_dst, block.src_offsets, block.out_dst,
                            block.out_weight, grad_out.data, grad_in.slice(0, block.num_src),
                            accumulate ? 1.0F : 0.0F)) {
      return;
    }
    NJ_CUDA_TRY(cuda_kernels::spmm_transpose(stream_, block, grad_out, grad_in, accumulate));
  }

  void rooted_sum(const SparseBlockView& block, const RootedSum& sum, ConstDeviceRows z, DeviceRows out) override {
    expect_rooted_sum_shapes(block, sum, z, out);
    NJ_CUDA_TRY(cuda_kernels::rooted_sum(stream_, block, sum, z, out));
  }

  void rooted_sum_transpose(const SparseBlockView& block, const RootedSum& sum, ConstDeviceRows grad_out,
                            DeviceRows grad_z, bool accumulate) override {
    expect_rooted_sum_shapes(block, sum, grad_z, grad_out);
    if (sum.reads_neighbours) expect_out_edges(block, "rooted_sum_transpose");
    NJ_CUDA_TRY(cuda_kernels::rooted_sum_transpose(stream_, block, sum, grad_out, grad_z, accumulate));
  }

  void gat_forward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                   ConstDeviceRows z, DeviceRows out) override {
    expect_gat_shapes(block, shape, z, out);
    NJ_CUDA_TRY(cuda_kernels::gat_forward(stream_, block, shape, attention, z, out));
  }

  void gat_backward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                    ConstDeviceRows z, ConstDeviceRows grad_out, DeviceRows grad_z, bool accumulate,
                    DeviceSpan<float> workspace) override {
    expect_gat_shapes(block, shape, grad_z, grad_out);
    NJ_EXPECTS(workspace.size >= rowmath::gat_backward_workspace_floats(block.num_dst, block.edges, shape.heads),
               "gat_backward workspace of {} floats", workspace.size);
    expect_out_edges(block, "gat_backward");
    NJ_CUDA_TRY(
        cuda_kernels::gat_backward(stream_, block, shape, attention, z, grad_out, grad_z, accumulate, workspace));
  }

  void dropout(ConstDeviceRows in, DeviceSpan<const gid_t> row_gid, const RandomStream& random, float p,
               DeviceRows out) override {
    NJ_EXPECTS(in.rows == out.rows && in.cols == out.cols && row_gid.size >= in.rows, "dropout shapes");
    NJ_CUDA_TRY(cuda_kernels::dropout(stream_, in, row_gid, random, p, out));
  }

  void dropout_entries(const SparseBlockView& x, DeviceSpan<const gid_t> row_gid, const RandomStream& random, float p,
                       DeviceSpan<float> weights, DeviceSpan<float> out_weights) override {
    expect_dropout_entries_shapes(x, row_gid, weights, out_weights);
    NJ_CUDA_TRY(cuda_kernels::dropout_entries(stream_, x, row_gid, random, p, weights, out_weights));
  }

  void bias_activation(ConstDeviceRows y, DeviceSpan<const float> bias, Activation act, DeviceRows h) override {
    NJ_EXPECTS(bias.empty() || bias.size == y.cols, "a bias of {} values for rows of {}", bias.size, y.cols);
    NJ_CUDA_TRY(cuda_kernels::bias_activation(stream_, y, bias, act, h));
  }

  void activation_backward(Activation act, ConstDeviceRows h, ConstDeviceRows grad_h, DeviceRows grad_y) override {
    NJ_CUDA_TRY(cuda_kernels::activation_backward(stream_, act, h, grad_h, grad_y));
  }

  void column_sums(ConstDeviceRows in, DeviceSpan<float> out, bool accumulate) override {
    NJ_EXPECTS(out.size == in.cols, "{} column sums of rows of {}", out.size, in.cols);
    NJ_CUDA_TRY(cuda_kernels::column_sums(stream_, in, out, accumulate));
  }

  void copy_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst,
                 DeviceSpan<const vid_t> dst_rows, std::int64_t count) override {
    NJ_EXPECTS(src.cols == dst.cols, "row widths {} and {}", src.cols, dst.cols);
    NJ_CUDA_TRY(cuda_kernels::move_rows(stream_, src, src_rows, dst, dst_rows, count, false));
  }
  void add_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst, DeviceSpan<const vid_t> dst_rows,
                std::int64_t count) override {
    NJ_EXPECTS(src.cols == dst.cols, "row widths {} and {}", src.cols, dst.cols);
    NJ_CUDA_TRY(cuda_kernels::move_rows(stream_, src, src_rows, dst, dst_rows, count, true));
  }
  void expand_block(const PackedBlockView& block, const ExpandedArrays& out, DeviceSpan<eid_t> cursor) override {
    expect_expand_shapes(block, out, cursor);
    NJ_CUDA_TRY(cuda_kernels::expand_block(stream_, block, out, cursor.data));
  }

  void zero_rows(DeviceRows dst, DeviceSpan<const vid_t> rows, std::int64_t count) override {
    NJ_CUDA_TRY(cuda_kernels::zero_rows(stream_, dst, rows, count));
  }

 private:
  // out = A·in + beta·out for the CSR matrix A (rows × cols) of `block` (its transpose with `transpose`) through
  // cuSPARSE; false where it is off or does not support the configuration, for the caller to run the row kernels
  // instead. The block's offsets are 64-bit and its column indices 32-bit, a mix cuSPARSE refuses: the offsets are
  // narrowed into a buffer of the arena's for the call first (what the forecast counts: narrowed_offsets_bytes).
  bool sparse_library_spmm(const SparseBlockView& block, bool transpose, std::int64_t rows, std::int64_t cols,
                           const eid_t* offsets, const vid_t* columns, const float* values, const float* in,
                           DeviceRows out, float beta) {
    if (!use_sparse_library_ || out.cols == 0) return false;
    DeviceArray<std::int32_t> narrow(device_, narrowed_offsets_bytes(block, transpose) / 4,
                                     "library: narrowed offsets");
    NJ_CUDA_TRY(cuda_kernels::narrow_offsets(stream_, offsets, rows + 1, narrow.view().data));
    const CsrDescription a(rows, cols, block.num_edges(), narrow.view().data, columns, values);
    if (!supported(a.status(), "cusparseCreateCsr")) return false;
    const DenseDescription b(cols, out.cols, in);
    const DenseDescription c(rows, out.cols, out.data);
    const float alpha = 1.0F;
    std::size_t bytes = 0;
    const cusparseStatus_t sized = libraries_.sparse_spmm_buffer_size(
        sparse_.get(), CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a.get(), b.get(),
        &beta, c.get(), CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &bytes);
    if (!supported(sized, "cusparseSpMM_bufferSize")) return false;
    if (static_cast<std::int64_t>(bytes) > kCusparseWorkspaceBytes) {
      warn_once(fmt::format("cuSPARSE asks for a workspace of {} bytes, more than the {} it is given", bytes,
                            kCusparseWorkspaceBytes));
      return false;
    }
    NJ_CUDA_TRY(libraries_.sparse_spmm(sparse_.get(), CUSPARSE_OPERATION_NON_TRANSPOSE,
                                       CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a.get(), b.get(), &beta, c.get(),
                                       CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, workspace_.data + kCublasWorkspaceBytes));
    return true;
  }

  // False, once and for good with a warning, where cuSPARSE says it does not support what it was asked; other
  // failures throw.
  bool supported(cusparseStatus_t status, const char* call) {
    if (status == CUSPARSE_STATUS_NOT_SUPPORTED) {
      warn_once(
          fmt::format("cuSPARSE does not support this SpMM ({}: {})", call, libraries_.sparse_error_string(status)));
      use_sparse_library_ = false;
      return false;
    }
    if (status != CUSPARSE_STATUS_SUCCESS) {
      detail::throw_failed_call(call, __FILE__, __LINE__, libraries_.sparse_error_name(status),
                                libraries_.sparse_error_string(status));
    }
    return true;
  }

  void warn_once(const std::string& why) {
    if (warned_) return;
    warned_ = true;
    spdlog::warn("{}; the row kernels aggregate instead", why);
  }

  const CudaLibraries& libraries_;
  Device& device_;
  int ordinal_;
  cudaStream_t stream_;
  LibraryMemory library_;
  bool use_sparse_library_;
  bool warned_ = false;
  DeviceSpan<std::byte> workspace_;  // cuBLAS's, then cuSPARSE's
  BlasHandle blas_;
  SparseHandle sparse_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(Device& device, bool deterministic) {
  return std::make_unique<CudaBackend>(device, deterministic);
}

}  // namespace nj
