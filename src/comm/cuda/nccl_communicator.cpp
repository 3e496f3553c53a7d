// The NCCL communicator: ranks with GPUs exchange device buffers through NCCL, straight from device memory,
// on a stream of its own ordered after the compute stream's work. Reductions of host values (gradients, which
// the optimiser updates on the host, and metrics) go through a device buffer and ncclAllReduce for floats, and
// through MPI for the rest; host-memory exchanges stay with MPI.
//
// A failed peer must not hang this rank: waits poll the operation's event and ncclCommGetAsyncError, and an
// error aborts the NCCL communicator and throws (the CLI then ends the job through MPI).
#include <mpi.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/device/cuda_check.hpp"
#include "nj/device/cuda_native.hpp"

namespace nj {
namespace {

// The communicator's NCCL handle and stream, shared by it and its exchanges in flight.
struct NcclContext {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int ordinal = 0;

  // Blocks until `done` has completed, checking NCCL for asynchronous errors meanwhile.
  void wait(cudaEvent_t done) const {
    while (true) {
      const cudaError_t state = cudaEventQuery(done);
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) NJ_CUDA_TRY(state);
      (void)cudaGetLastError();  // "not ready" must not stay the thread's last error for the next launch's check
      ncclResult_t async_error = ncclSuccess;
      NJ_CUDA_TRY(ncclCommGetAsyncError(comm, &async_error));
      if (async_error != ncclSuccess && async_error != ncclInProgress) {
        NJ_CUDA_TRY_NO_THROW(ncclCommAbort(comm));
        throw CudaError(fmt::format("NCCL failed while waiting for an exchange: {}", ncclGetErrorString(async_error)));
      }
      std::this_thread::yield();
    }
  }
};

class NcclPendingExchange final : public PendingExchange {
 public:
  NcclPendingExchange(const NcclContext& context, cudaEvent_t done) : context_(context), done_(done) {}
  NcclPendingExchange(const NcclPendingExchange&) = delete;
  NcclPendingExchange& operator=(const NcclPendingExchange&) = delete;
  ~NcclPendingExchange() override { NJ_CUDA_TRY_NO_THROW(cudaEventDestroy(done_)); }
  bool test() override {
    const cudaError_t state = cudaEventQuery(done_);
    if (state == cudaErrorNotReady) {
      (void)cudaGetLastError();  // as in NcclContext::wait
      return false;
    }
    NJ_CUDA_TRY(state);
    return true;
  }
  void wait() override { context_.wait(done_); }

 private:
  const NcclContext& context_;
  cudaEvent_t done_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& host, Device& device)
      : host_(host), compute_(native_stream(device, Stream::kCompute)) {
    context_.ordinal = native_ordinal(device);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  ~NcclCommunicator() override {
    if (context_.comm == nullptr) return;
    NJ_CUDA_TRY_NO_THROW(cudaStreamSynchronize(context_.stream));
    NJ_CUDA_TRY_NO_THROW(cudaFree(staging_));
    NJ_CUDA_TRY_NO_THROW(cudaFreeHost(host_staging_));
    if (owned_event_ != nullptr) NJ_CUDA_TRY_NO_THROW(cudaEventDestroy(owned_event_));
    NJ_CUDA_TRY_NO_THROW(ncclCommDestroy(context_.comm));
    NJ_CUDA_TRY_NO_THROW(cudaStreamDestroy(context_.stream));
  }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  MemorySpace exchange_space() const override { return MemorySpace::kDevice; }

  // Gradients: one ncclAllReduce through a device buffer. The host side is staged through page-locked memory:
  // a copy into pageable memory would block the host until NCCL is done, where no failure check can run.
  void all_reduce_sum(std::span<float> values) override {
    if (values.empty()) return;
    connect();
    const std::size_t bytes = values.size_bytes();
    grow(bytes);
    std::copy(values.begin(), values.end(), host_staging_);
    NJ_CUDA_TRY(cudaMemcpyAsync(staging_, host_staging_, bytes, cudaMemcpyHostToDevice, context_.stream));
    NJ_CUDA_TRY(ncclAllReduce(staging_, staging_, values.size(), ncclFloat, ncclSum, context_.comm, context_.stream));
    NJ_CUDA_TRY(cudaMemcpyAsync(host_staging_, staging_, bytes, cudaMemcpyDeviceToHost, context_.stream));
    context_.wait(record(context_.stream, owned_event_));
    std::copy(host_staging_, host_staging_ + values.size(), values.begin());
  }
  void all_reduce_sum(std::span<double> values) override { host_.all_reduce_sum(values); }
  void all_reduce_sum(std::span<std::int64_t> values) override { host_.all_reduce_sum(values); }
  void all_reduce_max(std::span<double> values) override { host_.all_reduce_max(values); }
  void broadcast(std::span<std::byte> bytes, int root) override { host_.broadcast(bytes, root); }

  std::unique_ptr<PendingExchange> start_exchange(std::span<const SendBuffer> sends,
                                                  std::span<const ReceiveBuffer> receives, int tag) override {
    const auto in_space = [&](MemorySpace space) {
      return std::all_of(sends.begin(), sends.end(), [&](const SendBuffer& s) { return s.space == space; }) &&
             std::all_of(receives.begin(), receives.end(), [&](const ReceiveBuffer& r) { return r.space == space; });
    };
    if (in_space(MemorySpace::kHost)) return host_.start_exchange(sends, receives, tag);
    NJ_EXPECTS(in_space(MemorySpace::kDevice), "an exchange mixes host and device buffers");
    connect();
    // What the kernels issued so far wrote is what is sent; NCCL's stream waits for them.
    cudaEvent_t ready = nullptr;
    NJ_CUDA_TRY(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    NJ_CUDA_TRY(cudaEventRecord(ready, compute_));
    NJ_CUDA_TRY(cudaStreamWaitEvent(context_.stream, ready, 0));
    NJ_CUDA_TRY(cudaEventDestroy(ready));
    // NCCL pairs messages by order, not by tag: every rank issues its exchanges in the same order (the contract).
    NJ_CUDA_TRY(ncclGroupStart());
    for (const ReceiveBuffer& r : receives) {
      NJ_CUDA_TRY(ncclRecv(r.floats.data(), r.floats.size(), ncclFloat, r.peer, context_.comm, context_.stream));
    }
    for (const SendBuffer& s : sends) {
      NJ_CUDA_TRY(ncclSend(s.floats.data(), s.floats.size(), ncclFloat, s.peer, context_.comm, context_.stream));
    }
    NJ_CUDA_TRY(ncclGroupEnd());
    cudaEvent_t done = nullptr;
    NJ_CUDA_TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    NJ_CUDA_TRY(cudaEventRecord(done, context_.stream));
    return std::make_unique<NcclPendingExchange>(context_, done);
  }

  [[noreturn]] void abort(int code) noexcept override {
    if (context_.comm != nullptr) NJ_CUDA_TRY_NO_THROW(ncclCommAbort(context_.comm));
    host_.abort(code);
    std::_Exit(code);  // not reached: the host communicator's abort ends the process
  }

 private:
  // NCCL's communicator is made at the first operation that needs it, a collective every rank reaches in the
  // same order: made while ranks set up, it would leave the others waiting in MPI_Bcast for a rank that failed
  // before getting there.
  void connect() {
    NJ_CUDA_TRY(cudaSetDevice(context_.ordinal));
    if (context_.comm != nullptr) return;
    ncclUniqueId id{};
    if (host_.rank() == 0) NJ_CUDA_TRY(ncclGetUniqueId(&id));
    const int status = MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    NJ_EXPECTS(status == MPI_SUCCESS, "MPI_Bcast of NCCL's unique id failed ({})", status);
    NJ_CUDA_TRY(cudaStreamCreateWithFlags(&context_.stream, cudaStreamNonBlocking));
    NJ_CUDA_TRY(ncclCommInitRank(&context_.comm, host_.size(), id, host_.rank()));
  }

  // The all-reduce's device buffer and its page-locked host side, of at least `bytes`.
  void grow(std::size_t bytes) {
    if (bytes <= staging_bytes_) return;
    NJ_CUDA_TRY(cudaStreamSynchronize(context_.stream));
    NJ_CUDA_TRY(cudaFree(staging_));
    NJ_CUDA_TRY(cudaFreeHost(host_staging_));
    staging_ = nullptr;
    host_staging_ = nullptr;
    staging_bytes_ = 0;
    void* device = nullptr;
    void* host = nullptr;
    NJ_CUDA_TRY(cudaMalloc(&device, bytes));
    staging_ = static_cast<float*>(device);
    NJ_CUDA_TRY(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
    host_staging_ = static_cast<float*>(host);
    staging_bytes_ = bytes;
  }

  static cudaEvent_t record(cudaStream_t stream, cudaEvent_t& event) {
    if (event == nullptr) NJ_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    NJ_CUDA_TRY(cudaEventRecord(event, stream));
    return event;
  }

  Communicator& host_;
  cudaStream_t compute_;
  NcclContext context_;
  float* staging_ = nullptr;  // device memory from the CUDA device's reserve, outside its budget
  float* host_staging_ = nullptr;
  std::size_t staging_bytes_ = 0;
  cudaEvent_t owned_event_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& host, Device& device) {
  return std::make_unique<NcclCommunicator>(host, device);
}

}  // namespace nj
