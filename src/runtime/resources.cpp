#include "nj/runtime/resources.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <initializer_list>

#include "nj/core/enum_names.hpp"
#include "nj/core/error.hpp"
#include "nj/device/cuda.hpp"

namespace nj {

Resources make_cpu_resources(std::int64_t budget_bytes, int threads) {
  Resources r;
  r.device = make_cpu_device(budget_bytes);
  r.backend = make_checked_backend(make_cpu_backend(threads), *r.device);
  return r;
}

namespace {

constexpr EnumNames<DeviceKind, 3> kDeviceKindNames{
    "device", {{{DeviceKind::kCuda, "cuda"}, {DeviceKind::kCpu, "cpu"}, {DeviceKind::kAuto, "auto"}}}};

}  // namespace

DeviceKind parse_device_kind(std::string_view text) { return kDeviceKindNames.parse(text); }
const char* to_string(DeviceKind kind) { return kDeviceKindNames.name(kind); }

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

GpuInventory cuda_inventory() {
  return {.count = cuda_device_count, .uuid = cuda_device_uuid, .description = cuda_device_description};
}

DeviceChoice choose_device(DeviceKind requested, const GpuInventory& inventory) {
  const int gpus = inventory.count();
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
  choice.gpu_uuid = inventory.uuid(choice.ordinal);
  choice.reason =
      fmt::format("cuda{}: GPU {} of {} for local rank {}: {}", requested == DeviceKind::kAuto ? " (auto)" : "",
                  choice.ordinal, gpus, local, inventory.description(choice.ordinal));
  return choice;
}

std::int64_t cuda_default_budget(std::int64_t total_bytes, std::int64_t free_bytes, int sharing) {
  // The ranks sharing a card start together, so a rank's default is its share of the whole card (not of what
  // happens to be free while the others allocate), or what is free where that is less.
  const std::int64_t share = total_bytes / std::max(sharing, 1) - kCudaReservedBytes;
  return std::min(share, free_bytes - kCudaReservedBytes);
}

int ranks_sharing(std::span<const std::string> uuids, int rank) {
  NJ_EXPECTS(rank >= 0 && static_cast<std::size_t>(rank) < uuids.size(), "rank {} of {}", rank, uuids.size());
  const std::string& mine = uuids[static_cast<std::size_t>(rank)];
  if (mine.empty()) return 1;
  return static_cast<int>(std::count(uuids.begin(), uuids.end(), mine));
}

Resources make_resources(const DeviceChoice& choice, const ResourceOptions& options) {
  if (choice.kind != DeviceKind::kCuda) return make_cpu_resources(options.budget_bytes, options.threads);
  Resources r;
  r.device = make_cuda_device(choice.ordinal, options.budget_bytes, choice.ranks_per_gpu,
                              cuda_library_memory(options.deterministic).workspace_bytes);
  r.backend = make_cuda_backend(*r.device, options.deterministic);
  r.ranks_per_device = choice.ranks_per_gpu;
  return r;
}

}  // namespace nj
