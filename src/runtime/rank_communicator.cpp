#include "nj/runtime/rank_communicator.hpp"

#include <string>
#include <vector>

#include "nj/comm/device_communicator.hpp"

namespace nj {

int count_ranks_sharing_gpu(Communicator& job, const DeviceChoice& choice) {
  // A UUID is 128 bits: two int64 slots per rank, which a sum over ranks (each filling its own) gathers.
  constexpr std::size_t kWords = 2;
  constexpr std::size_t kDigits = 16;
  NJ_EXPECTS(choice.gpu_uuid.empty() || choice.gpu_uuid.size() == kWords * kDigits, "a GPU UUID of {} digits",
             choice.gpu_uuid.size());
  const auto size = static_cast<std::size_t>(job.size());
  const auto rank = static_cast<std::size_t>(job.rank());
  std::vector<std::int64_t> words(kWords * size, 0);
  for (std::size_t w = 0; w < kWords && !choice.gpu_uuid.empty(); ++w) {
    const std::uint64_t value = std::stoull(choice.gpu_uuid.substr(w * kDigits, kDigits), nullptr, 16);
    words[rank * kWords + w] = static_cast<std::int64_t>(value);
  }
  job.all_reduce_sum(words);
  std::vector<std::string> uuids(size);
  for (std::size_t r = 0; r < size; ++r) {
    if (words[r * kWords] == 0 && words[r * kWords + 1] == 0) continue;  // the CPU
    for (std::size_t w = 0; w < kWords; ++w) {
      uuids[r] += fmt::format("{:016x}", static_cast<std::uint64_t>(words[r * kWords + w]));
    }
  }
  return ranks_sharing(uuids, job.rank());
}

std::unique_ptr<Communicator> make_rank_communicator(Communicator& job, Resources& resources) {
  if (job.size() == 1) return nullptr;
  if (resources.device->name() != "cuda") {
    return make_device_communicator(job, make_host_memory_transport(job, *resources.device));
  }
  if (resources.ranks_per_device > 1) return nullptr;
  return make_device_communicator(job, make_nccl_transport(*resources.device));
}

}  // namespace nj
