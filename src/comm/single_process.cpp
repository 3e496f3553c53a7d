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
  explicit SingleProcessCommunicator(bool detached) : detached_(detached) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(std::span<float> /*values*/) override {}
  void all_reduce_sum(std::span<double> /*values*/) override {}
  void all_reduce_sum(std::span<std::int64_t> /*values*/) override {}
  void all_reduce_max(std::span<double> /*values*/) override {}
  void broadcast(std::span<std::byte> /*bytes*/, int /*root*/) override {}
  std::unique_ptr<PendingExchange> start_exchange(std::span<const SendBuffer> sends,
                                                  std::span<const ReceiveBuffer> receives, int /*tag*/) override {
    NJ_EXPECTS(detached_ || (sends.empty() && receives.empty()), "a single process has no peer to exchange rows with");
    return std::make_unique<NothingPending>();
  }
  [[noreturn]] void abort(int code) noexcept override { std::_Exit(code); }

 private:
  bool detached_;
};

}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcessCommunicator>(false);
}

std::unique_ptr<Communicator> make_detached_communicator() { return std::make_unique<SingleProcessCommunicator>(true); }

}  // namespace nj
