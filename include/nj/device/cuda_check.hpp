#pragma once
// Checks for every CUDA runtime, cuSPARSE, cuBLAS and NCCL call, in the manner of RAFT's RAFT_CUDA_TRY: a
// failed call throws nj::CudaError naming the call, the file and line, and the library's name and text for the
// status (cuSPARSE's and cuBLAS's names come with nj/kernels/cuda_libraries.hpp, which opens those libraries). The
// _NO_THROW forms are for destructors and other noexcept paths: they log the same line instead. Only CUDA builds
// include this header (src/*/cuda/); it is C++17, so .cu files include it too.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <type_traits>

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

// What NJ_CUDA_TRY knows of a library's status type: a class template, so that a library's specialisation declared
// in a later header (nj/kernels/cuda_libraries.hpp) serves the checks in templates defined before it.
template <typename Status>
struct StatusOf;

template <>
struct StatusOf<cudaError_t> {
  static const char* name(cudaError_t s) { return cudaGetErrorName(s); }
  static const char* text(cudaError_t s) { return cudaGetErrorString(s); }
  static bool succeeded(cudaError_t s) { return s == cudaSuccess; }
};

// NCCL has no name function; ncclInProgress is how a non-blocking communicator says "not yet", not a failure.
template <>
struct StatusOf<ncclResult_t> {
  static const char* name(ncclResult_t /*s*/) { return "ncclResult"; }
  static const char* text(ncclResult_t s) { return ncclGetErrorString(s); }
  static bool succeeded(ncclResult_t s) { return s == ncclSuccess || s == ncclInProgress; }
};
}  // namespace detail

}  // namespace nj

// One macro serves the four libraries: the status type picks the name and text functions (StatusOf).
#define NJ_CUDA_TRY(call)                                                                       \
  do {                                                                                          \
    const auto nj_status_ = (call);                                                             \
    using NjStatusOf_ = ::nj::detail::StatusOf<std::remove_const_t<decltype(nj_status_)>>;      \
    if (!NjStatusOf_::succeeded(nj_status_)) {                                                  \
      ::nj::detail::throw_failed_call(#call, __FILE__, __LINE__, NjStatusOf_::name(nj_status_), \
                                      NjStatusOf_::text(nj_status_));                           \
    }                                                                                           \
  } while (false)

#define NJ_CUDA_TRY_NO_THROW(call)                                                            \
  do {                                                                                        \
    const auto nj_status_ = (call);                                                           \
    using NjStatusOf_ = ::nj::detail::StatusOf<std::remove_const_t<decltype(nj_status_)>>;    \
    if (!NjStatusOf_::succeeded(nj_status_)) {                                                \
      ::nj::detail::log_failed_call(#call, __FILE__, __LINE__, NjStatusOf_::name(nj_status_), \
                                    NjStatusOf_::text(nj_status_));                           \
    }                                                                                         \
  } while (false)

// After a kernel launch: a bad configuration shows at once; a fault inside the kernel shows at the next
// synchronisation (Device::synchronize).
#define NJ_CUDA_CHECK_LAUNCH() NJ_CUDA_TRY(cudaPeekAtLastError())
