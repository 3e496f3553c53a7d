#pragma once
// One table names the values of an enum both ways, so that parsing a name and printing a value cannot disagree:
//   inline constexpr EnumNames<Colour, 2> kColourNames{"colour", {{{Colour::kRed, "red"}, {Colour::kBlue, "blue"}}}};
//   Colour parse_colour(const std::string& text) { return kColourNames.parse(text); }
//   const char* to_string(Colour colour) { return kColourNames.name(colour); }
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "nj/core/error.hpp"
#include "nj/core/printable.hpp"

namespace nj {

template <typename Enum, std::size_t N>
struct EnumNames {
  const char* what;  // what the values are, for the parse error: "cache policy"
  std::array<std::pair<Enum, const char*>, N> names;

  const char* name(Enum value) const {
    for (const auto& [candidate, name] : names) {
      if (candidate == value) return name;
    }
    NJ_EXPECTS(false, "{} {} has no name", what, static_cast<int>(value));
    return "";
  }

  // Throws nj::InputError naming what was given and every name accepted: "unknown cache policy 'x' (expected
  // st-aware, lru, ... or none)".
  Enum parse(std::string_view text) const {
    for (const auto& [value, name] : names) {
      if (text == name) return value;
    }
    std::string expected;
    for (std::size_t i = 0; i < N; ++i) {
      expected += i == 0 ? "" : (i + 1 == N ? " or " : ", ");
      expected += names[i].second;
    }
    throw InputError(fmt::format("unknown {} '{}' (expected {})", what, printable(text), expected));
  }
};

}  // namespace nj
