// A build without CUDA (NJ_ENABLE_CUDA=OFF, or no nvcc): no GPU is ever found, and asking for one says why.
#include "nj/comm/device_communicator.hpp"
#include "nj/device/cuda.hpp"
#include "nj/kernels/backend.hpp"

namespace nj {
namespace {

[[noreturn]] void unavailable(const char* what) {
  throw InputError(
      fmt::format("{} needs the CUDA backend, which this build does not have (configure with "
                  "-DNJ_ENABLE_CUDA=ON where nvcc is installed)",
                  what));
}

}  // namespace

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_description(int /*ordinal*/) { unavailable("describing a GPU"); }
std::string cuda_device_uuid(int /*ordinal*/) { unavailable("identifying a GPU"); }
std::unique_ptr<Device> make_cuda_device(int /*ordinal*/, std::int64_t /*budget_bytes*/, int /*sharing*/,
                                         std::int64_t /*library_bytes*/) {
  unavailable("--device cuda");
}
std::unique_ptr<Backend> make_cuda_backend(Device& /*device*/, bool /*deterministic*/) {
  unavailable("the CUDA backend");
}
std::unique_ptr<PeerTransport> make_nccl_transport(Device& /*device*/) { unavailable("NCCL"); }

}  // namespace nj
