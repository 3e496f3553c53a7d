# Resolves NJ_ENABLE_CUDA (ON, OFF, or AUTO: on where nvcc is found) and finds what the CUDA device, backend
# and NCCL communicator link: the runtime, cuBLAS, cuSPARSE and NCCL. Toolchain rules: C++17 for .cu files
# (CMake 3.25 has no C++20 dialect for CUDA), the shared runtime, and fixed architectures (sm_80, sm_90)
# instead of `native`, so that a machine without a GPU builds what a GPU machine runs.
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
  # NCCL ships beside the toolkit (lib/ next to lib64/) or in /usr/local; CMake has no module for it.
  find_path(NJ_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/include REQUIRED)
  find_library(NJ_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} "${CUDAToolkit_LIBRARY_ROOT}/lib"
               "${CUDAToolkit_LIBRARY_DIR}/../lib" /usr/local/lib REQUIRED)
  add_library(nj_nccl INTERFACE)
  target_include_directories(nj_nccl SYSTEM INTERFACE "${NJ_NCCL_INCLUDE_DIR}")
  target_link_libraries(nj_nccl INTERFACE "${NJ_NCCL_LIBRARY}")
  message(STATUS "NeutronJittor: NCCL ${NJ_NCCL_LIBRARY}")
endif()
message(STATUS "NeutronJittor: CUDA backend ${NJ_HAVE_CUDA} (NJ_ENABLE_CUDA=${NJ_ENABLE_CUDA})")
