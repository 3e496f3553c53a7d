#pragma once
// Each `nj` subcommand registers itself on the top-level app; its callback does the work and throws on error.
#include <CLI/CLI.hpp>

#include "nj/exec/subgraph_executor.hpp"

namespace nj::cli {

void add_convert_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_plan_command(CLI::App& app);

// Applies a TOML (or INI) file to a parsed subcommand: each key is a long option name without the dashes, and
// options given on the command line take precedence. CLI11 2.1 reads config files only for the top-level app.
void apply_config_file(CLI::App& command, const std::string& path);

// The executor flags shared by `nj train` and `nj plan`.
struct ExecutorChoice {
  bool in_memory = false;
  SubgraphExecutorOptions options;
};
ExecutorChoice parse_executor_choice(const std::string& execution, const std::string& device_memory,
                                     const std::string& cache_policy);
// Logs a plan's subgraphs, pool and step budgets and predicted traffic.
void log_plan(const EpochPlan& plan);
// " | h2d 1.2M d2h 0.3M | hit 93.1% | recompute 1.00 | peak 4.0M" for an epoch's console line.
std::string format_execution(const ExecutionMetrics& metrics);

}  // namespace nj::cli
