#include "cli/commands.hpp"

namespace nj::cli {

void add_convert_command(CLI::App& app) { app.add_subcommand("convert", "(in progress)"); }

}  // namespace nj::cli
