#include "nj/device/resources.hpp"

#include <cstdlib>

#include "nj/core/error.hpp"
#include "nj/device/cuda.hpp"

namespace nj {

Resources make_cpu_resources(std::int64_t budget_bytes, int threads) {
  Resources r;
  r.device = make_cpu_device(budget_bytes);
  r.backend = make_checked_backend(make_cpu_backend(threads), *r.device);
  return r;
}

DeviceKind parse_device_kind(std::string_view text) {
  if (text == "auto") return DeviceKind::kAuto;
  if (text == "cpu") return DeviceKind::kCpu;
  if (text == "cuda") return DeviceKind::kCuda;
  throw InputError(fmt::format("unknown device '{}': expected cuda, cpu or auto", text));
}

const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kAuto: return "auto";
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kCuda: return "cuda";
  }
  return "?";
}

int local_rank() {
  for (const char* variable : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"}) {
    if (const char* value = std::getenv(variable); value != nullptr) {
      char* end = nullptr;
      const long rank = std::strtol(value, &end, 10);
      NJ_REQUIRE(end != value && *end == '\0' && rank >= 0, "{}={} is not a local rank", variable, value);
      return static_cast<int>(rank);
    }
  }
  return 0;
}

DeviceChoice choose_device(DeviceKind requested) {
  const int gpus = cuda_device_count();
  DeviceChoice choice;
  if (requested == DeviceKind::kCpu || (requested == DeviceKind::kAuto && gpus == 0)) {
    choice.kind = DeviceKind::kCpu;
    choice.reason = requested == DeviceKind::kCpu
                        ? "cpu, as asked (the device emulated in host memory)"
                        : fmt::format("cpu: auto found {} (the device emulated in host memory)",
                                      cuda_built() ? kNoCudaDevice : "a build without CUDA");
    return choice;
  }
  NJ_REQUIRE(cuda_built(), "--device cuda: this build has no CUDA backend (configure with -DNJ_ENABLE_CUDA=ON)");
  NJ_REQUIRE(gpus > 0, "--device cuda: {}", kNoCudaDevice);
  choice.kind = DeviceKind::kCuda;
  const int local = local_rank();
  choice.ordinal = local % gpus;
  choice.reason = fmt::format("cuda{}: GPU {} of {} (local rank {}): {}", requested == DeviceKind::kAuto ? " (auto)" : "",
                              choice.ordinal, gpus, local, cuda_device_description(choice.ordinal));
  return choice;
}

Resources make_resources(const DeviceChoice& choice, const ResourceOptions& options) {
  if (choice.kind != DeviceKind::kCuda) return make_cpu_resources(options.budget_bytes, options.threads);
  Resources r;
  r.device = make_cuda_device(choice.ordinal, options.budget_bytes);
  r.backend = make_cuda_backend(*r.device, options.deterministic);
  return r;
}

}  // namespace nj
