// One warning for each option given that the run does not use, so that a mistyped model or a forgotten
// --device-memory does not pass unnoticed.
#include <spdlog/spdlog.h>

#include <array>

#include "cli/commands.hpp"

namespace nj::cli {
namespace {

// What a run is, as far as its options go.
struct RunKind {
  bool in_memory = true;
  bool budgeted = false;
  int ranks = 1;
  bool partitioned_in_memory = false;  // several ranks cutting a dataset file
  bool on_gpu = false;
};

// An option, and why it does not apply to this run (empty where it does).
struct UseRule {
  const char* option;
  std::string (*unused_because)(const RunKind& run);
};

std::string only_within_a_budget(const RunKind& run) {
  if (run.in_memory)
    return "it applies to the subgraph executor only, and this run is in memory (give --device-memory)";
  if (!run.budgeted) return "it applies within a device budget only, and this run has none (give --device-memory)";
  return {};
}

std::string only_within_a_budget_on_one_rank(const RunKind& run) {
  std::string reason = only_within_a_budget(run);
  if (reason.empty() && run.ranks > 1)
    reason = fmt::format("it applies on one rank only, and this job has {}", run.ranks);
  return reason;
}

// The executor's options; a model's own options are the model area's to name (kind_reading_option).
constexpr std::array kRules{
    UseRule{"--cache-policy", only_within_a_budget},
    UseRule{"--host-blocks", only_within_a_budget},
    UseRule{"--recompute-outputs", only_within_a_budget_on_one_rank},
    UseRule{"--deterministic",
            [](const RunKind& r) {
              return r.on_gpu ? std::string() : std::string("it applies on a GPU only (--device cuda)");
            }},
    UseRule{"--partition-method",
            [](const RunKind& r) {
              return r.partitioned_in_memory
                         ? std::string()
                         : std::string("it applies where several ranks partition a dataset file, without --partitions");
            }},
};

}  // namespace

std::vector<std::string> unused_option_warnings(const CLI::App& command, const ModelConfig& model,
                                                const ExecutorChoice& choice, const RunContext& context) {
  const RunKind run{.in_memory = choice.in_memory,
                    .budgeted = !choice.in_memory && choice.options.device_budget != kUnlimited,
                    .ranks = context.ranks,
                    .partitioned_in_memory = context.ranks > 1 && !context.partitions_given,
                    .on_gpu = context.on_gpu};
  std::vector<std::string> warnings;
  for (const CLI::Option* option : command.get_options()) {
    const std::optional<ModelKind> reader = kind_reading_option(option->get_name());
    if (option->count() == 0 || !reader || *reader == model.kind) continue;
    warnings.push_back(fmt::format("{} is ignored: it applies to --model {} only, and this run's model is {}",
                                   option->get_name(), to_string(*reader), to_string(model.kind)));
  }
  for (const UseRule& rule : kRules) {
    const CLI::Option* option = command.get_option_no_throw(rule.option);
    if (option == nullptr || option->count() == 0) continue;
    if (const std::string reason = rule.unused_because(run); !reason.empty()) {
      warnings.push_back(fmt::format("{} is ignored: {}", rule.option, reason));
    }
  }
  return warnings;
}

void warn_unused_options(const CLI::App& command, const ModelConfig& model, const ExecutorChoice& choice,
                         const RunContext& context) {
  for (const std::string& warning : unused_option_warnings(command, model, choice, context))
    spdlog::warn("{}", warning);
}

}  // namespace nj::cli
