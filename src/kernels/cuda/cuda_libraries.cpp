#include "nj/kernels/cuda_libraries.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

namespace nj {
namespace {

// A library opened for the rest of the process: its functions are called until exit, so it is never closed.
class OpenedLibrary {
 public:
  explicit OpenedLibrary(const char* file) : file_(file), handle_(dlopen(file, RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ == nullptr) {
      throw CudaError(fmt::format("the CUDA backend needs {}, which could not be opened: {}", file, dlerror()));
    }
  }

  template <typename Function>
  void resolve(const char* name, Function& function) const {
    void* symbol = dlsym(handle_, name);
    if (symbol == nullptr) throw CudaError(fmt::format("{} has no function {}", file_, name));
    function = reinterpret_cast<Function>(symbol);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's
  }

 private:
  const char* file_;
  void* handle_;
};

CudaLibraries open_cuda_libraries() {
  CudaLibraries f{};
  const OpenedLibrary blas(kCublasLibrary);
  blas.resolve("cublasCreate_v2", f.blas_create);
  blas.resolve("cublasDestroy_v2", f.blas_destroy);
  blas.resolve("cublasSetStream_v2", f.blas_set_stream);
  blas.resolve("cublasSetWorkspace_v2", f.blas_set_workspace);
  blas.resolve("cublasSgemm_v2", f.blas_sgemm);
  blas.resolve("cublasGetStatusName", f.blas_status_name);
  blas.resolve("cublasGetStatusString", f.blas_status_string);
  const OpenedLibrary sparse(kCusparseLibrary);
  sparse.resolve("cusparseCreate", f.sparse_create);
  sparse.resolve("cusparseDestroy", f.sparse_destroy);
  sparse.resolve("cusparseSetStream", f.sparse_set_stream);
  sparse.resolve("cusparseCreateCsr", f.sparse_create_csr);
  sparse.resolve("cusparseDestroySpMat", f.sparse_destroy_csr);
  sparse.resolve("cusparseCreateDnMat", f.sparse_create_dense);
  sparse.resolve("cusparseDestroyDnMat", f.sparse_destroy_dense);
  sparse.resolve("cusparseSpMM_bufferSize", f.sparse_spmm_buffer_size);
  sparse.resolve("cusparseSpMM", f.sparse_spmm);
  sparse.resolve("cusparseGetErrorName", f.sparse_error_name);
  sparse.resolve("cusparseGetErrorString", f.sparse_error_string);
  return f;
}

}  // namespace

const CudaLibraries& cuda_libraries() {
  static const CudaLibraries libraries = open_cuda_libraries();
  return libraries;
}

}  // namespace nj
