#pragma once
#include <string_view>

namespace nj {
inline constexpr std::string_view kVersion = "0.1.0";
}  // namespace nj
