#pragma once
// NJ_HD marks functions whose math is shared by the CPU loops and the CUDA kernels, so that the CPU tests
// cover the device arithmetic too.
#if defined(__CUDACC__)
#define NJ_HD __host__ __device__
#else
#define NJ_HD
#endif

// NJ_SIMD asks the host compiler to vectorise the loop that follows, where OpenMP is on; device code and
// builds without OpenMP (a CUDA translation unit's host pass) see nothing.
#if defined(_OPENMP) && !defined(__CUDA_ARCH__)
#define NJ_SIMD _Pragma("omp simd")
#else
#define NJ_SIMD
#endif
