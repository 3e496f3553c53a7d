// The device communicator's rules for any transport (connect when made; abort, never wait, while an error
// unwinds or an exchange is abandoned), through an injected transport that behaves as NCCL does with a dead peer:
// what it has in flight never completes, and closing waits for it. And the CPU device's transport, which checks
// the ordering NCCL needs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "nj/comm/device_communicator.hpp"
#include "nj/device/cuda.hpp"
#include "nj/device/device.hpp"
#include "nj/runtime/rank_communicator.hpp"
#include "nj/runtime/resources.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

// What the fake transport saw, shared with the test: it outlives the communicator that owns the transport.
struct TransportLog {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> calls;  // in order: "make_id", "connect", "start", "all_reduce", "abort", "close"
  bool aborted = false;
  bool peer_alive = false;  // whether what is in flight ever completes

  void record(const std::string& call) {
    const std::lock_guard lock(mutex);
    calls.push_back(call);
  }
  // Blocks until what is in flight completes or the transport is aborted: as a wait on NCCL's stream does.
  void wait_for_peer() {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return aborted || peer_alive; });
  }
};

class NeverCompletes final : public PendingExchange {
 public:
  explicit NeverCompletes(TransportLog& log) : log_(log) {}
  bool test() override {
    const std::lock_guard lock(log_.mutex);
    return log_.peer_alive;
  }
  void wait() override { log_.wait_for_peer(); }

 private:
  TransportLog& log_;
};

class FakeTransport final : public PeerTransport {
 public:
  explicit FakeTransport(TransportLog& log) : log_(log) {}
  std::string_view name() const override { return "fake transport"; }
  std::size_t id_bytes() const override { return 4; }
  void make_id(std::span<std::byte> id) override {
    log_.record("make_id");
    std::fill(id.begin(), id.end(), std::byte{7});
  }
  void connect(std::span<const std::byte> id, int /*rank*/, int /*size*/) override {
    EXPECT_EQ(id.size(), 4U);
    log_.record("connect");
  }
  std::unique_ptr<PendingExchange> start(std::span<const SendBuffer> /*sends*/,
                                         std::span<const ReceiveBuffer> /*receives*/, int /*tag*/) override {
    log_.record("start");
    return std::make_unique<NeverCompletes>(log_);
  }
  void all_reduce_sum(DeviceSpan<float> /*values*/) override { log_.record("all_reduce"); }
  void abort() noexcept override {
    {
      const std::lock_guard lock(log_.mutex);
      log_.calls.emplace_back("abort");
      log_.aborted = true;
    }
    log_.changed.notify_all();
  }
  // As NCCL's close synchronises its stream: with a peer gone and work in flight, it never returns.
  void close() override {
    log_.record("close");
    log_.wait_for_peer();
  }

 private:
  TransportLog& log_;
};

// A job of two ranks, seen from rank 0: records its broadcasts, reduces nothing.
class TwoRankJob final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void all_reduce_sum(std::span<float> /*values*/) override {}
  void all_reduce_sum(std::span<double> /*values*/) override {}
  void all_reduce_sum(std::span<std::int64_t> /*values*/) override {}
  void all_reduce_max(std::span<double> /*values*/) override {}
  void broadcast(std::span<std::byte> bytes, int root) override {
    EXPECT_EQ(root, 0);
    broadcast_bytes += bytes.size();
  }
  std::vector<std::vector<std::byte>> all_to_all(std::vector<std::vector<std::byte>> /*to_each*/) override {
    ADD_FAILURE() << "a device test redistributed bytes";
    return {};
  }
  std::unique_ptr<PendingExchange> start_exchange(std::span<const SendBuffer> /*sends*/,
                                                  std::span<const ReceiveBuffer> /*receives*/, int /*tag*/) override {
    ADD_FAILURE() << "a device exchange reached the job's communicator";
    return nullptr;
  }
  [[noreturn]] void abort(int code) noexcept override { std::_Exit(code); }
  std::size_t broadcast_bytes = 0;
};

std::vector<std::string> calls(TransportLog& log) {
  const std::lock_guard lock(log.mutex);
  return log.calls;
}

// Runs `scenario` on a thread of its own and fails if it has not returned within `seconds`: then the transport is
// aborted, which releases any wait, so that the thread ends and the suite goes on.
void expect_returns_within(TransportLog& log, double seconds, const std::function<void()>& scenario) {
  std::packaged_task<void()> task(scenario);
  std::future<void> done = task.get_future();
  std::thread runner(std::move(task));
  const bool returned = done.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready;
  if (!returned) {
    {
      const std::lock_guard lock(log.mutex);
      log.aborted = true;
    }
    log.changed.notify_all();
  }
  runner.join();
  EXPECT_TRUE(returned) << "the communicator waited for a peer that never sends";
}

const SendBuffer kDeviceSend{1, {}, MemorySpace::kDevice};

TEST(DeviceCommunicator, ConnectsWhenMadeAndNotAgainAtFirstUse) {
  TransportLog log;
  TwoRankJob job;
  {
    const auto comm = make_device_communicator(job, std::make_unique<FakeTransport>(log));
    // Rank 0 made the id, the job broadcast it, and the transport connected: before any exchange or sum.
    EXPECT_EQ(calls(log), (std::vector<std::string>{"make_id", "connect"}));
    EXPECT_EQ(job.broadcast_bytes, 4U);
    EXPECT_EQ(comm->exchange_space(), MemorySpace::kDevice);
    std::vector<float> gradient(3);
    comm->all_reduce_sum_on_device({gradient.data(), 3});
    EXPECT_EQ(job.broadcast_bytes, 4U);
    {
      const std::lock_guard lock(log.mutex);
      log.peer_alive = true;  // what starts now completes
    }
    auto exchange = comm->start_exchange({&kDeviceSend, 1}, {}, 0);
    exchange->wait();
  }
  // In step with the peers: closed, not aborted.
  EXPECT_EQ(calls(log), (std::vector<std::string>{"make_id", "connect", "all_reduce", "start", "close"}));
}

TEST(DeviceCommunicator, AnErrorUnwindingPastAnExchangeInFlightAbortsInsteadOfWaiting) {
  TransportLog log;
  TwoRankJob job;
  expect_returns_within(log, 10.0, [&] {
    try {
      const auto comm = make_device_communicator(job, std::make_unique<FakeTransport>(log));
      const auto exchange = comm->start_exchange({&kDeviceSend, 1}, {}, 0);
      throw Error("this rank failed while its exchange was in flight");
    } catch (const Error&) {
    }
  });
  const std::vector<std::string> seen = calls(log);
  EXPECT_EQ(seen.back(), "abort");
  EXPECT_EQ(std::count(seen.begin(), seen.end(), "close"), 0);
}

TEST(DeviceCommunicator, AnExchangeAbandonedBeforeItCompletedAbortsTheTransport) {
  TransportLog log;
  TwoRankJob job;
  expect_returns_within(log, 10.0, [&] {
    const auto comm = make_device_communicator(job, std::make_unique<FakeTransport>(log));
    comm->start_exchange({&kDeviceSend, 1}, {}, 0).reset();  // destroyed without a wait: its peer may be gone
  });
  EXPECT_EQ(calls(log).back(), "abort");
}

TEST(DeviceCommunicator, MixedHostAndDeviceBuffersAreRefused) {
  TransportLog log;
  log.peer_alive = true;  // nothing in flight: closing returns
  TwoRankJob job;
  const auto comm = make_device_communicator(job, std::make_unique<FakeTransport>(log));
  const SendBuffer host{1, {}, MemorySpace::kHost};
  const std::array<SendBuffer, 2> mixed = {host, kDeviceSend};
  EXPECT_THROW(comm->start_exchange(mixed, {}, 0), Error);
  const std::vector<std::string> seen = calls(log);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), "start"), 0);
}

// The CPU device's transport checks what NCCL's stream order guarantees on a GPU: a buffer is sent only once the
// copies that wrote it are ordered before the send.
TEST(HostMemoryTransport, RefusesToSendABufferWhoseUploadTheSendIsNotOrderedAfter) {
  const auto device = make_cpu_device(kUnlimited);
  const auto job = make_detached_communicator();
  const auto transport = make_host_memory_transport(*job, *device);
  DeviceArray<float> rows(*device, 64, "rows: sent");
  const std::vector<float> host(64, 1.0F);
  const Event uploaded = upload(*device, rows.view(), host.data());
  const SendBuffer send{1, {rows.view().data, 64}, MemorySpace::kDevice};
  EXPECT_THROW(transport->start({&send, 1}, {}, 0), Error);
  device->wait(Stream::kCompute, uploaded);
  EXPECT_NO_THROW(transport->start({&send, 1}, {}, 0)->wait());
}

TEST(HostMemoryTransport, RefusesToReceiveIntoABufferADownloadStillReads) {
  const auto device = make_cpu_device(kUnlimited);
  const auto job = make_detached_communicator();
  const auto transport = make_host_memory_transport(*job, *device);
  DeviceArray<float> rows(*device, 64, "rows: received");
  std::vector<float> host(64);
  device->synchronize();
  const Event downloaded = download(*device, host.data(), DeviceSpan<const float>(rows.view()));
  const ReceiveBuffer receive{1, {rows.view().data, 64}, MemorySpace::kDevice};
  EXPECT_THROW(transport->start({}, {&receive, 1}, 0), Error);
  EXPECT_THROW(transport->all_reduce_sum(rows.view()), Error);
  device->wait(Stream::kCompute, downloaded);
  EXPECT_NO_THROW(transport->start({}, {&receive, 1}, 0)->wait());
}

TEST(GpuSharing, RanksShareACardWhenTheySeeTheSameDevice) {
  // Four ranks on one node with a per-rank CUDA_VISIBLE_DEVICES: each sees one GPU, ordinal 0, of its own.
  const std::vector<std::string> own = {"aa", "bb", "cc", "dd"};
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(ranks_sharing(own, rank), 1);
  // Four ranks over two cards.
  const std::vector<std::string> pairs = {"aa", "bb", "aa", "bb"};
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(ranks_sharing(pairs, rank), 2);
  // The CPU is never shared.
  const std::vector<std::string> cpus = {"", "", ""};
  EXPECT_EQ(ranks_sharing(cpus, 1), 1);
}

TEST(GpuSharing, TheChoiceCarriesTheCardsUuidAndNoGuessAtSharing) {
  // Eight local ranks, one visible GPU each (srun --gpus-per-task=1): local rank 5 takes ordinal 0 and says
  // nothing of sharing, which only the ranks together know.
  const test::ScopedVariable rank("OMPI_COMM_WORLD_LOCAL_RANK", "5");
  const test::ScopedVariable size("OMPI_COMM_WORLD_LOCAL_SIZE", "8");
  const GpuInventory one_gpu{.count = [] { return 1; },
                             .uuid = [](int ordinal) { return fmt::format("{:032x}", ordinal + 41); },
                             .description = [](int) { return std::string("a test GPU"); }};
  if (!cuda_built()) {
    // A build without the CUDA backend refuses the request however many GPUs the machine has.
    try {
      (void)choose_device(DeviceKind::kCuda, one_gpu);
      ADD_FAILURE() << "a build without CUDA chose a GPU";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("this build has no CUDA backend"), std::string::npos) << e.what();
    }
    return;
  }
  const DeviceChoice choice = choose_device(DeviceKind::kCuda, one_gpu);
  EXPECT_EQ(choice.kind, DeviceKind::kCuda);
  EXPECT_EQ(choice.ordinal, 0);
  EXPECT_EQ(choice.gpu_uuid, fmt::format("{:032x}", 41));
  EXPECT_EQ(choice.ranks_per_gpu, 1);
  // Counted over the job (one process here): alone on its card, so NCCL stays on and the budget whole.
  const auto job = make_single_process_communicator();
  EXPECT_EQ(count_ranks_sharing_gpu(*job, choice), 1);
}

TEST(GpuSharing, TheDefaultBudgetIsTheCardsShareOrWhatIsFree) {
  constexpr std::int64_t kGiB = std::int64_t{1} << 30;
  EXPECT_EQ(cuda_default_budget(140 * kGiB, 139 * kGiB, 1), 139 * kGiB - kCudaReservedBytes);
  EXPECT_EQ(cuda_default_budget(140 * kGiB, 139 * kGiB, 2), 70 * kGiB - kCudaReservedBytes);
  EXPECT_EQ(cuda_default_budget(140 * kGiB, 10 * kGiB, 2), 10 * kGiB - kCudaReservedBytes);
}

}  // namespace
}  // namespace nj
