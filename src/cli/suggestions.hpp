#pragma once
// "Did you mean" for a mistyped subcommand, option or configuration key.
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nj::cli {

// The candidate closest to `typed` in edit distance (a swap of two neighbours counting as one edit), where it is
// close enough to be what was meant: at most one edit per three characters typed, and at least one.
std::optional<std::string> closest_name(std::string_view typed, const std::vector<std::string>& candidates);

// The long option names of `command` and of the commands above it (whose options fall through), without dashes.
std::vector<std::string> long_option_names(const CLI::App& command);

// The message of a failed parse of `app`, with what the line most likely meant where an argument it left over is
// close to an option of the command named ("...; did you mean '--epochs'?") or, where it named none, to a
// command ("'trian' is not a command of nj; did you mean 'train'?").
std::string parse_failure_message(const CLI::App& app, const CLI::Error& error);

}  // namespace nj::cli
