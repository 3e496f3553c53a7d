# Every dependency comes from a Debian 12 package (scripts/setup.sh installs them).
set(HDF5_PREFER_PARALLEL ON)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(MPI REQUIRED COMPONENTS C)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(CLI11 REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(ZLIB REQUIRED)

# OpenBLAS built on OpenMP (libopenblas-openmp-dev) runs its GEMMs on the same libgomp team as the kernels around
# them; the pthread build's workers spin for the cores after each GEMM while OpenMP's loop that follows wants them
# (docs/performance.md: a GCN epoch 1.24 times as long). Debian installs both side by side and picks one for the
# system; nj links the one named here by its folder and finds it there at run time (CMake's build RPATH). The tsan
# preset links the pthread build: its processes run LLVM's OpenMP runtime, beside which the OpenMP build would
# load GCC's.
set(NJ_OPENBLAS_VARIANT "openmp" CACHE STRING "Debian's OpenBLAS build to link: openmp or pthread")
set_property(CACHE NJ_OPENBLAS_VARIANT PROPERTY STRINGS openmp pthread)
# Cached per variant, so that changing the variant in a configured build folder finds the other one.
find_library(NJ_OPENBLAS_LIBRARY_${NJ_OPENBLAS_VARIANT} openblas
             PATHS "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-${NJ_OPENBLAS_VARIANT}" NO_DEFAULT_PATH REQUIRED)
find_path(NJ_CBLAS_INCLUDE_DIR_${NJ_OPENBLAS_VARIANT} cblas.h
          PATHS "/usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-${NJ_OPENBLAS_VARIANT}" NO_DEFAULT_PATH REQUIRED)
add_library(nj_blas INTERFACE)
target_link_libraries(nj_blas INTERFACE ${NJ_OPENBLAS_LIBRARY_${NJ_OPENBLAS_VARIANT}})
target_include_directories(nj_blas SYSTEM INTERFACE ${NJ_CBLAS_INCLUDE_DIR_${NJ_OPENBLAS_VARIANT}})

# Debian's METIS ships no CMake config; its idx_t is 32-bit.
find_path(METIS_INCLUDE_DIR metis.h REQUIRED)
find_library(METIS_LIBRARY metis REQUIRED)
add_library(nj_metis INTERFACE)
target_link_libraries(nj_metis INTERFACE ${METIS_LIBRARY})
target_include_directories(nj_metis SYSTEM INTERFACE ${METIS_INCLUDE_DIR})

# PT-Scotch, the distributed partitioner, in Debian's 64-bit flavour (libptscotch-dev's scotch-int64): every count of a
# whole graph may pass 2^31. Linked statically: the shared libraries of every flavour share one soname, and the loader
# would find the 32-bit ones first.
set(NJ_SCOTCH_DIR "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/scotch-int64")
find_path(NJ_PTSCOTCH_INCLUDE_DIR ptscotch.h PATHS /usr/include/scotch-int64 NO_DEFAULT_PATH REQUIRED)
foreach(library ptscotch scotch ptscotcherr)
  find_library(NJ_${library}_LIBRARY NAMES lib${library}.a PATHS "${NJ_SCOTCH_DIR}" NO_DEFAULT_PATH REQUIRED)
endforeach()
find_package(Threads REQUIRED)
add_library(nj_ptscotch INTERFACE)
target_link_libraries(nj_ptscotch INTERFACE ${NJ_ptscotch_LIBRARY} ${NJ_scotch_LIBRARY} ${NJ_ptscotcherr_LIBRARY}
                                            MPI::MPI_C Threads::Threads m)
target_include_directories(nj_ptscotch SYSTEM INTERFACE ${NJ_PTSCOTCH_INCLUDE_DIR})

add_library(nj_hdf5 INTERFACE)
target_link_libraries(nj_hdf5 INTERFACE ${HDF5_C_LIBRARIES} MPI::MPI_C)
target_include_directories(nj_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS})
target_compile_definitions(nj_hdf5 INTERFACE ${HDF5_C_DEFINITIONS})
if(NOT HDF5_IS_PARALLEL)
  message(STATUS "HDF5 found is the serial flavour; install libhdf5-openmpi-dev for the MPI one")
endif()
