#include "nj/core/error.hpp"

namespace nj::detail {

void throw_internal(const char* file, int line, const char* condition, const std::string& message) {
  throw Error(fmt::format("{} ({}:{}: check '{}' failed)", message, file, line, condition));
}

}  // namespace nj::detail
