// A backend that tells the device which memory each kernel touches before the kernel runs, so that the emulated
// device can refuse a kernel reading freed memory, running past a buffer, or running before the copy that fills
// its input was waited for: what a GPU would turn into wrong numbers or a fault only some of the time.
#include "nj/device/device.hpp"
#include "nj/kernels/forwarding_backend.hpp"

namespace nj {
namespace {

class CheckedBackend final : public ForwardingBackend {
 public:
  CheckedBackend(std::unique_ptr<Backend> inner, Device& device)
      : ForwardingBackend(std::move(inner)), device_(device) {}

 private:
  void before(const KernelCall& call) override {
    if (call.block != nullptr) use(*call.block, call.kernel);
    for (const KernelBuffer& b : call.buffers) device_.use(b.data, b.bytes, b.access, b.what);
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
    use_array(b.narrow_src_index, edges, kernel);
    use_array(b.edge_weight, edges, kernel);
    use_array(b.src_factor, b.num_src, kernel);
    use_array(b.src_offsets, b.src_offsets != nullptr ? std::int64_t{b.num_src} + 1 : 0, kernel);
    use_array(b.out_dst, edges, kernel);
    use_array(b.out_edge, edges, kernel);
    use_array(b.out_weight, edges, kernel);
    use_array(b.src_gid, b.num_src, kernel);
    use_array(b.src_row, b.num_src, kernel);
    use_array(b.grad_row, b.num_src, kernel);
  }

  Device& device_;
};

}  // namespace

std::unique_ptr<Backend> make_checked_backend(std::unique_ptr<Backend> inner, Device& device) {
  return std::make_unique<CheckedBackend>(std::move(inner), device);
}

}  // namespace nj
