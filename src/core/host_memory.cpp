#include "nj/core/host_memory.hpp"

#include <malloc.h>

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

namespace nj {

namespace {
// The process's peak before the last mark_peak reset the kernel's.
std::int64_t peak_before_mark = 0;
}  // namespace

ResidentMemory resident_memory() {
  ResidentMemory memory;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    std::istringstream fields(line);
    std::string key;
    std::int64_t kib = 0;
    fields >> key >> kib;
    if (key == "VmRSS:") memory.current = kib * 1024;
    if (key == "VmHWM:") memory.peak_since_mark = kib * 1024;
  }
  memory.peak = std::max(memory.peak_since_mark, peak_before_mark);
  return memory;
}

void mark_peak() {
  const std::int64_t peak = resident_memory().peak;
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5";
  clear_refs.flush();
  if (clear_refs) peak_before_mark = peak;
}

std::int64_t resident_at_start() {
  static const std::int64_t at_start = resident_memory().current;
  return at_start;
}

// Defined where a sanitizer runtime (ASan, TSan) replaces malloc: mallinfo2 then sees no allocations at all.
extern "C" std::size_t __sanitizer_get_current_allocated_bytes() __attribute__((weak));

std::int64_t heap_bytes_in_use() {
  if (__sanitizer_get_current_allocated_bytes != nullptr) {
    return static_cast<std::int64_t>(__sanitizer_get_current_allocated_bytes());
  }
  const struct mallinfo2 info = mallinfo2();
  return static_cast<std::int64_t>(info.uordblks + info.hblkhd);
}

namespace {

// The first number in a file, or -1 where it cannot be read or is "max".
std::int64_t number_in(const std::string& path) {
  std::ifstream in(path);
  std::int64_t value = -1;
  return in >> value ? value : -1;
}

std::int64_t mem_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    std::int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

}  // namespace

std::int64_t available_host_bytes() {
  std::int64_t available = mem_available();
  // The memory cgroup of this process, as /proc/self/cgroup names it: "0::/path" (v2) or "N:memory:/path" (v1).
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroup, line)) {
    std::int64_t limit = -1;
    std::int64_t usage = -1;
    if (line.starts_with("0::")) {
      const std::string folder = "/sys/fs/cgroup" + line.substr(3);
      limit = number_in(folder + "/memory.max");
      usage = number_in(folder + "/memory.current");
    } else if (const auto at = line.find(":memory:"); at != std::string::npos) {
      const std::string folder = "/sys/fs/cgroup/memory" + line.substr(at + 8);
      limit = number_in(folder + "/memory.limit_in_bytes");
      usage = number_in(folder + "/memory.usage_in_bytes");
    }
    // v1 writes "no limit" as a number near 2^63.
    if (limit > 0 && limit < (std::int64_t{1} << 60) && usage >= 0) {
      const std::int64_t left = std::max<std::int64_t>(0, limit - usage);
      available = available < 0 ? left : std::min(available, left);
    }
  }
  return available;
}

}  // namespace nj
