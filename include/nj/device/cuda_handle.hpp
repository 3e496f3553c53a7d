#pragma once
// An owned CUDA, cuBLAS, cuSPARSE or NCCL handle, released by `Release` when the owner goes: so that a
// constructor that fails part-way releases what it already made (a member's destructor runs where the owner's
// does not). CUDA builds only.
#include <memory>
#include <type_traits>

#include "nj/device/cuda_check.hpp"

namespace nj {

// Handle is the library's pointer type (cudaStream_t, cublasHandle_t, ...); Release returns the library's status,
// which is logged, not thrown: releases run in destructors.
template <typename Handle, auto Release>
class CudaHandle {
 public:
  CudaHandle() = default;
  explicit CudaHandle(Handle handle) : owned_(handle) {}
  Handle get() const { return owned_.get(); }
  // Gives up the handle without releasing it (a communicator that was aborted is gone already).
  Handle release() { return owned_.release(); }
  void reset(Handle handle = nullptr) { owned_.reset(handle); }
  explicit operator bool() const { return owned_ != nullptr; }

 private:
  struct Releaser {
    void operator()(Handle handle) const noexcept { NJ_CUDA_TRY_NO_THROW(Release(handle)); }
  };
  std::unique_ptr<std::remove_pointer_t<Handle>, Releaser> owned_;
};

using CudaStreamHandle = CudaHandle<cudaStream_t, cudaStreamDestroy>;
using CudaEventHandle = CudaHandle<cudaEvent_t, cudaEventDestroy>;

// A stream of its own, not ordered with the legacy default stream.
inline CudaStreamHandle make_stream() {
  cudaStream_t stream = nullptr;
  NJ_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return CudaStreamHandle(stream);
}

// An event that only orders (no timing).
inline CudaEventHandle make_ordering_event() {
  cudaEvent_t event = nullptr;
  NJ_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return CudaEventHandle(event);
}

}  // namespace nj
