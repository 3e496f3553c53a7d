#pragma once
// Each `nj` subcommand registers itself on the top-level app; its callback does the work and throws on error.
#include <CLI/CLI.hpp>

namespace nj::cli {

void add_convert_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_train_command(CLI::App& app);

// Applies a TOML (or INI) file to a parsed subcommand: each key is a long option name without the dashes, and
// options given on the command line take precedence. CLI11 2.1 reads config files only for the top-level app.
void apply_config_file(CLI::App& command, const std::string& path);

}  // namespace nj::cli
