#include "support/backends.hpp"

#include "nj/comm/device_communicator.hpp"

namespace nj::test {

Resources backend_resources(DeviceKind kind, std::int64_t budget_bytes, int threads, Communicator* job) {
  if (kind == DeviceKind::kCpu) return make_cpu_resources(budget_bytes, threads);
  DeviceChoice choice = choose_device(DeviceKind::kCuda);
  if (job != nullptr) choice.ranks_per_gpu = count_ranks_sharing_gpu(*job, choice);
  const bool unlimited = budget_bytes <= 0 || budget_bytes == kUnlimited;
  return make_resources(
      choice, {.budget_bytes = unlimited ? kTestCudaMemory : budget_bytes, .threads = threads, .deterministic = true});
}

std::unique_ptr<Device> backend_device(DeviceKind kind, std::int64_t budget_bytes) {
  if (kind == DeviceKind::kCpu) return make_cpu_device(budget_bytes);
  const bool unlimited = budget_bytes <= 0 || budget_bytes == kUnlimited;
  return make_cuda_device(choose_device(DeviceKind::kCuda).ordinal, unlimited ? kTestCudaMemory : budget_bytes);
}

std::string backend_name(DeviceKind kind) { return to_string(kind); }

}  // namespace nj::test
