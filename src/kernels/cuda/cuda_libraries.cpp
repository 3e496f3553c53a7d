#include "nj/kernels/cuda_libraries.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

namespace nj {
namespace {

// A library opened for the rest of the process: its functions are called until exit, so it is never closed.
void* open_library(const char* file) {
  void* library = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    throw CudaError(fmt::format("the CUDA backend needs {}, which could not be opened: {}", file, dlerror()));
  }
  return library;
}

template <typename Function>
void resolve(void* library, const char* file, const char* name, Function& function) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) throw CudaError(fmt::format("{} has no function {}", file, name));
  function = reinterpret_cast<Function>(symbol);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's
}

CudaLibraries open_cuda_libraries() {
  CudaLibraries f{};
  void* blas = open_library(kCublasLibrary);
  resolve(blas, kCublasLibrary, "cublasCreate_v2", f.blas_create);
  resolve(blas, kCublasLibrary, "cublasDestroy_v2", f.blas_destroy);
  resolve(blas, kCublasLibrary, "cublasSetStream_v2", f.blas_set_stream);
  resolve(blas, kCublasLibrary, "cublasSetWorkspace_v2", f.blas_set_workspace);
  resolve(blas, kCublasLibrary, "cublasSgemm_v2", f.blas_sgemm);
  resolve(blas, kCublasLibrary, "cublasGetStatusName", f.blas_status_name);
  resolve(blas, kCublasLibrary, "cublasGetStatusString", f.blas_status_string);
  void* sparse = open_library(kCusparseLibrary);
  resolve(sparse, kCusparseLibrary, "cusparseCreate", f.sparse_create);
  resolve(sparse, kCusparseLibrary, "cusparseDestroy", f.sparse_destroy);
  resolve(sparse, kCusparseLibrary, "cusparseSetStream", f.sparse_set_stream);
  resolve(sparse, kCusparseLibrary, "cusparseCreateCsr", f.sparse_create_csr);
  resolve(sparse, kCusparseLibrary, "cusparseDestroySpMat", f.sparse_destroy_csr);
  resolve(sparse, kCusparseLibrary, "cusparseCreateDnMat", f.sparse_create_dense);
  resolve(sparse, kCusparseLibrary, "cusparseDestroyDnMat", f.sparse_destroy_dense);
  resolve(sparse, kCusparseLibrary, "cusparseSpMM_bufferSize", f.sparse_spmm_buffer_size);
  resolve(sparse, kCusparseLibrary, "cusparseSpMM", f.sparse_spmm);
  resolve(sparse, kCusparseLibrary, "cusparseGetErrorName", f.sparse_error_name);
  resolve(sparse, kCusparseLibrary, "cusparseGetErrorString", f.sparse_error_string);
  return f;
}

}  // namespace

const CudaLibraries& cuda_libraries() {
  static const CudaLibraries libraries = open_cuda_libraries();
  return libraries;
}

}  // namespace nj
