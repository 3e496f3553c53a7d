#pragma once
// This process's resident host memory, as the kernel counts it (Linux /proc/self/status).
#include <cstdint>

namespace nj {

struct ResidentMemory {
  std::int64_t current = 0;  // VmRSS, bytes
  std::int64_t peak = 0;     // VmHWM, bytes: the most resident at once since the process started
};

// Zeros where /proc is not there to read.
ResidentMemory resident_memory();

}  // namespace nj
