#pragma once
// The communicator a rank trains with where the job has peers: host values and host-memory exchanges go to the
// job's communicator, and exchanges and sums of device memory go through a PeerTransport: NCCL on a GPU, the
// job's own communicator on the CPU device (whose memory is host memory, so that training on the CPU runs the
// executors' device-buffer exchange and tests it). What must hold for every transport lives here, once:
//   - It connects when it is made. A transport's connection is a collective (NCCL's communicator is), so it is
//     made at a point every rank reaches in the same order: made at first use, a rank with no peers would
//     reach it at another collective than the others (its first gradient sum), and the job would hang.
//   - Destroyed while an error unwinds, or with an exchange abandoned in flight, it aborts the transport instead
//     of waiting for peers that may never send; the error then ends the job through the job's abort.
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "nj/comm/communicator.hpp"
#include "nj/device/device_view.hpp"

namespace nj {

// What moves device buffers between ranks, as the device communicator drives it.
class PeerTransport {
 public:
  virtual ~PeerTransport() = default;
  virtual std::string_view name() const = 0;
  // The identifier rank 0 makes and every rank connects with (NCCL's unique id): its size, and making it.
  virtual std::size_t id_bytes() const = 0;
  virtual void make_id(std::span<std::byte> id) = 0;
  // Connects this rank to the others that hold `id`: a collective of all `size` ranks.
  virtual void connect(std::span<const std::byte> id, int rank, int size) = 0;
  // Starts every send and receive at once, after the kernels issued so far on the compute stream (which wrote
  // what is sent); the buffers are device memory.
  virtual std::unique_ptr<PendingExchange> start(std::span<const SendBuffer> sends,
                                                 std::span<const ReceiveBuffer> receives, int tag) = 0;
  // Sums `values` over the ranks in place, after the kernels issued so far; returns once the sums are there.
  virtual void all_reduce_sum(DeviceSpan<float> values) = 0;
  // Ends what is in flight at once, without waiting for any peer. Nothing may be called afterwards.
  virtual void abort() noexcept = 0;
  // Waits for what was issued and lets the connection go, where every rank is in step.
  virtual void close() = 0;
};

// Connects `transport` over `job` (rank 0 makes the id, `job` broadcasts it, every rank connects), and returns
// the communicator that uses it; `job` must outlive it. Every rank of the job calls this at the same point.
std::unique_ptr<Communicator> make_device_communicator(Communicator& job, std::unique_ptr<PeerTransport> transport);

class Device;
// The CPU device's transport: the job's communicator, with the buffers checked as the device's kernels are
// (Device::use): what is sent must be ordered after the copies that wrote it, as NCCL's stream is ordered after
// the compute stream.
std::unique_ptr<PeerTransport> make_host_memory_transport(Communicator& job, Device& device);
// NCCL on `device`, a CUDA device of this rank's own. Throws in a build without CUDA.
std::unique_ptr<PeerTransport> make_nccl_transport(Device& device);

}  // namespace nj
