#include "cli/commands.hpp"

namespace nj::cli {

void add_generate_command(CLI::App& app) { app.add_subcommand("generate", "(in progress)"); }

}  // namespace nj::cli
