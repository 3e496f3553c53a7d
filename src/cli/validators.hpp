#pragma once
// Validators for option values whose messages state the rule ("must be at least 1"): a mistake is then reported as
// one line naming the option and the rule, "nj: error: --hidden must be at least 1" (parse_failure_message).
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace nj::cli {

CLI::Validator at_least(double least);
CLI::Validator between(double low, double high);
// One of `names`, as typed.
CLI::Validator one_of(std::vector<std::string> names);
// A size such as 512M or 2G (parse_byte_size), or unlimited.
CLI::Validator byte_size();

}  // namespace nj::cli
