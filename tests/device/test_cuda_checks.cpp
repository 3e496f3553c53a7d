// What only the CUDA build has, checked without a GPU: nj links the CUDA runtime and NCCL and opens cuBLAS and
// cuSPARSE when first needed, and NJ_CUDA_TRY says what a failed CUDA, cuSPARSE, cuBLAS or NCCL call was (statuses
// are values: no call needs to fail for real).
#include <gtest/gtest.h>

#if NJ_HAVE_CUDA
#include <fstream>
#include <functional>
#include <string>

#include "nj/device/cuda_check.hpp"
#include "nj/kernels/cuda_libraries.hpp"
#include "support/device_checks.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

std::string message_of(const std::function<void()>& call) { return test::message_of<CudaError>(call); }

TEST(CudaBuild, NjLinksTheCudaRuntimeAndNcclButNotCublasOrCusparse) {
  const test::CommandResult ldd = test::run_shell("ldd " + test::shell_quote(NJ_BINARY));
  ASSERT_EQ(ldd.exit_code, 0) << ldd.output;
  const std::string& libraries = ldd.output;
  for (const char* library : {"libcudart.so", "libnccl.so"}) {
    EXPECT_NE(libraries.find(library), std::string::npos) << library << " is not linked:\n" << libraries;
  }
  for (const char* library : {"libcublas", "libcusparse"}) {
    EXPECT_EQ(libraries.find(library), std::string::npos) << library << " is linked:\n" << libraries;
  }
}

// Each test runs in a process of its own (gtest_discover_tests), so nothing has opened the libraries before.
TEST(CudaLibraries, OpenOnFirstUseAndResolveEveryFunction) {
  const auto mapped = [](const char* file) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      if (line.find(file) != std::string::npos) return true;
    }
    return false;
  };
  ASSERT_FALSE(mapped(kCublasLibrary));
  ASSERT_FALSE(mapped(kCusparseLibrary));
  const CudaLibraries& libraries = cuda_libraries();
  EXPECT_TRUE(mapped(kCublasLibrary));
  EXPECT_TRUE(mapped(kCusparseLibrary));
  EXPECT_EQ(&libraries, &cuda_libraries());
  EXPECT_STREQ(libraries.sparse_error_name(CUSPARSE_STATUS_NOT_SUPPORTED), "CUSPARSE_STATUS_NOT_SUPPORTED");
  EXPECT_STREQ(libraries.blas_status_name(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
}

TEST(CudaChecks, AFailedCallNamesTheCallTheFileTheLineAndTheStatus) {
  const int line = __LINE__ + 1;
  const std::string message = message_of([] { NJ_CUDA_TRY(cudaErrorMemoryAllocation); });
  EXPECT_NE(message.find("cudaErrorMemoryAllocation failed at"), std::string::npos) << message;
  EXPECT_NE(message.find(fmt::format("test_cuda_checks.cpp:{}", line)), std::string::npos) << message;
  EXPECT_NE(message.find("(out of memory)"), std::string::npos) << message;
}

TEST(CudaChecks, EveryLibrarysStatusIsNamed) {
  EXPECT_NE(message_of([] { NJ_CUDA_TRY(CUSPARSE_STATUS_NOT_SUPPORTED); }).find("CUSPARSE_STATUS_NOT_SUPPORTED"),
            std::string::npos);
  EXPECT_NE(message_of([] { NJ_CUDA_TRY(CUBLAS_STATUS_INVALID_VALUE); }).find("CUBLAS_STATUS_INVALID_VALUE"),
            std::string::npos);
  const std::string nccl = message_of([] { NJ_CUDA_TRY(ncclInvalidArgument); });
  EXPECT_NE(nccl.find(ncclGetErrorString(ncclInvalidArgument)), std::string::npos) << nccl;
}

TEST(CudaChecks, SuccessPassesAndTheNoThrowFormOnlyLogs) {
  EXPECT_NO_THROW(NJ_CUDA_TRY(cudaSuccess));
  EXPECT_NO_THROW(NJ_CUDA_TRY(CUSPARSE_STATUS_SUCCESS));
  EXPECT_NO_THROW(NJ_CUDA_TRY(ncclInProgress));  // a non-blocking NCCL call still running
  EXPECT_NO_THROW(NJ_CUDA_TRY_NO_THROW(cudaErrorInvalidValue));
}

}  // namespace
}  // namespace nj
#endif
