#include "cli/commands.hpp"

namespace nj::cli {

void add_train_command(CLI::App& app) { app.add_subcommand("train", "(in progress)"); }

}  // namespace nj::cli
