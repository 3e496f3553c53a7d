#include "cli/validators.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "nj/core/bytes.hpp"
#include "nj/core/error.hpp"
#include "nj/core/printable.hpp"

namespace nj::cli {
namespace {

std::optional<double> number(const std::string& text) {
  std::size_t consumed = 0;
  try {
    const double value = std::stod(text, &consumed);
    if (consumed == text.size()) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// "3", "0.99": as the rule was written, without trailing zeros.
std::string written(double value) { return fmt::format("{}", value); }

}  // namespace

CLI::Validator at_least(double least) {
  return {[least](std::string& text) {
            const std::optional<double> value = number(text);
            if (value && *value >= least) return std::string();
            return fmt::format("must be at least {}, not '{}'", written(least), printable(text));
          },
          fmt::format("at least {}", written(least))};
}

CLI::Validator between(double low, double high) {
  return {[low, high](std::string& text) {
            const std::optional<double> value = number(text);
            if (value && *value >= low && *value <= high) return std::string();
            return fmt::format("must be between {} and {}, not '{}'", written(low), written(high), printable(text));
          },
          fmt::format("{} to {}", written(low), written(high))};
}

CLI::Validator one_of(std::vector<std::string> names) {
  const std::string listed = fmt::format("{}", fmt::join(names, ", "));
  return {[names = std::move(names), listed](std::string& text) {
            if (std::find(names.begin(), names.end(), text) != names.end()) return std::string();
            return fmt::format("must be one of {}, not '{}'", listed, printable(text));
          },
          fmt::format("{{{}}}", listed)};
}

CLI::Validator byte_size() {
  return {[](std::string& text) {
            try {
              parse_byte_size(text);
              return std::string();
            } catch (const InputError&) {
              return fmt::format("must be a size such as 512M, 2G or 1048576, or unlimited, not '{}'", printable(text));
            }
          },
          "SIZE"};
}

}  // namespace nj::cli
