#pragma once
// What one rank computes with, created once and passed down (in the manner of RAFT's resources): the device
// with its memory, streams and copy engines, and the backend whose kernels run on the device's compute stream
// (holding the library handles, on CUDA).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "nj/device/device.hpp"
#include "nj/kernels/backend.hpp"

namespace nj {

struct Resources {
  std::unique_ptr<Device> device;
  std::unique_ptr<Backend> backend;
  // Ranks of this node computing on the same GPU (NCCL takes one GPU per rank); 1 on the CPU.
  int ranks_per_device = 1;
};

// The CPU emulation: a device under `budget_bytes` (<= 0 or kUnlimited: none) and the CPU backend with
// `threads` threads (<= 0: the default), every kernel checked against the device's allocations and stream
// order.
Resources make_cpu_resources(std::int64_t budget_bytes, int threads = 0);

// --device: cuda, cpu, or auto (cuda where this process sees a GPU, else cpu).
enum class DeviceKind { kAuto, kCpu, kCuda };
DeviceKind parse_device_kind(std::string_view text);
const char* to_string(DeviceKind kind);

// A resolved choice: which device, which GPU, and why, in words for the log.
struct DeviceChoice {
  DeviceKind kind = DeviceKind::kCpu;
  int ordinal = 0;        // the GPU, for kCuda
  int ranks_per_gpu = 1;  // ranks of this node sharing it: its default budget is their share
  std::string reason;
};
// Resolves auto, and picks the GPU of this rank's local rank (local_rank() modulo the GPUs it sees). cuda with
// no GPU throws nj::InputError ("no CUDA device").
DeviceChoice choose_device(DeviceKind requested);
// This process's rank among the ranks of its node, and their number, from Open MPI's, Slurm's or MPICH's
// environment; 0 and 1 alone.
int local_rank();
int local_size();

struct ResourceOptions {
  std::int64_t budget_bytes = kUnlimited;  // CUDA: kUnlimited is the card's free memory less its reserve
  int threads = 0;                         // the CPU backend's threads
  bool deterministic = false;              // CUDA: aggregate with the row kernels rather than cuSPARSE
};
Resources make_resources(const DeviceChoice& choice, const ResourceOptions& options);

}  // namespace nj
