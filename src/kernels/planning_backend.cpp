// Kernels that do nothing: planning replays an epoch's allocations and copies without its arithmetic.
#include "nj/kernels/planning_backend.hpp"

#include "nj/device/device.hpp"
#include "nj/kernels/forwarding_backend.hpp"

namespace nj {
namespace {

// Kernels that do nothing.
class NoKernels final : public Backend {
 public:
  std::string_view name() const override { return "planning"; }
  void gemm(bool /*transpose_a*/, bool /*transpose_b*/, float /*alpha*/, ConstDeviceRows /*a*/, ConstDeviceRows /*b*/,
            float /*beta*/, DeviceRows /*c*/) override {}
  void spmm(const SparseBlockView& /*block*/, ConstDeviceRows /*in*/, DeviceRows /*out*/) override {}
  void spmm_transpose(const SparseBlockView& /*block*/, ConstDeviceRows /*grad_out*/, DeviceRows /*grad_in*/,
                      bool /*accumulate*/) override {}
  void rooted_sum(const SparseBlockView& /*block*/, const RootedSum& /*sum*/, ConstDeviceRows /*z*/,
                  DeviceRows /*out*/) override {}
  void rooted_sum_transpose(const SparseBlockView& /*block*/, const RootedSum& /*sum*/, ConstDeviceRows /*grad_out*/,
                            DeviceRows /*grad_z*/, bool /*accumulate*/) override {}
  void gat_forward(const SparseBlockView& /*block*/, const GatShape& /*shape*/, const RandomStream& /*attention*/,
                   ConstDeviceRows /*z*/, DeviceRows /*out*/) override {}
  void gat_backward(const SparseBlockView& /*block*/, const GatShape& /*shape*/, const RandomStream& /*attention*/,
                    ConstDeviceRows /*z*/, ConstDeviceRows /*grad_out*/, DeviceRows /*grad_z*/, bool /*accumulate*/,
                    DeviceSpan<float> /*workspace*/) override {}
  void dropout(ConstDeviceRows /*in*/, DeviceSpan<const gid_t> /*row_gid*/, const RandomStream& /*stream*/, float /*p*/,
               DeviceRows /*out*/) override {}
  void dropout_entries(const SparseBlockView& /*x*/, DeviceSpan<const gid_t> /*row_gid*/,
                       const RandomStream& /*stream*/, float /*p*/, DeviceSpan<float> /*weights*/,
                       DeviceSpan<float> /*out_weights*/) override {}
  void bias_activation(ConstDeviceRows /*y*/, DeviceSpan<const float> /*bias*/, Activation /*act*/,
                       DeviceRows /*h*/) override {}
  void activation_backward(Activation /*act*/, ConstDeviceRows /*h*/, ConstDeviceRows /*grad_h*/,
                           DeviceRows /*grad_y*/) override {}
  void column_sums(ConstDeviceRows /*in*/, DeviceSpan<float> /*out*/, bool /*accumulate*/) override {}
  void copy_rows(ConstDeviceRows /*src*/, DeviceSpan<const vid_t> /*src_rows*/, DeviceRows /*dst*/,
                 DeviceSpan<const vid_t> /*dst_rows*/, std::int64_t /*count*/) override {}
  void add_rows(ConstDeviceRows /*src*/, DeviceSpan<const vid_t> /*src_rows*/, DeviceRows /*dst*/,
                DeviceSpan<const vid_t> /*dst_rows*/, std::int64_t /*count*/) override {}
  void zero_rows(DeviceRows /*dst*/, DeviceSpan<const vid_t> /*rows*/, std::int64_t /*count*/) override {}
  void expand_block(const PackedBlockView& /*block*/, const ExpandedArrays& /*out*/,
                    DeviceSpan<eid_t> /*cursor*/) override {}
};

// It takes of the arena what the planned backend's libraries take of it (LibraryMemory), when that backend would:
// the narrowed offsets for each SpMM the sparse library would run. (Their workspace lies beside the arena.)
class PlanningBackend final : public ForwardingBackend {
 public:
  PlanningBackend(Device& device, const LibraryMemory& library)
      : ForwardingBackend(std::make_unique<NoKernels>()), device_(device), library_(library) {}
  LibraryMemory library_memory() const override { return library_; }

 private:
  void before(const KernelCall& call) override {
    if (!library_.narrows_offsets || call.block == nullptr) return;
    const std::string_view kernel = call.kernel;
    if (kernel != "spmm" && kernel != "spmm_transpose") return;
    const bool transpose = kernel == "spmm_transpose";
    if (!sparse_library_takes(*call.block, transpose)) return;
    const DeviceArray<std::byte> narrowed(device_, narrowed_offsets_bytes(*call.block, transpose),
                                          "library: narrowed offsets");
  }

  Device& device_;
  LibraryMemory library_;
};

}  // namespace

std::unique_ptr<Backend> make_planning_backend(Device& device, const LibraryMemory& library) {
  return std::make_unique<PlanningBackend>(device, library);
}

}  // namespace nj
