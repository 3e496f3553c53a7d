#include "nj/io/input_limits.hpp"

#include <unistd.h>

#include <atomic>

#include "nj/core/bytes.hpp"
#include "nj/core/error.hpp"

namespace nj {
namespace {

std::int64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? std::int64_t{pages} * page_size : kUnlimited;
}

std::atomic<std::int64_t>& limit() {
  static std::atomic<std::int64_t> bytes{physical_memory()};
  return bytes;
}

}  // namespace

std::int64_t input_memory_limit() { return limit().load(); }

void set_input_memory_limit(std::int64_t bytes) { limit().store(bytes); }

void require_input_memory(std::int64_t count, std::int64_t bytes_each, std::string_view where, std::string_view what) {
  const std::int64_t allowed = input_memory_limit();
  // Divided rather than multiplied: a count read from a file may be large enough to overflow the product.
  NJ_REQUIRE(bytes_each <= 0 || count <= allowed / bytes_each,
             "{}: {} would take more than the {} of memory a reader may allocate", where, what, format_bytes(allowed));
}

}  // namespace nj
