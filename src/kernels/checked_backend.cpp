// A backend that tells the device which memory each kernel touches before the kernel runs, so that the emulated
// device can refuse a kernel reading freed memory, running past a buffer, or running before the copy that fills
// its input was waited for: what a GPU would turn into wrong numbers or a fault only some of the time.
#include "nj/device/device.hpp"
#include "nj/kernels/backend.hpp"

namespace nj {
namespace {

class CheckedBackend final : public Backend {
 public:
  CheckedBackend(std::unique_ptr<Backend> inner, Device& device) : inner_(std::move(inner)), device_(device) {}

  std::string_view name() const override { return inner_->name(); }

  void gemm(bool transpose_a, bool transpose_b, float alpha, ConstDeviceRows a, ConstDeviceRows b, float beta,
            DeviceRows c) override {
    use(a, "gemm A");
    use(b, "gemm B");
    use(c, "gemm C", Access::kWrite);
    inner_->gemm(transpose_a, transpose_b, alpha, a, b, beta, c);
  }
  void spmm(const SparseBlockView& block, ConstDeviceRows in, DeviceRows out) override {
    use(block, "spmm");
    use(in, "spmm input");
    use(out, "spmm output", Access::kWrite);
    inner_->spmm(block, in, out);
  }
  void spmm_transpose(const SparseBlockView& block, ConstDeviceRows grad_out, DeviceRows grad_in,
                      bool accumulate) override {
    use(block, "spmm_transpose");
    use(grad_out, "spmm_transpose input");
    use(grad_in, "spmm_transpose output", Access::kWrite);
    inner_->spmm_transpose(block, grad_out, grad_in, accumulate);
  }
  void gat_forward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                   ConstDeviceRows z, DeviceRows out) override {
    use(block, "gat_forward");
    use(z, "gat_forward input");
    use(out, "gat_forward output", Access::kWrite);
    inner_->gat_forward(block, shape, attention, z, out);
  }
  std::int64_t gat_backward_workspace(vid_t num_dst, eid_t num_edges, int heads) const override {
    return inner_->gat_backward_workspace(num_dst, num_edges, heads);
  }
  void gat_backward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                    ConstDeviceRows z, ConstDeviceRows grad_out, DeviceRows grad_z, bool accumulate,
                    DeviceSpan<float> workspace) override {
    use(block, "gat_backward");
    use(z, "gat_backward rows");
    use(grad_out, "gat_backward input");
    use(grad_z, "gat_backward output", Access::kWrite);
    use(workspace, "gat_backward workspace", Access::kWrite);
    inner_->gat_backward(block, shape, attention, z, grad_out, grad_z, accumulate, workspace);
  }
  void dropout(ConstDeviceRows in, DeviceSpan<const gid_t> row_gid, const RandomStream& stream, float p,
               DeviceRows out) override {
    use(in, "dropout input");
    use(row_gid, "dropout global ids");
    use(out, "dropout output", Access::kWrite);
    inner_->dropout(in, row_gid, stream, p, out);
  }
  void bias_activation(ConstDeviceRows y, DeviceSpan<const float> bias, Activation act, DeviceRows h) override {
    use(y, "bias_activation input");
    use(bias, "bias_activation bias");
    use(h, "bias_activation output", Access::kWrite);
    inner_->bias_activation(y, bias, act, h);
  }
  void activation_backward(Activation act, ConstDeviceRows h, ConstDeviceRows grad_h, DeviceRows grad_y) override {
    use(h, "activation_backward rows");
    use(grad_h, "activation_backward input");
    use(grad_y, "activation_backward output", Access::kWrite);
    inner_->activation_backward(act, h, grad_h, grad_y);
  }
  void column_sums(ConstDeviceRows in, DeviceSpan<float> out, bool accumulate) override {
    use(in, "column_sums input");
    use(out, "column_sums output", Access::kWrite);
    inner_->column_sums(in, out, accumulate);
  }
  void copy_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst,
                 DeviceSpan<const vid_t> dst_rows, std::int64_t count) override {
    use_row_move(src, src_rows, dst, dst_rows, "copy_rows");
    inner_->copy_rows(src, src_rows, dst, dst_rows, count);
  }
  void add_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst, DeviceSpan<const vid_t> dst_rows,
                std::int64_t count) override {
    use_row_move(src, src_rows, dst, dst_rows, "add_rows");
    inner_->add_rows(src, src_rows, dst, dst_rows, count);
  }
  void zero_rows(DeviceRows dst, DeviceSpan<const vid_t> rows, std::int64_t count) override {
    use(rows, "zero_rows rows");
    use(dst, "zero_rows output", Access::kWrite);
    inner_->zero_rows(dst, rows, count);
  }

 private:
  template <typename T>
  void use(DeviceRowsView<T> rows, const char* what, Access access = Access::kRead) {
    device_.use(rows.data, rows.bytes(), access, what);
  }
  template <typename T>
  void use(DeviceSpan<T> span, const char* what, Access access = Access::kRead) {
    device_.use(span.data, span.bytes(), access, what);
  }
  template <typename T>
  void use_array(const T* data, std::int64_t size, const char* what) {
    if (data != nullptr) device_.use(data, size * static_cast<std::int64_t>(sizeof(T)), Access::kRead, what);
  }
  // The block's arrays; the offsets are checked before the edge count is read from them.
  void use(const SparseBlockView& b, const char* kernel) {
    use_array(b.dst_offsets, std::int64_t{b.num_dst} + 1, kernel);
    const eid_t edges = b.num_edges();
    use_array(b.src_index, edges, kernel);
    use_array(b.edge_weight, edges, kernel);
    use_array(b.src_offsets, b.src_offsets != nullptr ? std::int64_t{b.num_src} + 1 : 0, kernel);
    use_array(b.out_dst, edges, kernel);
    use_array(b.out_edge, edges, kernel);
    use_array(b.out_weight, edges, kernel);
    use_array(b.src_gid, b.num_src, kernel);
    use_array(b.src_row, b.num_src, kernel);
  }
  void use_row_move(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst,
                    DeviceSpan<const vid_t> dst_rows, const char* kernel) {
    use(src_rows, kernel);
    use(dst_rows, kernel);
    use(src, kernel);
    use(dst, kernel, Access::kWrite);
  }

  std::unique_ptr<Backend> inner_;
  Device& device_;
};

}  // namespace

std::unique_ptr<Backend> make_checked_backend(std::unique_ptr<Backend> inner, Device& device) {
  return std::make_unique<CheckedBackend>(std::move(inner), device);
}

}  // namespace nj
