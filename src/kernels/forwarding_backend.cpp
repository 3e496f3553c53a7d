#include "nj/kernels/forwarding_backend.hpp"

namespace nj {
namespace {

template <typename T>
KernelBuffer read(DeviceRowsView<T> rows, const char* what) {
  return {rows.data, rows.bytes(), Access::kRead, what};
}
template <typename T>
KernelBuffer read(DeviceSpan<T> span, const char* what) {
  return {span.data, span.bytes(), Access::kRead, what};
}
KernelBuffer written(DeviceRows rows, const char* what) { return {rows.data, rows.bytes(), Access::kWrite, what}; }
template <typename T>
KernelBuffer array(const T* data, std::int64_t size, Access access, const char* what) {
  return {data, data != nullptr ? size * static_cast<std::int64_t>(sizeof(T)) : 0, access, what};
}
KernelBuffer written(DeviceSpan<float> span, const char* what) {
  return {span.data, span.bytes(), Access::kWrite, what};
}

}  // namespace

void ForwardingBackend::gemm(bool transpose_a, bool transpose_b, float alpha, ConstDeviceRows a, ConstDeviceRows b,
                             float beta, DeviceRows c) {
  const KernelBuffer buffers[] = {read(a, "gemm A"), read(b, "gemm B"), written(c, "gemm C")};
  before({"gemm", nullptr, buffers});
  inner_->gemm(transpose_a, transpose_b, alpha, a, b, beta, c);
}

void ForwardingBackend::spmm(const SparseBlockView& block, ConstDeviceRows in, DeviceRows out) {
  const KernelBuffer buffers[] = {read(in, "spmm input"), written(out, "spmm output")};
  before({"spmm", &block, buffers});
  inner_->spmm(block, in, out);
}

void ForwardingBackend::spmm_transpose(const SparseBlockView& block, ConstDeviceRows grad_out, DeviceRows grad_in,
                                       bool accumulate) {
  const KernelBuffer buffers[] = {read(grad_out, "spmm_transpose input"), written(grad_in, "spmm_transpose output")};
  before({"spmm_transpose", &block, buffers});
  inner_->spmm_transpose(block, grad_out, grad_in, accumulate);
}

void ForwardingBackend::rooted_sum(const SparseBlockView& block, const RootedSum& sum, ConstDeviceRows z,
                                   DeviceRows out) {
  const KernelBuffer buffers[] = {read(z, "rooted_sum input"), written(out, "rooted_sum output")};
  before({"rooted_sum", &block, buffers});
  inner_->rooted_sum(block, sum, z, out);
}

void ForwardingBackend::rooted_sum_transpose(const SparseBlockView& block, const RootedSum& sum,
                                             ConstDeviceRows grad_out, DeviceRows grad_z, bool accumulate) {
  const KernelBuffer buffers[] = {read(grad_out, "rooted_sum_transpose input"),
                                  written(grad_z, "rooted_sum_transpose output")};
  before({"rooted_sum_transpose", &block, buffers});
  inner_->rooted_sum_transpose(block, sum, grad_out, grad_z, accumulate);
}

void ForwardingBackend::gat_forward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                                    ConstDeviceRows z, DeviceRows out) {
  const KernelBuffer buffers[] = {read(z, "gat_forward input"), written(out, "gat_forward output")};
  before({"gat_forward", &block, buffers});
  inner_->gat_forward(block, shape, attention, z, out);
}

void ForwardingBackend::gat_backward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                                     ConstDeviceRows z, ConstDeviceRows grad_out, DeviceRows grad_z, bool accumulate,
                                     DeviceSpan<float> workspace) {
  const KernelBuffer buffers[] = {read(z, "gat_backward rows"), read(grad_out, "gat_backward input"),
                                  written(grad_z, "gat_backward output"), written(workspace, "gat_backward workspace")};
  before({"gat_backward", &block, buffers});
  inner_->gat_backward(block, shape, attention, z, grad_out, grad_z, accumulate, workspace);
}

void ForwardingBackend::dropout(ConstDeviceRows in, DeviceSpan<const gid_t> row_gid, const RandomStream& stream,
                                float p, DeviceRows out) {
  const KernelBuffer buffers[] = {read(in, "dropout input"), read(row_gid, "dropout global ids"),
                                  written(out, "dropout output")};
  before({"dropout", nullptr, buffers});
  inner_->dropout(in, row_gid, stream, p, out);
}

void ForwardingBackend::dropout_entries(const SparseBlockView& x, DeviceSpan<const gid_t> row_gid,
                                        const RandomStream& stream, float p, DeviceSpan<float> weights,
                                        DeviceSpan<float> out_weights) {
  const KernelBuffer buffers[] = {read(row_gid, "dropout_entries global ids"),
                                  written(weights, "dropout_entries weights"),
                                  written(out_weights, "dropout_entries out-edge weights")};
  before({"dropout_entries", &x, buffers});
  inner_->dropout_entries(x, row_gid, stream, p, weights, out_weights);
}

void ForwardingBackend::bias_activation(ConstDeviceRows y, DeviceSpan<const float> bias, Activation act, DeviceRows h) {
  const KernelBuffer buffers[] = {read(y, "bias_activation input"), read(bias, "bias_activation bias"),
                                  written(h, "bias_activation output")};
  before({"bias_activation", nullptr, buffers});
  inner_->bias_activation(y, bias, act, h);
}

void ForwardingBackend::activation_backward(Activation act, ConstDeviceRows h, ConstDeviceRows grad_h,
                                            DeviceRows grad_y) {
  const KernelBuffer buffers[] = {read(h, "activation_backward rows"), read(grad_h, "activation_backward input"),
                                  written(grad_y, "activation_backward output")};
  before({"activation_backward", nullptr, buffers});
  inner_->activation_backward(act, h, grad_h, grad_y);
}

void ForwardingBackend::column_sums(ConstDeviceRows in, DeviceSpan<float> out, bool accumulate) {
  const KernelBuffer buffers[] = {read(in, "column_sums input"), written(out, "column_sums output")};
  before({"column_sums", nullptr, buffers});
  inner_->column_sums(in, out, accumulate);
}

void ForwardingBackend::copy_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst,
                                  DeviceSpan<const vid_t> dst_rows, std::int64_t count) {
  const KernelBuffer buffers[] = {read(src_rows, "copy_rows"), read(dst_rows, "copy_rows"), read(src, "copy_rows"),
                                  written(dst, "copy_rows")};
  before({"copy_rows", nullptr, buffers});
  inner_->copy_rows(src, src_rows, dst, dst_rows, count);
}

void ForwardingBackend::add_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst,
                                 DeviceSpan<const vid_t> dst_rows, std::int64_t count) {
  const KernelBuffer buffers[] = {read(src_rows, "add_rows"), read(dst_rows, "add_rows"), read(src, "add_rows"),
                                  written(dst, "add_rows")};
  before({"add_rows", nullptr, buffers});
  inner_->add_rows(src, src_rows, dst, dst_rows, count);
}

void ForwardingBackend::zero_rows(DeviceRows dst, DeviceSpan<const vid_t> rows, std::int64_t count) {
  const KernelBuffer buffers[] = {read(rows, "zero_rows rows"), written(dst, "zero_rows output")};
  before({"zero_rows", nullptr, buffers});
  inner_->zero_rows(dst, rows, count);
}

void ForwardingBackend::expand_block(const PackedBlockView& block, const ExpandedArrays& out,
                                     DeviceSpan<eid_t> cursor) {
  const std::int64_t edges = block.edges;
  const std::int64_t sources = block.num_src;
  const bool per_edge = block.weights == PackedWeights::kPerEdge;
  const KernelBuffer buffers[] = {
      array(block.dst_offsets, std::int64_t{block.num_dst} + 1, Access::kRead, "expand_block offsets"),
      array(block.narrow_sources, edges, Access::kRead, "expand_block narrow sources"),
      array(block.sources, edges, Access::kRead, "expand_block sources"),
      array(block.weight, per_edge ? edges : sources, Access::kRead, "expand_block weights"),
      array(out.src_index, edges, Access::kWrite, "expand_block widened sources"),
      array(out.edge_weight, edges, Access::kWrite, "expand_block edge weights"),
      array(out.src_offsets, sources + 1, Access::kWrite, "expand_block out-edge offsets"),
      array(out.out_dst, edges, Access::kWrite, "expand_block out-edge destinations"),
      array(out.out_edge, edges, Access::kWrite, "expand_block out-edge positions"),
      array(out.out_weight, edges, Access::kWrite, "expand_block out-edge weights"),
      array(out.src_offsets != nullptr ? cursor.data : nullptr, sources, Access::kWrite, "expand_block cursor")};
  before({"expand_block", nullptr, buffers});
  inner_->expand_block(block, out, cursor);
}

}  // namespace nj
