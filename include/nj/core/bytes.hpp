#pragma once
// Byte sizes as people write them: 512, 64K, 1.5M, 2G (binary multiples), and "unlimited".
#include <cstdint>
#include <limits>
#include <string>

namespace nj {

inline constexpr std::int64_t kUnlimited = std::numeric_limits<std::int64_t>::max();

// Throws nj::InputError on anything else; "unlimited" is kUnlimited.
std::int64_t parse_byte_size(const std::string& text);
// 1.50M, 20.3K, 512B, unlimited.
std::string format_bytes(std::int64_t bytes);

}  // namespace nj
