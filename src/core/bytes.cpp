#include "nj/core/bytes.hpp"

#include <cctype>
#include <cmath>

#include "nj/core/error.hpp"

namespace nj {

std::int64_t parse_byte_size(const std::string& text) {
  if (text == "unlimited") return kUnlimited;
  const auto fail = [&] {
    return InputError(fmt::format("'{}' is not a size (expected e.g. 512M, 2G, 1048576 or unlimited)", text));
  };
  std::size_t consumed = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &consumed);
  } catch (const std::exception&) {
    throw fail();
  }
  std::string suffix = text.substr(consumed);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix.size() == 2 && (suffix[1] == 'i' || suffix[1] == 'I')) suffix.pop_back();
  double scale = 1.0;
  if (!suffix.empty()) {
    const std::string units = "KMGT";
    const auto unit = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(suffix[0]))));
    if (suffix.size() != 1 || unit == std::string::npos) throw fail();
    scale = std::pow(1024.0, static_cast<double>(unit + 1));
  }
  if (!(value > 0.0) || !std::isfinite(value * scale) || value * scale >= 9.2e18) throw fail();
  return static_cast<std::int64_t>(std::llround(value * scale));
}

std::string format_bytes(std::int64_t bytes) {
  if (bytes == kUnlimited) return "unlimited";
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024.0 * 1024.0) return fmt::format("{:.2f}G", b / (1024.0 * 1024.0 * 1024.0));
  if (b >= 1024.0 * 1024.0) return fmt::format("{:.2f}M", b / (1024.0 * 1024.0));
  if (b >= 1024.0) return fmt::format("{:.1f}K", b / 1024.0);
  return fmt::format("{}B", bytes);
}

}  // namespace nj
