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
# Floating-point traps are never enabled, so the compiler may evaluate both sides of a select: without this GCC
# keeps branches in elementwise loops (ReLU's gradient, dropout's mask) and vectorises none of them. Values are
# unchanged; only which exception flags a computation may raise.
target_compile_options(nj_optimize INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fno-trapping-math>)
if(NJ_NATIVE)
  target_compile_options(nj_optimize INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
