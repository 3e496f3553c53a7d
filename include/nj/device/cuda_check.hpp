#pragma once
// Checks for every CUDA runtime, cuSPARSE, cuBLAS and NCCL call, in the manner of RAFT's RAFT_CUDA_TRY: a
// failed call throws nj::CudaError naming the call, the file and line, and the library's name and text for the
// status. The _NO_THROW forms are for destructors and other noexcept paths: they log the same line instead.
// Only CUDA builds include this header (src/*/cuda/); it is C++17, so .cu files include it too.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>
#include <nccl.h>

#include <string>

#include "nj/core/error.hpp"

namespace nj {

// A CUDA, cuSPARSE, cuBLAS or NCCL call failed.
class CudaError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// "cudaMalloc(&p, n) failed at src/x.cpp:12: cudaErrorMemoryAllocation (out of memory)".
std::string describe_failed_call(const char* call, const char* file, int line, const char* name, const char* text);
[[noreturn]] void throw_failed_call(const char* call, const char* file, int line, const char* name, const char* text);
void log_failed_call(const char* call, const char* file, int line, const char* name, const char* text) noexcept;

inline const char* status_name(cudaError_t s) { return cudaGetErrorName(s); }
inline const char* status_text(cudaError_t s) { return cudaGetErrorString(s); }
inline bool succeeded(cudaError_t s) { return s == cudaSuccess; }
inline const char* status_name(cusparseStatus_t s) { return cusparseGetErrorName(s); }
inline const char* status_text(cusparseStatus_t s) { return cusparseGetErrorString(s); }
inline bool succeeded(cusparseStatus_t s) { return s == CUSPARSE_STATUS_SUCCESS; }
inline const char* status_name(cublasStatus_t s) { return cublasGetStatusName(s); }
inline const char* status_text(cublasStatus_t s) { return cublasGetStatusString(s); }
inline bool succeeded(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }
// NCCL has no name function; ncclInProgress is how a non-blocking communicator says "not yet", not a failure.
inline const char* status_name(ncclResult_t) { return "ncclResult"; }
inline const char* status_text(ncclResult_t s) { return ncclGetErrorString(s); }
inline bool succeeded(ncclResult_t s) { return s == ncclSuccess || s == ncclInProgress; }
}  // namespace detail

}  // namespace nj

// One macro serves the four libraries: the status type picks the name and text functions.
#define NJ_CUDA_TRY(call)                                                                               \
  do {                                                                                                  \
    const auto nj_status_ = (call);                                                                     \
    if (!::nj::detail::succeeded(nj_status_)) {                                                         \
      ::nj::detail::throw_failed_call(#call, __FILE__, __LINE__, ::nj::detail::status_name(nj_status_), \
                                      ::nj::detail::status_text(nj_status_));                           \
    }                                                                                                   \
  } while (false)

#define NJ_CUDA_TRY_NO_THROW(call)                                                                    \
  do {                                                                                                \
    const auto nj_status_ = (call);                                                                   \
    if (!::nj::detail::succeeded(nj_status_)) {                                                       \
      ::nj::detail::log_failed_call(#call, __FILE__, __LINE__, ::nj::detail::status_name(nj_status_), \
                                    ::nj::detail::status_text(nj_status_));                           \
    }                                                                                                 \
  } while (false)

// After a kernel launch: a bad configuration shows at once; a fault inside the kernel shows at the next
// synchronisation (Device::synchronize).
#define NJ_CUDA_CHECK_LAUNCH() NJ_CUDA_TRY(cudaPeekAtLastError())
