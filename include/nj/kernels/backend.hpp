#pragma once
// The compute backend: every kernel a layer needs, on device memory only (the views' types say so). Models
// and the executors call only this interface, so one test suite covers every backend. Kernels run on the
// device's compute stream, in the order they are called.
#include <cstdint>
#include <memory>
#include <string_view>

#include "nj/core/philox.hpp"
#include "nj/device/device_view.hpp"
#include "nj/kernels/row_math.hpp"
#include "nj/kernels/sparse_block_view.hpp"

namespace nj {

using rowmath::Activation;
using rowmath::GatShape;
using rowmath::RootedSum;

// Device memory a backend and its libraries take, all of it counted: a workspace for the whole run, which the device
// keeps beside its arena (outside the budget; nj plan shows it); for each SpMM that goes to the sparse library, the
// block's CSR offsets narrowed to 32 bits, from the arena for that call; and, unless the kernels read a packed block
// as it lies (SparseBlockView's 16-bit sources and vertex factors, transposes by source over the in-edges), each
// step's expansion of its block (ExpandedBlock). The planner's steps and the forecast count them. And whether the
// device's memory lies apart from the host's, across a bus (a GPU's): then a copy costs more than the GEMM or the
// aggregation that can spare it (RecomputeOutputs::kAuto), and the device's memory is no part of the host's (the host
// budget cannot make room by lowering the device's). The CPU device's memory is the host's.
struct LibraryMemory {
  std::int64_t workspace_bytes = 0;
  bool narrows_offsets = false;
  bool reads_packed_blocks = true;
  bool memory_apart_from_host = false;
  bool operator==(const LibraryMemory&) const = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual LibraryMemory library_memory() const { return {}; }

  // Row-major C = alpha · op(A) · op(B) + beta · C, with op(X) = Xᵀ where the flag is set; the dimensions
  // come from the views.
  virtual void gemm(bool transpose_a, bool transpose_b, float alpha, ConstDeviceRows a, ConstDeviceRows b, float beta,
                    DeviceRows c) = 0;

  // Sparse kernels read and write source rows through the block (row b.row_of(j) of `in`/`z` holds local
  // source j); destination rows are the rows of `out`/`grad_out`. The block's arrays are device memory.
  // out[i] = Σ_{in-edges e of i} w_e · in[src_e]: GCN aggregation.
  virtual void spmm(const SparseBlockView& block, ConstDeviceRows in, DeviceRows out) = 0;
  // grad_in[j] (+)= Σ_{out-edges e of j} w_e · grad_out[dst_e]: its backward, summed in a fixed order.
  virtual void spmm_transpose(const SparseBlockView& block, ConstDeviceRows grad_out, DeviceRows grad_in,
                              bool accumulate) = 0;

  // out[i] = the RootedSum of destination i over rows z (SAGE, GIN, APPNP, dense layers).
  virtual void rooted_sum(const SparseBlockView& block, const RootedSum& sum, ConstDeviceRows z, DeviceRows out) = 0;
  // Its backward: grad_z[j] (+)= what every term read from local source j, summed in a fixed order.
  virtual void rooted_sum_transpose(const SparseBlockView& block, const RootedSum& sum, ConstDeviceRows grad_out,
                                    DeviceRows grad_z, bool accumulate) = 0;

  // GAT aggregation with edge softmax; z rows follow GatShape's layout.
  virtual void gat_forward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                           ConstDeviceRows z, DeviceRows out) = 0;
  // Its backward: grad_z (indexed like z) (+)= the gradient of every source row, including the s_dst gradient
  // that reaches destinations. `workspace` holds at least rowmath::gat_backward_workspace_floats() floats (per-edge
  // coefficients and score gradients), on every backend alike.
  virtual void gat_backward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                            ConstDeviceRows z, ConstDeviceRows grad_out, DeviceRows grad_z, bool accumulate,
                            DeviceSpan<float> workspace) = 0;

  // out = in ⊙ mask/(1-p), the mask addressed by (row global id, column). Applied to a gradient it is the
  // backward of the same dropout. in and out may alias.
  virtual void dropout(ConstDeviceRows in, DeviceSpan<const gid_t> row_gid, const RandomStream& stream, float p,
                       DeviceRows out) = 0;
  // The same dropout on a sparse matrix held as a block whose destinations are its rows and whose sources are its
  // columns (sparse_rows_block): the stored entry of row i and column j is scaled as element j of the dense row with
  // global id row_gid[i]. Writes the block's weights so scaled, in in-edge order into `weights` and in out-edge order
  // into `out_weights` (what SpMM and its transpose read); either may be empty.
  virtual void dropout_entries(const SparseBlockView& x, DeviceSpan<const gid_t> row_gid, const RandomStream& stream,
                               float p, DeviceSpan<float> weights, DeviceSpan<float> out_weights) = 0;
  // h = act(y + bias); bias may be empty; y and h may alias.
  virtual void bias_activation(ConstDeviceRows y, DeviceSpan<const float> bias, Activation act, DeviceRows h) = 0;
  // grad_y = act'(h) ⊙ grad_h, expressed through the output h; grad_h and grad_y may alias.
  virtual void activation_backward(Activation act, ConstDeviceRows h, ConstDeviceRows grad_h, DeviceRows grad_y) = 0;
  // out[c] (+)= Σ_r in[r][c], summed in an order that does not depend on the thread count.
  virtual void column_sums(ConstDeviceRows in, DeviceSpan<float> out, bool accumulate) = 0;
  // dst row (dst_rows ? dst_rows[i] : i) = src row (src_rows ? src_rows[i] : i) for i < count (an empty span
  // is the identity): gathers rows into and scatters them out of cache slots.
  virtual void copy_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst,
                         DeviceSpan<const vid_t> dst_rows, std::int64_t count) = 0;
  // The same, adding into the dst rows instead of overwriting them.
  virtual void add_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst,
                        DeviceSpan<const vid_t> dst_rows, std::int64_t count) = 0;
  // Zeroes rows (rows ? rows[i] : i) for i < count.
  virtual void zero_rows(DeviceRows dst, DeviceSpan<const vid_t> rows, std::int64_t count) = 0;

  // Writes the arrays `out` asks for (ExpandedArrays) of packed block `block`'s view (for a backend whose kernels do
  // not read packed blocks as they lie, LibraryMemory::reads_packed_blocks): its sources widened, its
  // weights from the factors, and the out-edges grouped by source, each source's in edge order, as
  // SparseBlock::index_by_source orders them, so that kernels read the very view a block uploaded whole gives.
  // `cursor` holds num_src values where the out-edge arrays are asked for.
  virtual void expand_block(const PackedBlockView& block, const ExpandedArrays& out, DeviceSpan<eid_t> cursor) = 0;
};

// What every backend checks of its arguments.
// (m, n, k) of C = op(A)·op(B); throws nj::Error when the shapes do not chain or C is not m × n.
struct GemmShape {
  std::int64_t m, n, k;
};
GemmShape gemm_shape(bool transpose_a, bool transpose_b, ConstDeviceRows a, ConstDeviceRows b, ConstDeviceRows c);
// True when `rows` holds every row the block's sources (or their gradients) map to.
inline bool reaches_sources(const SparseBlockView& block, ConstDeviceRows rows) {
  return block.src_row != nullptr || block.grad_row != nullptr || rows.rows >= block.num_src;
}
// SpMM and its transpose: `sources` reaches the block's sources, `destinations` has one row per destination,
// both of one width. Throws nj::Error otherwise.
void expect_spmm_shapes(const SparseBlockView& block, ConstDeviceRows sources, ConstDeviceRows destinations);
// dropout_entries: a weighted block with a global id per row, and weights of one value per edge where written.
void expect_dropout_entries_shapes(const SparseBlockView& x, DeviceSpan<const gid_t> row_gid, DeviceSpan<float> weights,
                                   DeviceSpan<float> out_weights);
// expand_block: out-edge arrays all or none, weights where the block has them, and a cursor per source with them.
void expect_expand_shapes(const PackedBlockView& block, const ExpandedArrays& out, DeviceSpan<eid_t> cursor);
// A RootedSum and its transpose: `z` (or its gradient) reaching the sources and holding every column the sum
// reads, `out` (or its gradient) one row of the sum's output width per destination.
void expect_rooted_sum_shapes(const SparseBlockView& block, const RootedSum& sum, ConstDeviceRows z,
                              ConstDeviceRows out);
// GAT aggregation and its backward: `z` (or its gradient) rows of the shape's row width reaching the sources,
// `out` (or its gradient) one row of the output width per destination.
void expect_gat_shapes(const SparseBlockView& block, const GatShape& shape, ConstDeviceRows z, ConstDeviceRows out);

// The CUDA backend's library memory, in every build (nj plan --device cuda forecasts a GPU's run anywhere): the
// cuBLAS workspace, and unless `deterministic` (which leaves cuSPARSE out), cuSPARSE's and the narrowed offsets.
LibraryMemory cuda_library_memory(bool deterministic);
inline constexpr std::int64_t kCublasWorkspaceBytes = std::int64_t{32} << 20;  // what cuBLAS asks for on Hopper
inline constexpr std::int64_t kCusparseWorkspaceBytes = std::int64_t{4} << 20;
// Whether the CUDA backend gives SpMM of `block` (its transpose with `transpose`) to cuSPARSE: weighted edges,
// sources in consecutive rows, and fewer than 2^31 edges (32-bit offsets); the row kernels take the rest. The
// offsets narrowed for it take narrowed_offsets_bytes.
bool sparse_library_takes(const SparseBlockView& block, bool transpose);
std::int64_t narrowed_offsets_bytes(const SparseBlockView& block, bool transpose);

// The multithreaded CPU backend (OpenMP loops over rows, OpenBLAS GEMM). threads <= 0 keeps the default.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

class Device;
// The CUDA backend, on `device`'s compute stream (a CUDA device). `deterministic` runs the aggregation with
// the shared row-math kernels instead of cuSPARSE, so that runs repeat bit for bit. Throws in a build without
// CUDA.
std::unique_ptr<Backend> make_cuda_backend(Device& device, bool deterministic);

// Reports every buffer a kernel of `inner` touches to `device` (Device::use) before running it, so that the
// emulated device checks each kernel's memory against its allocations and stream order.
std::unique_ptr<Backend> make_checked_backend(std::unique_ptr<Backend> inner, Device& device);

}  // namespace nj
