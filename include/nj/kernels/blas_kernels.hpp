#pragma once
// Which GEMM kernels OpenBLAS runs. OpenBLAS picks them once, as it loads, from a table of CPU model numbers; a
// model newer than its table gets its generic SSE3 kernels ("Prescott"). Debian 12's OpenBLAS 0.3.21 does so on
// Emerald Rapids Xeons, where a GCN epoch then took 1.7 times as long as with the AVX-512 kernels the CPU runs. The
// CPU's features, not its model, say which kernels it can run; OPENBLAS_CORETYPE, read at load, picks them.
#include <optional>
#include <string>
#include <string_view>

namespace nj {

// The instruction sets OpenBLAS's x86 GEMM kernels are written for.
struct CpuFeatures {
  bool avx2_fma = false;  // OpenBLAS's Haswell kernels
  bool avx512 = false;    // F, DQ, BW and VL: its SkylakeX kernels
};

CpuFeatures cpu_features();

// The OpenBLAS core to ask for where the one it detected (`detected`, as openblas_get_corename() names it) has
// weaker kernels than `features` allow, else nothing: a detection as good as the features is left alone.
std::optional<std::string> better_openblas_core(std::string_view detected, CpuFeatures features);

// The core whose kernels OpenBLAS runs in this process.
std::string openblas_core();

}  // namespace nj
