# NJ_SANITIZE: the -fsanitize= list every target compiles and links with ("address,undefined", "thread"; empty for
# none). The CMake presets and scripts/test-sanitizers.sh set it, so both build the same way. Global flags rather
# than an interface target: the sanitizer runtimes need every object of a binary instrumented, tests included.
set(NJ_SANITIZE "" CACHE STRING "Sanitizers to build with, as -fsanitize= takes them (e.g. address,undefined or thread)")
if(NJ_SANITIZE)
  if(NJ_HAVE_CUDA)
    # The sanitizer runtimes intercept the allocations and threads the CUDA driver makes and fail on them.
    message(FATAL_ERROR "NJ_SANITIZE=${NJ_SANITIZE} needs NJ_ENABLE_CUDA=OFF")
  endif()
  if(NJ_BUILD_FUZZERS)
    message(FATAL_ERROR "NJ_BUILD_FUZZERS brings its own sanitizers (cmake/Fuzzing.cmake): leave NJ_SANITIZE empty")
  endif()
  # Readable stacks, and the first report fails the test instead of scrolling past.
  set(nj_sanitize_flags -fsanitize=${NJ_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${nj_sanitize_flags}>")
  add_link_options(${nj_sanitize_flags})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC's manual: sanitizers raise false -Wmaybe-uninitialized (here inside libstdc++'s <regex>); the build
    # without sanitizers keeps the warning.
    target_compile_options(nj_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
  elseif(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # ThreadSanitizer's instrumentation of every load and store keeps Clang from vectorising some loops that
    # `#pragma omp simd` asks it to, and Clang says so with -Wpass-failed. The pragma is a speed hint, not a
    # correctness one, so the sanitized build lets it go; the optimised builds keep the warning.
    target_compile_options(nj_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-pass-failed>)
  endif()
  message(STATUS "NeutronJittor: sanitizers ${NJ_SANITIZE}")
endif()
