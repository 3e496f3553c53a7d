# NJ_BUILD_FUZZERS: one libFuzzer target per input reader (tests/fuzz; scripts/fuzz.sh builds and runs them).
# Every object is compiled with coverage instrumentation, ASan and UBSan, so that the fuzzer is guided by and
# checks the readers' code, not only the targets'. Global flags rather than an interface target: the sanitizer
# runtimes need every object of a binary instrumented.
if(NJ_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "NJ_BUILD_FUZZERS needs clang for libFuzzer: configure with -DCMAKE_C_COMPILER=clang "
                        "-DCMAKE_CXX_COMPILER=clang++ (scripts/fuzz.sh does)")
  endif()
  if(NOT NJ_BUILD_TESTS)
    message(FATAL_ERROR "NJ_BUILD_FUZZERS needs NJ_BUILD_TESTS: the fuzz targets live in tests/fuzz")
  endif()
  set(nj_fuzz_flags -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${nj_fuzz_flags}>")
  add_link_options(-fsanitize=address,undefined)
endif()
