// A build without CUDA: the CUDA backend says why it is missing (nj/device/cuda.hpp).
#include "nj/device/cuda.hpp"
#include "nj/kernels/backend.hpp"

namespace nj {

std::unique_ptr<Backend> make_cuda_backend(Device& /*device*/, bool /*deterministic*/) {
  cuda_unavailable("the CUDA backend");
}

}  // namespace nj
