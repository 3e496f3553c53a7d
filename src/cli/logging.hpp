#pragma once
// How nj logs: "[12:00:01.234] [info] ..." on standard output, at the level --log-level sets, the level's name
// coloured as --color says. `auto` colours only where standard output is a terminal the user sees: not a rank of
// mpirun's or srun's, which mpirun runs on a pseudo-terminal even where its own output goes to a file; and not
// where NO_COLOR is set (to anything but nothing), which only `always` overrides.
#include <string>
#include <string_view>

namespace nj::cli {

// `level`: trace, debug, info, warn, error or off; `color`: auto, always or never.
void set_up_logging(std::string_view level, std::string_view color);

// A line that ends a run's output whatever the log level (nj train's summary): logged at info, or printed plainly
// where the level is quieter.
void print_always(const std::string& line);

}  // namespace nj::cli
