add_library(nj_warnings INTERFACE)
target_compile_options(nj_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
    -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual -Wnull-dereference>)
# nvcc: its own warnings, and the host compiler's for the host side of .cu files.
target_compile_options(nj_warnings INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
if(NJ_WARNINGS_AS_ERRORS)
  target_compile_options(nj_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                               $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>)
endif()

add_library(nj_optimize INTERFACE)
if(NJ_NATIVE)
  target_compile_options(nj_optimize INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
