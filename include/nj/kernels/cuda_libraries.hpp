#pragma once
// cuBLAS and cuSPARSE, opened (dlopen) when they are first needed rather than linked. Linked, loading them cost every
// nj process about 190 MiB of resident memory at start (cuBLASLt's, which cuBLAS loads), on runs that never touch a
// GPU: a rank's constant, paid again by every rank. Only CUDA builds include this header.
#include <cublas_v2.h>
#include <cusparse.h>

#include "nj/device/cuda_check.hpp"

// "13" from CUBLAS_VER_MAJOR: the macro's value as a string literal.
#define NJ_CUDA_VALUE_TEXT(macro) NJ_CUDA_TEXT(macro)
#define NJ_CUDA_TEXT(text) #text

namespace nj {

// The functions of the two libraries that nj calls, resolved by name.
struct CudaLibraries {
  decltype(&cublasCreate_v2) blas_create;
  decltype(&cublasDestroy_v2) blas_destroy;
  decltype(&cublasSetStream_v2) blas_set_stream;
  decltype(&cublasSetWorkspace_v2) blas_set_workspace;
  decltype(&cublasSgemm_v2) blas_sgemm;
  decltype(&cublasGetStatusName) blas_status_name;
  decltype(&cublasGetStatusString) blas_status_string;
  decltype(&cusparseCreate) sparse_create;
  decltype(&cusparseDestroy) sparse_destroy;
  decltype(&cusparseSetStream) sparse_set_stream;
  decltype(&cusparseCreateCsr) sparse_create_csr;
  decltype(&cusparseDestroySpMat) sparse_destroy_csr;
  decltype(&cusparseCreateDnMat) sparse_create_dense;
  decltype(&cusparseDestroyDnMat) sparse_destroy_dense;
  decltype(&cusparseSpMM_bufferSize) sparse_spmm_buffer_size;
  decltype(&cusparseSpMM) sparse_spmm;
  decltype(&cusparseGetErrorName) sparse_error_name;
  decltype(&cusparseGetErrorString) sparse_error_string;
};

// The file names opened, for this build's CUDA (the bundle's launchers look for them on the target too).
inline constexpr const char* kCublasLibrary = "libcublas.so." NJ_CUDA_VALUE_TEXT(CUBLAS_VER_MAJOR);
inline constexpr const char* kCusparseLibrary = "libcusparse.so." NJ_CUDA_VALUE_TEXT(CUSPARSE_VER_MAJOR);

// Both libraries, opened and resolved on the first call (thread-safe) and kept for the process. Throws CudaError
// naming the library or function and the loader's reason where one is missing.
const CudaLibraries& cuda_libraries();

// NJ_CUDA_TRY's names and texts for the two libraries' statuses, through the opened libraries.
namespace detail {
template <>
struct StatusOf<cusparseStatus_t> {
  static const char* name(cusparseStatus_t s) { return cuda_libraries().sparse_error_name(s); }
  static const char* text(cusparseStatus_t s) { return cuda_libraries().sparse_error_string(s); }
  static bool succeeded(cusparseStatus_t s) { return s == CUSPARSE_STATUS_SUCCESS; }
};

template <>
struct StatusOf<cublasStatus_t> {
  static const char* name(cublasStatus_t s) { return cuda_libraries().blas_status_name(s); }
  static const char* text(cublasStatus_t s) { return cuda_libraries().blas_status_string(s); }
  static bool succeeded(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }
};
}  // namespace detail

}  // namespace nj
