#pragma once
// Each `nj` subcommand registers itself on the top-level app; its callback does the work and throws on error.
#include <CLI/CLI.hpp>

namespace nj::cli {

void add_convert_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_train_command(CLI::App& app);

}  // namespace nj::cli
