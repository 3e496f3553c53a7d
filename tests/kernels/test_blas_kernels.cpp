#include <gtest/gtest.h>

#include <regex>

#include "nj/kernels/blas_kernels.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

constexpr CpuFeatures kAvx512{.avx2_fma = true, .avx512 = true};
constexpr CpuFeatures kAvx2{.avx2_fma = true, .avx512 = false};
constexpr CpuFeatures kOlder{};

TEST(BlasKernels, AGenericCoreOnAModernCpuGetsTheKernelsItsFeaturesRun) {
  EXPECT_EQ(better_openblas_core("Prescott", kAvx512), "SkylakeX");
  EXPECT_EQ(better_openblas_core("Prescott", kAvx2), "Haswell");
  EXPECT_EQ(better_openblas_core("Sandybridge", kAvx2), "Haswell");
  EXPECT_EQ(better_openblas_core("haswell", kAvx512), "SkylakeX");
}

TEST(BlasKernels, ADetectionAsGoodAsTheFeaturesIsLeftAlone) {
  for (const char* core : {"SkylakeX", "Cooperlake", "SapphireRapids", "skylakex"}) {
    EXPECT_EQ(better_openblas_core(core, kAvx512), std::nullopt) << core;
  }
  for (const char* core : {"Haswell", "Zen", "SkylakeX"}) EXPECT_EQ(better_openblas_core(core, kAvx2), std::nullopt);
  EXPECT_EQ(better_openblas_core("Prescott", kOlder), std::nullopt);
}

// nj restarts itself where OpenBLAS picked weaker kernels than the CPU runs: OpenBLAS names, as it loads, the
// core it runs, and the last one named (that of the process that goes on) leaves nothing better.
TEST(BlasKernels, NjRunsTheKernelsTheCpuRuns) {
  const test::CommandResult run = test::run_nj("--version", "env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::regex core_line("Core: ([A-Za-z0-9]+)");
  std::string last;
  for (auto it = std::sregex_iterator(run.output.begin(), run.output.end(), core_line); it != std::sregex_iterator();
       ++it) {
    last = (*it)[1];
  }
  if (last.empty()) GTEST_SKIP() << "this OpenBLAS does not name its core: " << run.output;
  EXPECT_EQ(better_openblas_core(last, cpu_features()), std::nullopt) << run.output;
}

}  // namespace
}  // namespace nj
