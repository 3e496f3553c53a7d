#pragma once
// The CUDA device: what a rank computes with when it has a GPU. Every function here exists in every build; in
// a build without CUDA (NJ_ENABLE_CUDA=OFF, or no nvcc) cuda_device_count() is 0 and the factories throw, so
// callers choose the device at run time and tests skip their GPU instances with one message.
#include <cstdint>
#include <memory>
#include <string>

#include "nj/device/device.hpp"

namespace nj {

// True when this binary carries the CUDA backend.
bool cuda_built();
// In a build without CUDA, what its CUDA entry points throw: nj::InputError naming `what` and how to build with CUDA.
[[noreturn]] void cuda_unavailable(const char* what);
// GPUs this process can use; 0 without CUDA, without a driver, or without a GPU.
int cuda_device_count();
// What tests print when they skip a GPU instance.
inline constexpr const char* kNoCudaDevice = "no CUDA device";

// Device memory the CUDA device leaves outside its arena by default: the CUDA context, cuBLAS's and
// cuSPARSE's workspaces and NCCL's buffers come out of it.
inline constexpr std::int64_t kCudaReservedBytes = std::int64_t{2} << 30;

// GPU `ordinal` as a Device: one cudaMalloc'd arena of `budget_bytes` placed first-fit under the budget,
// page-locked host staging, and a stream for compute and one per copy direction. Without a budget (<= 0 or
// kUnlimited) the arena takes the card's share of `sharing` ranks that use it: its memory / sharing, less
// kCudaReservedBytes, or the memory free less the reserve where that is less. A budget beyond the memory free now, less
// the reserve, throws nj::InputError.
// `library_bytes` more are allocated beside the arena, outside the budget and its counts, for the backend's
// library workspaces (LibraryMemory::workspace_bytes, native_library_workspace).
std::unique_ptr<Device> make_cuda_device(int ordinal, std::int64_t budget_bytes, int sharing = 1,
                                         std::int64_t library_bytes = 0);

// The card's UUID as 32 hex digits: the same card reads the same in every process.
std::string cuda_device_uuid(int ordinal);

// The arena a CUDA device takes without a budget: the card's share among the `sharing` ranks that compute on it
// (its total memory / sharing, less kCudaReservedBytes), or the memory free less that reserve where that is less.
std::int64_t cuda_default_budget(std::int64_t total_bytes, std::int64_t free_bytes, int sharing);

// The card behind a CUDA device, in words ("NVIDIA H200, 139.8 GiB, sm_90"): for logs.
std::string cuda_device_description(int ordinal);

}  // namespace nj
