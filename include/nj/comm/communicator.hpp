#pragma once
// Communication between ranks. Training calls only this interface: one process (every operation the
// identity), MPI across ranks, and NCCL for device memory with the CUDA backend. Sums are deterministic for a
// fixed number of ranks.
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nj/core/error.hpp"
#include "nj/device/device_view.hpp"

namespace nj {

// Where a message buffer lives. MPI takes host buffers; NCCL sends straight from device memory.
enum class MemorySpace { kHost, kDevice };

// One point-to-point message of an exchange: `floats` to or from rank `peer`.
struct SendBuffer {
  int peer = 0;
  std::span<const float> floats;
  MemorySpace space = MemorySpace::kHost;
};
struct ReceiveBuffer {
  int peer = 0;
  std::span<float> floats;
  MemorySpace space = MemorySpace::kHost;
};

// An exchange in flight. Its buffers must stay untouched until wait() returns. Destroying it before then
// (an error unwinding) abandons it without waiting, since the peer may be the rank that failed: the job is
// about to end, and the buffers must not be reused.
class PendingExchange {
 public:
  virtual ~PendingExchange() = default;
  // Lets the exchange progress while the caller computes; true once it is complete.
  virtual bool test() = 0;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Where exchange buffers should live: kDevice where the communicator sends straight from device memory
  // (NCCL), so that callers holding rows on the device need not stage them through the host.
  virtual MemorySpace exchange_space() const { return MemorySpace::kHost; }
  // In-place element-wise reductions over all ranks.
  virtual void all_reduce_sum(std::span<float> values) = 0;
  virtual void all_reduce_sum(std::span<double> values) = 0;
  virtual void all_reduce_sum(std::span<std::int64_t> values) = 0;
  virtual void all_reduce_max(std::span<double> values) = 0;
  // Sums device memory over all ranks, in place (the weight gradients, in one fused buffer): only where
  // exchange_space() is kDevice; the others throw.
  virtual void all_reduce_sum_on_device(DeviceSpan<float> values);
  // Copies `root`'s bytes into every other rank's, in host memory: what one reader of a file (a checkpoint)
  // hands to the ranks that may not see it.
  virtual void broadcast(std::span<std::byte> bytes, int root) = 0;
  // Sends to_each[q] to rank q and returns from_each, where from_each[q] is what rank q sent this one: bytes of any
  // count (64-bit; pieces of at most an int's count travel apart). What ranks that each hold a slice of something
  // redistribute it with (a parallel partition). Collective, blocking.
  virtual std::vector<std::vector<std::byte>> all_to_all(std::vector<std::vector<std::byte>> to_each) = 0;
  // Starts every send and receive at once (grouped point-to-point), without blocking. `tag` tells apart
  // exchanges that may be in flight together; every rank must start its exchanges of one tag in the same order.
  virtual std::unique_ptr<PendingExchange> start_exchange(std::span<const SendBuffer> sends,
                                                          std::span<const ReceiveBuffer> receives, int tag) = 0;
  // Ends every rank of the job with `code`, at once: what an error on one rank must do so that no other rank
  // waits for it forever.
  [[noreturn]] virtual void abort(int code) noexcept = 0;
};

// A communicator that hands every operation to another (`inner`, which must outlive it): the base of those that
// change a few operations and keep the rest.
class ForwardingCommunicator : public Communicator {
 public:
  explicit ForwardingCommunicator(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  MemorySpace exchange_space() const override { return inner_.exchange_space(); }
  void all_reduce_sum(std::span<float> values) override { inner_.all_reduce_sum(values); }
  void all_reduce_sum(std::span<double> values) override { inner_.all_reduce_sum(values); }
  void all_reduce_sum(std::span<std::int64_t> values) override { inner_.all_reduce_sum(values); }
  void all_reduce_max(std::span<double> values) override { inner_.all_reduce_max(values); }
  void all_reduce_sum_on_device(DeviceSpan<float> values) override { inner_.all_reduce_sum_on_device(values); }
  void broadcast(std::span<std::byte> bytes, int root) override { inner_.broadcast(bytes, root); }
  std::vector<std::vector<std::byte>> all_to_all(std::vector<std::vector<std::byte>> to_each) override {
    return inner_.all_to_all(std::move(to_each));
  }
  std::unique_ptr<PendingExchange> start_exchange(std::span<const SendBuffer> sends,
                                                  std::span<const ReceiveBuffer> receives, int tag) override {
    return inner_.start_exchange(sends, receives, tag);
  }
  [[noreturn]] void abort(int code) noexcept override {
    inner_.abort(code);
    std::_Exit(code);  // not reached: the inner communicator's abort ends the process
  }

 protected:
  Communicator& inner() { return inner_; }

 private:
  Communicator& inner_;
};

// An error the ranks of a job have agreed on (agree_on_failure): exactly one of them reports it, and every
// rank ends normally, since none is left waiting for another.
class JobError : public Error {
 public:
  JobError(const std::string& message, int failed_rank, bool report, int exit_code = 1)
      : Error(message), failed_rank_(failed_rank), report_(report), exit_code_(exit_code) {}
  int failed_rank() const { return failed_rank_; }
  bool report() const { return report_; }  // true on the one rank that reports it
  // What every rank exits with: 2 where a rank's error was a mistake in the command line (UsageError), else 1.
  int exit_code() const { return exit_code_; }

 private:
  int failed_rank_;
  bool report_;
  int exit_code_;
};

// Runs `work` on every rank, then agrees on whether it failed on any (one collective). If it did, every rank
// throws JobError: the lowest failing rank's, carrying its message, is the one to report. Used for what every
// rank does before training (checks, loading, planning), where an error on one rank must neither hang the
// others nor be printed once per rank.
void agree_on_failure(Communicator& comm, const std::function<void()>& work);

// One rank, no launcher: reductions are the identity and there is no one to exchange with.
std::unique_ptr<Communicator> make_single_process_communicator();
// A rank cut off from its peers: exchanges complete at once, sending nothing and receiving nothing. Planning
// replays a rank's epoch on it, to learn what the rank allocates and copies without its peers taking part; it
// exchanges from `exchange_space` as the rank's own communicator does.
std::unique_ptr<Communicator> make_detached_communicator(MemorySpace exchange_space = MemorySpace::kHost);

// Owns MPI's lifetime in a process: initialises MPI when the process was started by a launcher (mpirun, srun)
// and finalises it on destruction. Without a launcher it does nothing, so that one process never pays for MPI.
class MpiSession {
 public:
  MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession();
  bool active() const { return active_; }
  // The job's communicator: MPI's world where MPI is active, else the single-process one.
  std::unique_ptr<Communicator> communicator() const;
  // True when the environment shows a launcher that started this process as one rank of a job.
  static bool launched();

 private:
  bool active_ = false;
};

}  // namespace nj
