// NCCL as the device communicator's transport: ranks with a GPU each exchange and sum device buffers straight
// from device memory, on a stream of NCCL's own ordered after the compute stream's work.
//
// A failed peer must not hang this rank: waits poll the operation's event and ncclCommGetAsyncError, and an
// asynchronous error aborts the NCCL communicator and throws (the CLI then ends the job through MPI). Whatever
// the device communicator does not close in step with the peers (an error unwinding, an exchange abandoned),
// it aborts (device_communicator.hpp).
#include <spdlog/spdlog.h>

#include <cstring>
#include <thread>

#include "nj/comm/device_communicator.hpp"
#include "nj/device/cuda_check.hpp"
#include "nj/device/cuda_handle.hpp"
#include "nj/device/cuda_native.hpp"

namespace nj {
namespace {

using NcclCommHandle = CudaHandle<ncclComm_t, ncclCommDestroy>;

// The NCCL communicator and its stream, shared by the transport and its exchanges in flight.
struct NcclContext {
  CudaStreamHandle stream;
  NcclCommHandle comm;  // after the stream: released before it
  int ordinal = 0;

  // Blocks until `done` has completed, checking NCCL for asynchronous errors meanwhile.
  void wait(cudaEvent_t done) {
    while (true) {
      const cudaError_t state = cudaEventQuery(done);
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) NJ_CUDA_TRY(state);
      (void)cudaGetLastError();  // "not ready" must not stay the thread's last error for the next launch's check
      ncclResult_t async_error = ncclSuccess;
      NJ_CUDA_TRY(ncclCommGetAsyncError(comm.get(), &async_error));
      if (async_error != ncclSuccess && async_error != ncclInProgress) {
        abort();
        throw CudaError(fmt::format("NCCL failed while waiting for an exchange: {}", ncclGetErrorString(async_error)));
      }
      std::this_thread::yield();
    }
  }

  // ncclCommAbort frees the communicator: the handle must not release it again.
  void abort() noexcept {
    if (comm) NJ_CUDA_TRY_NO_THROW(ncclCommAbort(comm.release()));
  }
};

class NcclPendingExchange final : public PendingExchange {
 public:
  NcclPendingExchange(NcclContext& context, CudaEventHandle done) : context_(context), done_(std::move(done)) {}
  bool test() override {
    const cudaError_t state = cudaEventQuery(done_.get());
    if (state == cudaErrorNotReady) {
      (void)cudaGetLastError();  // as in NcclContext::wait
      return false;
    }
    NJ_CUDA_TRY(state);
    return true;
  }
  void wait() override { context_.wait(done_.get()); }

 private:
  NcclContext& context_;
  CudaEventHandle done_;
};

class NcclTransport final : public PeerTransport {
 public:
  explicit NcclTransport(Device& device) : compute_(native_stream(device, Stream::kCompute)) {
    context_.ordinal = native_ordinal(device);
  }
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;
  // Neither closed nor aborted (the device communicator does one of them): abort, since nothing says the peers
  // are in step.
  ~NcclTransport() override { context_.abort(); }

  std::string_view name() const override { return "NCCL"; }
  std::size_t id_bytes() const override { return sizeof(ncclUniqueId); }
  void make_id(std::span<std::byte> id) override {
    ncclUniqueId unique{};
    NJ_CUDA_TRY(ncclGetUniqueId(&unique));
    std::memcpy(id.data(), &unique, sizeof unique);
  }
  void connect(std::span<const std::byte> id, int rank, int size) override {
    ncclUniqueId unique{};
    std::memcpy(&unique, id.data(), sizeof unique);
    NJ_CUDA_TRY(cudaSetDevice(context_.ordinal));
    context_.stream = make_stream();
    ncclComm_t comm = nullptr;
    NJ_CUDA_TRY(ncclCommInitRank(&comm, size, unique, rank));
    context_.comm.reset(comm);
  }

  std::unique_ptr<PendingExchange> start(std::span<const SendBuffer> sends, std::span<const ReceiveBuffer> receives,
                                         int /*tag*/) override {
    after_compute();
    // NCCL pairs messages by order, not by tag: every rank issues its exchanges in the same order (the contract).
    NJ_CUDA_TRY(ncclGroupStart());
    for (const ReceiveBuffer& r : receives) {
      NJ_CUDA_TRY(
          ncclRecv(r.floats.data(), r.floats.size(), ncclFloat, r.peer, context_.comm.get(), context_.stream.get()));
    }
    for (const SendBuffer& s : sends) {
      NJ_CUDA_TRY(
          ncclSend(s.floats.data(), s.floats.size(), ncclFloat, s.peer, context_.comm.get(), context_.stream.get()));
    }
    NJ_CUDA_TRY(ncclGroupEnd());
    CudaEventHandle done = make_ordering_event();
    NJ_CUDA_TRY(cudaEventRecord(done.get(), context_.stream.get()));
    return std::make_unique<NcclPendingExchange>(context_, std::move(done));
  }

  // In place on the device: no staging, and nothing outside the budget's arena but NCCL's own buffers.
  void all_reduce_sum(DeviceSpan<float> values) override {
    after_compute();
    NJ_CUDA_TRY(ncclAllReduce(values.data, values.data, static_cast<std::size_t>(values.size), ncclFloat, ncclSum,
                              context_.comm.get(), context_.stream.get()));
    const CudaEventHandle done = make_ordering_event();
    NJ_CUDA_TRY(cudaEventRecord(done.get(), context_.stream.get()));
    context_.wait(done.get());
  }

  void abort() noexcept override { context_.abort(); }

  void close() override {
    if (!context_.comm) return;
    NJ_CUDA_TRY(cudaStreamSynchronize(context_.stream.get()));
    ncclComm_t comm = context_.comm.release();
    NJ_CUDA_TRY(ncclCommDestroy(comm));
  }

 private:
  // What the kernels issued so far wrote is what NCCL reads: its stream waits for them.
  void after_compute() {
    NJ_CUDA_TRY(cudaSetDevice(context_.ordinal));
    const CudaEventHandle ready = make_ordering_event();
    NJ_CUDA_TRY(cudaEventRecord(ready.get(), compute_));
    NJ_CUDA_TRY(cudaStreamWaitEvent(context_.stream.get(), ready.get(), 0));
  }

  cudaStream_t compute_;
  NcclContext context_;
};

}  // namespace

std::unique_ptr<PeerTransport> make_nccl_transport(Device& device) { return std::make_unique<NcclTransport>(device); }

}  // namespace nj
