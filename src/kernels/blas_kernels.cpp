#include "nj/kernels/blas_kernels.hpp"

#include <algorithm>
#include <array>
#include <cctype>

extern "C" char* openblas_get_corename();

namespace nj {
namespace {

enum class KernelLevel { kOlder, kAvx2, kAvx512 };

std::string lowercase(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// The instruction set of an OpenBLAS x86 core's single-precision GEMM kernels (OpenBLAS 0.3.21's names; cores of
// later releases named here too, so that a newer OpenBLAS is not overridden).
KernelLevel level_of(std::string_view core) {
  static constexpr std::array<std::string_view, 4> kAvx512{"skylakex", "cooperlake", "sapphirerapids", "zen4"};
  static constexpr std::array<std::string_view, 2> kAvx2{"haswell", "zen"};
  const std::string name = lowercase(core);
  if (std::find(kAvx512.begin(), kAvx512.end(), name) != kAvx512.end()) return KernelLevel::kAvx512;
  if (std::find(kAvx2.begin(), kAvx2.end(), name) != kAvx2.end()) return KernelLevel::kAvx2;
  return KernelLevel::kOlder;
}

}  // namespace

CpuFeatures cpu_features() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return {.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
          .avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")};
#else
  return {};
#endif
}

std::optional<std::string> better_openblas_core(std::string_view detected, CpuFeatures features) {
  const KernelLevel level = level_of(detected);
  if (features.avx512 && level < KernelLevel::kAvx512) return "SkylakeX";
  if (features.avx2_fma && level < KernelLevel::kAvx2) return "Haswell";
  return std::nullopt;
}

std::string openblas_core() {
  const char* name = openblas_get_corename();
  return name == nullptr ? "unknown" : name;
}

}  // namespace nj
