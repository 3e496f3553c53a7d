#include "nj/device/resources.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <initializer_list>

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

namespace {

// The first of `variables` that is set, as a non-negative number; `fallback` when none is.
int environment_number(std::initializer_list<const char*> variables, int fallback) {
  for (const char* variable : variables) {
    if (const char* value = std::getenv(variable); value != nullptr) {
      char* end = nullptr;
      const long number = std::strtol(value, &end, 10);
      NJ_REQUIRE(end != value && *end == '\0' && number >= 0 && number <= INT_MAX, "{}={} is not a rank count",
                 variable, value);
      return static_cast<int>(number);
    }
  }
  return fallback;
}

}  // namespace

int local_rank() {
  return environment_number({"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"}, 0);
}

int local_size() {
  return std::max(1,
                  environment_number(
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"}, 1));
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
  choice.ranks_per_gpu = (local_size() + gpus - 1) / gpus;
  choice.reason = fmt::format("cuda{}: GPU {} of {} for local rank {} ({} per GPU): {}",
                              requested == DeviceKind::kAuto ? " (auto)" : "", choice.ordinal, gpus, local,
                              choice.ranks_per_gpu == 1 ? "one rank" : fmt::format("{} ranks", choice.ranks_per_gpu),
                              cuda_device_description(choice.ordinal));
  return choice;
}

Resources make_resources(const DeviceChoice& choice, const ResourceOptions& options) {
  if (choice.kind != DeviceKind::kCuda) return make_cpu_resources(options.budget_bytes, options.threads);
  Resources r;
  r.device = make_cuda_device(choice.ordinal, options.budget_bytes, choice.ranks_per_gpu);
  r.backend = make_cuda_backend(*r.device, options.deterministic);
  r.ranks_per_device = choice.ranks_per_gpu;
  return r;
}

}  // namespace nj
