#pragma once
// How much host memory a reader may allocate on the word of its input (a vertex count, a dataset's shape, a
// column index): a size field in a bad file is then an error that names it, rather than an allocation that
// throws std::bad_alloc or that the kernel answers by killing the process.
#include <cstdint>
#include <string_view>

namespace nj {

// This machine's physical memory unless set_input_memory_limit changed it (the fuzz targets lower it).
std::int64_t input_memory_limit();
void set_input_memory_limit(std::int64_t bytes);

// Throws InputError "<where>: <what> would take more than the <limit> of memory a reader may allocate" when
// count x bytes_each bytes exceed the limit.
void require_input_memory(std::int64_t count, std::int64_t bytes_each, std::string_view where, std::string_view what);

}  // namespace nj
