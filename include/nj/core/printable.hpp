#pragma once
// Pieces of an input quoted in error messages.
#include <string>
#include <string_view>

namespace nj {

// `text` with its control characters (a newline, a stray '\r', a NUL byte) written as \xNN escapes, so that an
// error message quoting it stays one line.
std::string printable(std::string_view text);

}  // namespace nj
