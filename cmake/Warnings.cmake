add_library(nj_warnings INTERFACE)
target_compile_options(nj_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
    -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual -Wnull-dereference>)
if(NJ_WARNINGS_AS_ERRORS)
  target_compile_options(nj_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()

add_library(nj_optimize INTERFACE)
if(NJ_NATIVE)
  target_compile_options(nj_optimize INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
