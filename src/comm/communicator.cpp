#include "nj/comm/communicator.hpp"

namespace nj {

void Communicator::all_reduce_sum_on_device(DeviceSpan<float> /*values*/) {
  throw Error("this communicator sums host memory only: device memory goes through a device communicator");
}

}  // namespace nj
