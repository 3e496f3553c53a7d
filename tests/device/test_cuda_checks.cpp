// What only the CUDA build has, checked without a GPU: nj links the CUDA libraries, and NJ_CUDA_TRY says what
// a failed CUDA, cuSPARSE, cuBLAS or NCCL call was (statuses are values: no call needs to fail for real).
#include <gtest/gtest.h>

#if NJ_HAVE_CUDA
#include <functional>
#include <string>

#include "nj/device/cuda_check.hpp"
#include "support/device_checks.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

std::string message_of(const std::function<void()>& call) { return test::message_of<CudaError>(call); }

TEST(CudaBuild, NjLinksTheCudaRuntimeCublasCusparseAndNccl) {
  const test::CommandResult ldd = test::run_shell("ldd " + test::shell_quote(NJ_BINARY));
  ASSERT_EQ(ldd.exit_code, 0) << ldd.output;
  const std::string& libraries = ldd.output;
  for (const char* library : {"libcudart.so", "libcublas.so", "libcusparse.so", "libnccl.so"}) {
    EXPECT_NE(libraries.find(library), std::string::npos) << library << " is not linked:\n" << libraries;
  }
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
