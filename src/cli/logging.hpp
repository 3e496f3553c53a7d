#pragma once
// How nj logs: "[12:00:01.234] [info] ..." on standard error, at the level --log-level sets, the level's name
// coloured as --color says; standard output carries only what a command produces (tables, JSON, its result line), so
// that it can be piped. `auto` colours only where standard error is a terminal the user sees: not a rank of
// mpirun's or srun's, which mpirun runs on a pseudo-terminal even where its own output goes to a file; and not
// where NO_COLOR is set (to anything but nothing), which only `always` overrides.
#include <string>
#include <string_view>

namespace nj::cli {

// `level`: trace, debug, info, warn, error or off; `color`: auto, always or never.
void set_up_logging(std::string_view level, std::string_view color);

// A command's result line (nj train's summary): on standard output, whatever the log level, without time or level.
void print_result(const std::string& line);

}  // namespace nj::cli
