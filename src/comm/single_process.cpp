#include <cstdlib>

#include "nj/comm/communicator.hpp"
#include "nj/core/error.hpp"

namespace nj {
namespace {

class NothingPending final : public PendingExchange {
 public:
  bool test() override { return true; }
  void wait() override {}
};

class SingleProcessCommunicator final : public Communicator {
 public:
  // Detached: messages to peers go nowhere and none arrive (receive buffers are left as they are).
  SingleProcessCommunicator(bool detached, MemorySpace exchange_space)
      : detached_(detached), exchange_space_(exchange_space) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  MemorySpace exchange_space() const override { return exchange_space_; }
  void all_reduce_sum_on_device(DeviceSpan<float> /*values*/) override {
    NJ_EXPECTS(exchange_space_ == MemorySpace::kDevice, "a communicator that exchanges host memory reduces none");
  }
  void all_reduce_sum(std::span<float> /*values*/) override {}
  void all_reduce_sum(std::span<double> /*values*/) override {}
  void all_reduce_sum(std::span<std::int64_t> /*values*/) override {}
  void all_reduce_max(std::span<double> /*values*/) override {}
  void broadcast(std::span<std::byte> /*bytes*/, int /*root*/) override {}
  std::vector<std::vector<std::byte>> all_to_all(std::vector<std::vector<std::byte>> to_each) override {
    NJ_EXPECTS(to_each.size() == 1, "{} messages for a single process", to_each.size());
    return to_each;
  }
  std::unique_ptr<PendingExchange> start_exchange(std::span<const SendBuffer> sends,
                                                  std::span<const ReceiveBuffer> receives, int /*tag*/) override {
    NJ_EXPECTS(detached_ || (sends.empty() && receives.empty()), "a single process has no peer to exchange rows with");
    return std::make_unique<NothingPending>();
  }
  [[noreturn]] void abort(int code) noexcept override { std::_Exit(code); }

 private:
  bool detached_;
  MemorySpace exchange_space_;
};

}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcessCommunicator>(false, MemorySpace::kHost);
}

std::unique_ptr<Communicator> make_detached_communicator(MemorySpace exchange_space) {
  return std::make_unique<SingleProcessCommunicator>(true, exchange_space);
}

}  // namespace nj
