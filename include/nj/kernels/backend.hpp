#pragma once
// The compute backend: every kernel a layer, the loss or the optimizer needs, on buffers that live where the
// backend computes (host memory for the CPU backend, device memory for the CUDA one). Models and the
// executor call only this interface, so one test suite covers every backend.
#include <cstdint>
#include <memory>
#include <string_view>

#include "nj/core/matrix.hpp"
#include "nj/core/philox.hpp"
#include "nj/kernels/row_math.hpp"
#include "nj/kernels/sparse_block.hpp"

namespace nj {

using rowmath::Activation;
using rowmath::GatShape;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // Row-major C = alpha · op(A) · op(B) + beta · C, with op(X) = Xᵀ where the flag is set. m, n, k are the
  // dimensions of op(A) (m × k) and op(B) (k × n).
  virtual void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                    const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
                    std::int64_t ldc) = 0;

  // Sparse kernels read and write source rows through the block (row b.row_of(j) of `in`/`z` holds local
  // source j); destination rows are the rows of `out`/`grad_out`.
  // out[i] = Σ_{in-edges e of i} w_e · in[src_e]: GCN aggregation.
  virtual void spmm(const SparseBlockView& block, ConstRows in, Rows out) = 0;
  // grad_in[j] (+)= Σ_{out-edges e of j} w_e · grad_out[dst_e]: its backward, summed in a fixed order.
  virtual void spmm_transpose(const SparseBlockView& block, ConstRows grad_out, Rows grad_in, bool accumulate) = 0;

  // GAT aggregation with edge softmax; z rows follow GatShape's layout.
  virtual void gat_forward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                           ConstRows z, Rows out) = 0;
  // Its backward: grad_z (indexed like z) (+)= the gradient of every source row, including the s_dst gradient
  // that reaches destinations.
  virtual void gat_backward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                            ConstRows z, ConstRows grad_out, Rows grad_z, bool accumulate) = 0;

  // out = in ⊙ mask/(1-p), the mask addressed by (row global id, column). Applied to a gradient it is the
  // backward of the same dropout. in and out may alias.
  virtual void dropout(ConstRows in, const gid_t* row_gid, const RandomStream& stream, float p, Rows out) = 0;
  // h = act(y + bias); bias may be nullptr; y and h may alias.
  virtual void bias_activation(ConstRows y, const float* bias, Activation act, Rows h) = 0;
  // grad_y = act'(h) ⊙ grad_h, expressed through the output h; grad_h and grad_y may alias.
  virtual void activation_backward(Activation act, ConstRows h, ConstRows grad_h, Rows grad_y) = 0;
  // out[c] (+)= Σ_r in[r][c], summed in an order that does not depend on the thread count.
  virtual void column_sums(ConstRows in, float* out, bool accumulate) = 0;
  // dst row (dst_rows ? dst_rows[i] : i) = src row (src_rows ? src_rows[i] : i) for i < count: gathers rows
  // into and scatters them out of cache slots within the backend's memory.
  virtual void copy_rows(ConstRows src, const vid_t* src_rows, Rows dst, const vid_t* dst_rows, std::int64_t count) = 0;
  // The same, adding into the dst rows instead of overwriting them.
  virtual void add_rows(ConstRows src, const vid_t* src_rows, Rows dst, const vid_t* dst_rows, std::int64_t count) = 0;
  // Zeroes rows (rows ? rows[i] : i) for i < count.
  virtual void zero_rows(Rows dst, const vid_t* rows, std::int64_t count) = 0;
  // Softmax cross-entropy over the rows whose mask is set: writes scale·(softmax − onehot) into grad for those
  // rows (0 elsewhere) and returns the sum of their losses.
  virtual double softmax_cross_entropy(ConstRows logits, const std::int32_t* labels, const std::uint8_t* mask,
                                       float scale, Rows grad) = 0;
};

// The multithreaded CPU backend (OpenMP loops over rows, OpenBLAS GEMM). threads <= 0 keeps the default.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace nj
