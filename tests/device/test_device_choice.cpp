// --device: which device a rank computes with, and which GPU, from the flag and the launcher's environment.
#include <gtest/gtest.h>

#include <string>

#include "nj/device/cuda.hpp"
#include "nj/runtime/resources.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::ScopedVariable;

TEST(DeviceChoice, NamesParseAndPrint) {
  for (const DeviceKind kind : {DeviceKind::kAuto, DeviceKind::kCpu, DeviceKind::kCuda}) {
    EXPECT_EQ(parse_device_kind(to_string(kind)), kind);
  }
  EXPECT_THROW(parse_device_kind("gpu"), InputError);
}

TEST(DeviceChoice, CpuIsTheEmulationAndSaysSo) {
  const DeviceChoice choice = choose_device(DeviceKind::kCpu);
  EXPECT_EQ(choice.kind, DeviceKind::kCpu);
  EXPECT_NE(choice.reason.find("as asked"), std::string::npos) << choice.reason;
  const Resources resources = make_resources(choice, {.budget_bytes = 1 << 20});
  EXPECT_EQ(resources.device->name(), "cpu");
  EXPECT_EQ(resources.device->budget_bytes(), 1 << 20);
  EXPECT_EQ(resources.backend->name(), "cpu");
}

TEST(DeviceChoice, AutoTakesTheGpuWhereThereIsOneAndTheCpuElse) {
  const DeviceChoice choice = choose_device(DeviceKind::kAuto);
  if (cuda_device_count() > 0) {
    EXPECT_EQ(choice.kind, DeviceKind::kCuda);
    EXPECT_NE(choice.reason.find("cuda (auto)"), std::string::npos) << choice.reason;
  } else {
    EXPECT_EQ(choice.kind, DeviceKind::kCpu);
    EXPECT_NE(choice.reason.find(cuda_built() ? kNoCudaDevice : "a build without CUDA"), std::string::npos)
        << choice.reason;
  }
}

TEST(DeviceChoice, CudaWithoutAGpuIsAnInputError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  try {
    choose_device(DeviceKind::kCuda);
    ADD_FAILURE() << "--device cuda was accepted without a GPU";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(cuda_built() ? kNoCudaDevice : "no CUDA backend"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_cuda_device(0, 1 << 20), InputError);
}

TEST(DeviceChoice, LocalRankAndSizeComeFromTheLauncher) {
  const ScopedVariable rank("OMPI_COMM_WORLD_LOCAL_RANK", "3");
  const ScopedVariable size("OMPI_COMM_WORLD_LOCAL_SIZE", "8");
  EXPECT_EQ(local_rank(), 3);
  EXPECT_EQ(local_size(), 8);
  {
    const ScopedVariable bad("OMPI_COMM_WORLD_LOCAL_RANK", "three");
    EXPECT_THROW(local_rank(), InputError);
  }
}

TEST(DeviceChoice, SlurmsLocalIdServesWhereOpenMpiIsSilent) {
  if (std::getenv("OMPI_COMM_WORLD_LOCAL_RANK") != nullptr) GTEST_SKIP() << "running under Open MPI";
  const ScopedVariable rank("SLURM_LOCALID", "1");
  EXPECT_EQ(local_rank(), 1);
}

}  // namespace
}  // namespace nj
