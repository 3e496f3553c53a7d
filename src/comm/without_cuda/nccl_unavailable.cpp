// A build without CUDA: NCCL says why it is missing (nj/device/cuda.hpp).
#include "nj/comm/device_communicator.hpp"
#include "nj/device/cuda.hpp"

namespace nj {

std::unique_ptr<PeerTransport> make_nccl_transport(Device& /*device*/) { cuda_unavailable("NCCL"); }

}  // namespace nj
