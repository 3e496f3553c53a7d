# Resolves NJ_ENABLE_CUDA. The CUDA backend sources arrive with the CUDA issue (see the README's feature
# table); this file already settles the toolchain rules the project needs: C++17 for .cu files (CMake 3.25
# has no C++20 dialect for CUDA), the shared runtime, and fixed architectures instead of `native`. Until then
# one translation unit is compiled, to keep the shared headers CUDA-clean: tests/cuda/row_math_compiles.cu.
set(NJ_HAVE_CUDA OFF)
if(NJ_ENABLE_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(NJ_HAVE_CUDA ON)
  endif()
elseif(NJ_ENABLE_CUDA)
  set(NJ_HAVE_CUDA ON)
endif()

if(NJ_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80;90")
  endif()
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
message(STATUS "NeutronJittor: CUDA backend ${NJ_HAVE_CUDA} (NJ_ENABLE_CUDA=${NJ_ENABLE_CUDA})")
