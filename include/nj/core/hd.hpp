#pragma once
// NJ_HD marks functions whose math is shared by the CPU loops and the CUDA kernels, so that the CPU tests
// cover the device arithmetic too.
#if defined(__CUDACC__)
#define NJ_HD __host__ __device__
#else
#define NJ_HD
#endif
