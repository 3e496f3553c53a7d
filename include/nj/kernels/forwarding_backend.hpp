#pragma once
// A backend that wraps another: every kernel call is described to before() (the kernel, the block it reads, and
// each buffer with how it is touched) and then forwarded. What a wrapper adds lives in its before() alone: the
// checked backend reports the buffers to the emulated device, the planning backend takes the memory the planned
// backend's libraries would, a test's backend fails where it is told to.
#include <cstdint>
#include <memory>
#include <span>

#include "nj/device/device.hpp"
#include "nj/kernels/backend.hpp"

namespace nj {

// A buffer a kernel reads or writes.
struct KernelBuffer {
  const void* data = nullptr;
  std::int64_t bytes = 0;
  Access access = Access::kRead;
  const char* what = "";
};

struct KernelCall {
  const char* kernel;
  const SparseBlockView* block;  // the graph block the kernel reads, or nullptr
  std::span<const KernelBuffer> buffers;
};

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  std::string_view name() const override { return inner_->name(); }
  LibraryMemory library_memory() const override { return inner_->library_memory(); }

  void gemm(bool transpose_a, bool transpose_b, float alpha, ConstDeviceRows a, ConstDeviceRows b, float beta,
            DeviceRows c) override;
  void spmm(const SparseBlockView& block, ConstDeviceRows in, DeviceRows out) override;
  void spmm_transpose(const SparseBlockView& block, ConstDeviceRows grad_out, DeviceRows grad_in,
                      bool accumulate) override;
  void rooted_sum(const SparseBlockView& block, const RootedSum& sum, ConstDeviceRows z, DeviceRows out) override;
  void rooted_sum_transpose(const SparseBlockView& block, const RootedSum& sum, ConstDeviceRows grad_out,
                            DeviceRows grad_z, bool accumulate) override;
  void gat_forward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                   ConstDeviceRows z, DeviceRows out) override;
  void gat_backward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                    ConstDeviceRows z, ConstDeviceRows grad_out, DeviceRows grad_z, bool accumulate,
                    DeviceSpan<float> workspace) override;
  void dropout(ConstDeviceRows in, DeviceSpan<const gid_t> row_gid, const RandomStream& stream, float p,
               DeviceRows out) override;
  void dropout_entries(const SparseBlockView& x, DeviceSpan<const gid_t> row_gid, const RandomStream& stream, float p,
                       DeviceSpan<float> weights, DeviceSpan<float> out_weights) override;
  void bias_activation(ConstDeviceRows y, DeviceSpan<const float> bias, Activation act, DeviceRows h) override;
  void activation_backward(Activation act, ConstDeviceRows h, ConstDeviceRows grad_h, DeviceRows grad_y) override;
  void column_sums(ConstDeviceRows in, DeviceSpan<float> out, bool accumulate) override;
  void copy_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst,
                 DeviceSpan<const vid_t> dst_rows, std::int64_t count) override;
  void add_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst, DeviceSpan<const vid_t> dst_rows,
                std::int64_t count) override;
  void zero_rows(DeviceRows dst, DeviceSpan<const vid_t> rows, std::int64_t count) override;
  void expand_block(const PackedBlockView& block, const ExpandedArrays& out, DeviceSpan<eid_t> cursor) override;

 protected:
  // Called before each kernel is forwarded; an exception it throws stops the kernel.
  virtual void before(const KernelCall& call) = 0;

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace nj
