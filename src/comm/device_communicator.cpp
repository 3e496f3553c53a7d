// The communicator a rank trains with on its device: rows leave straight from device memory where the job has
// peers.
#include <cstdlib>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/device/resources.hpp"

namespace nj {
namespace {

// The CPU device's memory is host memory: the job's communicator sends from it as it is, which is what NCCL
// does on a GPU. Training on the CPU thus runs the executors' device-buffer exchange, and tests it.
class HostMemoryDeviceCommunicator final : public Communicator {
 public:
  explicit HostMemoryDeviceCommunicator(Communicator& job) : job_(job) {}
  int rank() const override { return job_.rank(); }
  int size() const override { return job_.size(); }
  MemorySpace exchange_space() const override { return MemorySpace::kDevice; }
  void all_reduce_sum(std::span<float> values) override { job_.all_reduce_sum(values); }
  void all_reduce_sum(std::span<double> values) override { job_.all_reduce_sum(values); }
  void all_reduce_sum(std::span<std::int64_t> values) override { job_.all_reduce_sum(values); }
  void all_reduce_max(std::span<double> values) override { job_.all_reduce_max(values); }
  void broadcast(std::span<std::byte> bytes, int root) override { job_.broadcast(bytes, root); }
  std::unique_ptr<PendingExchange> start_exchange(std::span<const SendBuffer> sends,
                                                  std::span<const ReceiveBuffer> receives, int tag) override {
    std::vector<SendBuffer> host_sends(sends.begin(), sends.end());
    std::vector<ReceiveBuffer> host_receives(receives.begin(), receives.end());
    for (SendBuffer& s : host_sends) s.space = MemorySpace::kHost;
    for (ReceiveBuffer& r : host_receives) r.space = MemorySpace::kHost;
    return job_.start_exchange(host_sends, host_receives, tag);
  }
  [[noreturn]] void abort(int code) noexcept override {
    job_.abort(code);
    std::_Exit(code);  // not reached: the job's abort ends the process
  }

 private:
  Communicator& job_;
};

}  // namespace

std::unique_ptr<Communicator> make_device_communicator(Communicator& job, Resources& resources) {
  if (job.size() == 1) return nullptr;
  if (resources.device->name() != "cuda") return std::make_unique<HostMemoryDeviceCommunicator>(job);
  if (resources.ranks_per_device > 1) return nullptr;
  return make_nccl_communicator(job, *resources.device);
}

}  // namespace nj
