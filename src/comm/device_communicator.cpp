// The device communicator over a PeerTransport, and the CPU device's transport.
#include "nj/comm/device_communicator.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <vector>

#include "nj/device/device.hpp"

namespace nj {
namespace {

// Exchanges of the transport that have started and neither completed nor been waited for, and whether one was
// abandoned (destroyed before completing: an error unwinding past it). Shared with the exchanges, which may
// outlive the communicator.
struct InFlight {
  int open = 0;
  bool abandoned = false;
};

class TrackedExchange final : public PendingExchange {
 public:
  TrackedExchange(std::unique_ptr<PendingExchange> inner, std::shared_ptr<InFlight> in_flight)
      : inner_(std::move(inner)), in_flight_(std::move(in_flight)) {
    ++in_flight_->open;
  }
  TrackedExchange(const TrackedExchange&) = delete;
  TrackedExchange& operator=(const TrackedExchange&) = delete;
  ~TrackedExchange() override {
    if (open_) {
      --in_flight_->open;
      in_flight_->abandoned = true;
    }
  }
  bool test() override {
    if (open_ && inner_->test()) done();
    return !open_;
  }
  void wait() override {
    if (!open_) return;
    inner_->wait();
    done();
  }

 private:
  void done() {
    open_ = false;
    --in_flight_->open;
  }

  std::unique_ptr<PendingExchange> inner_;
  std::shared_ptr<InFlight> in_flight_;
  bool open_ = true;
};

class DeviceCommunicator final : public ForwardingCommunicator {
 public:
  DeviceCommunicator(Communicator& job, std::unique_ptr<PeerTransport> transport)
      : ForwardingCommunicator(job),
        transport_(std::move(transport)),
        unwinding_at_creation_(std::uncaught_exceptions()) {
    std::vector<std::byte> id(transport_->id_bytes());
    if (rank() == 0) transport_->make_id(id);
    broadcast(id, 0);
    transport_->connect(id, rank(), size());
  }
  DeviceCommunicator(const DeviceCommunicator&) = delete;
  DeviceCommunicator& operator=(const DeviceCommunicator&) = delete;
  ~DeviceCommunicator() override {
    // Peers that failed would never complete what is in flight: waiting for it would hang this rank.
    if (in_flight_->abandoned || in_flight_->open > 0 || std::uncaught_exceptions() > unwinding_at_creation_) {
      spdlog::debug("{}: aborted, not closed: an error is unwinding or an exchange was left in flight",
                    transport_->name());
      transport_->abort();
      return;
    }
    try {
      transport_->close();
    } catch (const std::exception& e) {
      spdlog::warn("{}: closing failed ({}); aborted instead", transport_->name(), e.what());
      transport_->abort();
    }
  }

  MemorySpace exchange_space() const override { return MemorySpace::kDevice; }
  void all_reduce_sum_on_device(DeviceSpan<float> values) override {
    if (!values.empty()) transport_->all_reduce_sum(values);
  }

  std::unique_ptr<PendingExchange> start_exchange(std::span<const SendBuffer> sends,
                                                  std::span<const ReceiveBuffer> receives, int tag) override {
    const auto in_space = [&](MemorySpace space) {
      return std::all_of(sends.begin(), sends.end(), [&](const SendBuffer& s) { return s.space == space; }) &&
             std::all_of(receives.begin(), receives.end(), [&](const ReceiveBuffer& r) { return r.space == space; });
    };
    if (in_space(MemorySpace::kHost)) return inner().start_exchange(sends, receives, tag);
    NJ_EXPECTS(in_space(MemorySpace::kDevice), "an exchange mixes host and device buffers");
    return std::make_unique<TrackedExchange>(transport_->start(sends, receives, tag), in_flight_);
  }

  [[noreturn]] void abort(int code) noexcept override {
    transport_->abort();
    ForwardingCommunicator::abort(code);
  }

 private:
  std::unique_ptr<PeerTransport> transport_;
  std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
  int unwinding_at_creation_;
};

// The CPU device's memory is host memory: the job's communicator sends from it as it is, which is what NCCL
// does on a GPU. The checks are the ones the device makes of a kernel: a buffer sent must be ordered after the
// copies that wrote it, and one received into after the copies that read it.
class HostMemoryTransport final : public PeerTransport {
 public:
  HostMemoryTransport(Communicator& job, Device& device) : job_(job), device_(device) {}

  std::string_view name() const override { return "host-memory transport"; }
  std::size_t id_bytes() const override { return sizeof(std::uint64_t); }
  void make_id(std::span<std::byte> id) override {
    const std::uint64_t value = std::random_device{}();
    std::memcpy(id.data(), &value, sizeof value);
  }
  // As NCCL's initialisation, a collective: every rank must hold the id rank 0 made.
  void connect(std::span<const std::byte> id, int /*rank*/, int /*size*/) override {
    std::uint64_t value = 0;
    std::memcpy(&value, id.data(), sizeof value);
    std::vector<double> extremes = {static_cast<double>(value), -static_cast<double>(value)};
    job_.all_reduce_max(extremes);
    NJ_EXPECTS(extremes[0] == -extremes[1], "the ranks connected with different ids");
  }

  std::unique_ptr<PendingExchange> start(std::span<const SendBuffer> sends, std::span<const ReceiveBuffer> receives,
                                         int tag) override {
    std::vector<SendBuffer> host_sends(sends.begin(), sends.end());
    std::vector<ReceiveBuffer> host_receives(receives.begin(), receives.end());
    for (SendBuffer& s : host_sends) {
      device_.use(s.floats.data(), static_cast<std::int64_t>(s.floats.size_bytes()), Access::kRead, "exchange send");
      s.space = MemorySpace::kHost;
    }
    for (ReceiveBuffer& r : host_receives) {
      device_.use(r.floats.data(), static_cast<std::int64_t>(r.floats.size_bytes()), Access::kWrite,
                  "exchange receive");
      r.space = MemorySpace::kHost;
    }
    return job_.start_exchange(host_sends, host_receives, tag);
  }

  void all_reduce_sum(DeviceSpan<float> values) override {
    device_.use(values.data, values.bytes(), Access::kWrite, "gradient sum over ranks");
    job_.all_reduce_sum(std::span<float>(values.data, static_cast<std::size_t>(values.size)));
  }

  void abort() noexcept override {}
  void close() override {}

 private:
  Communicator& job_;
  Device& device_;
};

}  // namespace

std::unique_ptr<Communicator> make_device_communicator(Communicator& job, std::unique_ptr<PeerTransport> transport) {
  return std::make_unique<DeviceCommunicator>(job, std::move(transport));
}

std::unique_ptr<PeerTransport> make_host_memory_transport(Communicator& job, Device& device) {
  return std::make_unique<HostMemoryTransport>(job, device);
}

}  // namespace nj
