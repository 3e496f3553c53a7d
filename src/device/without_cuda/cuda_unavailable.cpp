// A build without CUDA (NJ_ENABLE_CUDA=OFF, or no nvcc): no GPU is ever found, and asking for one says why.
#include "nj/device/cuda.hpp"

namespace nj {

void cuda_unavailable(const char* what) {
  throw InputError(
      fmt::format("{} needs the CUDA backend, which this build does not have (configure with "
                  "-DNJ_ENABLE_CUDA=ON where nvcc is installed)",
                  what));
}

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_description(int /*ordinal*/) { cuda_unavailable("describing a GPU"); }
std::string cuda_device_uuid(int /*ordinal*/) { cuda_unavailable("identifying a GPU"); }
std::unique_ptr<Device> make_cuda_device(int /*ordinal*/, std::int64_t /*budget_bytes*/, int /*sharing*/,
                                         std::int64_t /*library_bytes*/) {
  cuda_unavailable("--device cuda");
}

}  // namespace nj
