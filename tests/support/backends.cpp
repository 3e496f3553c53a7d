#include "support/backends.hpp"

namespace nj::test {

Resources backend_resources(DeviceKind kind, std::int64_t budget_bytes, int threads) {
  if (kind == DeviceKind::kCpu) return make_cpu_resources(budget_bytes, threads);
  DeviceChoice choice = choose_device(DeviceKind::kCuda);
  return make_resources(choice, {.budget_bytes = budget_bytes == kUnlimited ? kTestCudaMemory : budget_bytes,
                                 .threads = threads,
                                 .deterministic = true});
}

std::string backend_name(DeviceKind kind) { return to_string(kind); }

}  // namespace nj::test
