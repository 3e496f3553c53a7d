#pragma once
// What one rank computes with, created once and passed down (in the manner of RAFT's resources): the device
// with its memory, streams and copy engines, and the backend whose kernels run on the device's compute stream
// (holding the library handles, on CUDA).
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
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

// What choosing a device asks of the machine: the GPUs this process sees, and each one's UUID (the same card
// has the same UUID in every process, whatever CUDA_VISIBLE_DEVICES numbers it) and description.
struct GpuInventory {
  std::function<int()> count;
  std::function<std::string(int ordinal)> uuid;
  std::function<std::string(int ordinal)> description;
};
// The CUDA runtime's answers (none in a build without CUDA).
GpuInventory cuda_inventory();

// A resolved choice: which device, which GPU, and why, in words for the log.
struct DeviceChoice {
  DeviceKind kind = DeviceKind::kCpu;
  int ordinal = 0;        // the GPU, for kCuda
  std::string gpu_uuid;   // its UUID, for kCuda
  int ranks_per_gpu = 1;  // ranks of the job computing on the same card (ranks_sharing): its default budget is
                          // their share, and NCCL, which takes one card per rank, is off where it is above 1
  std::string reason;
};
// Resolves auto, and picks the GPU of this rank's local rank (local_rank() modulo the GPUs it sees). cuda with
// no GPU throws nj::InputError ("no CUDA device"). ranks_per_gpu is left at 1: only the ranks together know it.
DeviceChoice choose_device(DeviceKind requested, const GpuInventory& gpus = cuda_inventory());
// How many of the ranks compute on the card of rank `rank`, from every rank's GPU UUID (empty: the CPU, never
// shared): ranks share a card when they see the same device, whatever their local ranks and visible devices.
int ranks_sharing(std::span<const std::string> uuids, int rank);
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
