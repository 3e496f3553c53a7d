#pragma once
// This process's host memory, as the kernel and the allocator count it, and what the machine has left.
#include <cstdint>

namespace nj {

struct ResidentMemory {
  std::int64_t current = 0;          // VmRSS, bytes
  std::int64_t peak = 0;             // the most resident at once since the process started
  std::int64_t peak_since_mark = 0;  // the most resident at once since mark_peak (VmHWM)
};

// Zeros where /proc is not there to read.
ResidentMemory resident_memory();

// Starts a new span of ResidentMemory::peak_since_mark, so that each phase of a command can log its own peak: the
// kernel's VmHWM is reset to what is resident now (/proc/self/clear_refs), and what it held before is kept for
// ResidentMemory::peak. Where the reset is not allowed, peak_since_mark stays the whole process's peak.
void mark_peak();

// This process's resident bytes when it first called this: nj's main calls it once its libraries are loaded and MPI
// is up, before it reads any data, so that it is what the process holds for its code and libraries alone. The same
// binary holds about as much in every command, which is how nj plan forecasts what nj train will hold.
std::int64_t resident_at_start();

// Bytes malloc has handed out and not yet taken back (glibc's mallinfo2, or the sanitizer allocator's count): how
// planning measures what its own structures hold.
std::int64_t heap_bytes_in_use();

// Bytes this process can still take before the kernel runs out: the least of /proc/meminfo's MemAvailable and,
// inside a cgroup (v2) with a limit, the limit less the group's usage; -1 where neither can be read.
std::int64_t available_host_bytes();

}  // namespace nj
