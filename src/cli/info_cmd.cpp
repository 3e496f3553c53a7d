#include "cli/commands.hpp"

namespace nj::cli {

void add_info_command(CLI::App& app) { app.add_subcommand("info", "(in progress)"); }

}  // namespace nj::cli
