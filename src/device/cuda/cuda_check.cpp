#include "nj/device/cuda_check.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace nj::detail {

std::string describe_failed_call(const char* call, const char* file, int line, const char* name, const char* text) {
  return fmt::format("{} failed at {}:{}: {} ({})", call, file, line, name, text);
}

void throw_failed_call(const char* call, const char* file, int line, const char* name, const char* text) {
  throw CudaError(describe_failed_call(call, file, line, name, text));
}

void log_failed_call(const char* call, const char* file, int line, const char* name, const char* text) noexcept {
  try {
    spdlog::error("{}", describe_failed_call(call, file, line, name, text));
  } catch (...) {  // NOLINT(bugprone-empty-catch): logging must not throw where this is called
  }
}

}  // namespace nj::detail
