#include "nj/core/host_memory.hpp"

#include <fstream>
#include <sstream>
#include <string>

namespace nj {

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
    if (key == "VmHWM:") memory.peak = kib * 1024;
  }
  return memory;
}

}  // namespace nj
