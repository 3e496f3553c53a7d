# Precompiled headers for the targets whose sources spend much of their compile time parsing the same third-party
# headers: the test suite (GoogleTest; its objects build 17 % faster with them) and the HDF5 readers (12 %). Each
# target parses them once. The command line's files, measured alike, gained nothing and go without. Turn
# NJ_PRECOMPILE_HEADERS off for tools that read compile_commands.json with another compiler (clang-tidy cannot load
# GCC's precompiled headers).
option(NJ_PRECOMPILE_HEADERS "Precompile the third-party headers of the readers and the tests" ON)

set(NJ_PCH_STANDARD_LIBRARY <algorithm> <chrono> <cmath> <cstdint> <filesystem> <fstream> <functional> <map>
                            <memory> <numeric> <optional> <string> <string_view> <vector>)

# nj_precompile_headers(TARGET HEADER...): TARGET precompiles the standard library's common headers and HEADERs.
function(nj_precompile_headers target)
  if(NJ_PRECOMPILE_HEADERS)
    target_precompile_headers(${target} PRIVATE ${NJ_PCH_STANDARD_LIBRARY} ${ARGN})
  endif()
endfunction()
