#pragma once
// Every suite that runs kernels runs once per backend: the CPU (the checked emulation) and CUDA. A CUDA
// instance skips with "no CUDA device" where this process sees no GPU, and in builds without CUDA.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>

#include "nj/comm/communicator.hpp"
#include "nj/core/bytes.hpp"
#include "nj/device/cuda.hpp"
#include "nj/device/resources.hpp"

namespace nj {
// How GoogleTest prints a backend parameter (found by argument-dependent lookup).
inline void PrintTo(DeviceKind kind, std::ostream* os) { *os << to_string(kind); }
}  // namespace nj

namespace nj::test {

inline auto all_backends() { return ::testing::Values(DeviceKind::kCpu, DeviceKind::kCuda); }
inline bool backend_present(DeviceKind kind) { return kind != DeviceKind::kCuda || cuda_device_count() > 0; }

// Use first in a test or SetUp: `NJ_SKIP_WITHOUT_BACKEND(kind);`
#define NJ_SKIP_WITHOUT_BACKEND(kind)                                            \
  do {                                                                           \
    if (!::nj::test::backend_present(kind)) GTEST_SKIP() << ::nj::kNoCudaDevice; \
  } while (false)

// What a CUDA test device takes without a budget: several test ranks share one GPU.
inline constexpr std::int64_t kTestCudaMemory = std::int64_t{4} << 30;

// The resources of a backend under `budget_bytes` (kUnlimited: none on the CPU, kTestCudaMemory on a GPU):
// the checked CPU emulation with `threads` threads, or the GPU of this rank with deterministic aggregation,
// so that results repeat as the CPU's do. With `job`, the ranks of the job that compute on this rank's GPU are
// counted as nj train counts them (a collective of the job), so that ranks sharing a GPU leave NCCL out.
Resources backend_resources(DeviceKind kind, std::int64_t budget_bytes, int threads = 0, Communicator* job = nullptr);

// A device of a kind under `budget_bytes` (<= 0 or kUnlimited: none on the CPU, kTestCudaMemory on a GPU).
std::unique_ptr<Device> backend_device(DeviceKind kind, std::int64_t budget_bytes);

// Names instances "cpu" and "cuda".
std::string backend_name(DeviceKind kind);
struct BackendName {
  std::string operator()(const ::testing::TestParamInfo<DeviceKind>& info) const { return backend_name(info.param); }
};

}  // namespace nj::test
