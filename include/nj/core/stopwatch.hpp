#pragma once
// Wall-clock seconds for the logs: epochs, planning stages.
#include <chrono>

namespace nj {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace nj
