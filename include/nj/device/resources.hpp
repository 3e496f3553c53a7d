#pragma once
// What one rank computes with, created once and passed down (in the manner of RAFT's resources): the device
// with its memory, streams and copy engines, and the backend whose kernels run on the device's compute stream
// (holding the library handles, on CUDA).
#include <cstdint>
#include <memory>

#include "nj/device/device.hpp"
#include "nj/kernels/backend.hpp"

namespace nj {

struct Resources {
  std::unique_ptr<Device> device;
  std::unique_ptr<Backend> backend;
};

// The CPU emulation: a device under `budget_bytes` (<= 0 or kUnlimited: none) and the CPU backend with
// `threads` threads (<= 0: the default), every kernel checked against the device's allocations and stream
// order.
Resources make_cpu_resources(std::int64_t budget_bytes, int threads = 0);

}  // namespace nj
