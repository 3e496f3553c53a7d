#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "nj/core/bytes.hpp"
#include "nj/core/error.hpp"

namespace nj::cli {

ExecutorChoice parse_executor_choice(const std::string& execution, const std::string& device_memory,
                                     const std::string& cache_policy) {
  ExecutorChoice choice;
  choice.in_memory = execution == "in-memory";
  if (!choice.in_memory) choice.options.mode = parse_execution_mode(execution);
  choice.options.device_budget = parse_byte_size(device_memory);
  choice.options.policy = parse_cache_policy(cache_policy);
  NJ_REQUIRE(!choice.in_memory || choice.options.device_budget == kUnlimited,
             "--device-memory needs --execution reuse or recompute (in-memory training uses no device)");
  return choice;
}

void log_plan(const EpochPlan& plan) {
  std::string parts;
  for (std::size_t l = 0; l < plan.layer_parts.size(); ++l) {
    parts += fmt::format("{}layer {}: {} subgraphs", l == 0 ? "" : ", ", l + 1, plan.layer_parts[l].size());
  }
  if (plan.options.mode == ExecutionMode::kRecompute) parts = fmt::format("{} subgraphs", plan.closures.size());
  spdlog::info("plan: {} with {} cache, budget {} (pools {}, step buffers {}), {}, {} steps",
               to_string(plan.options.mode), to_string(plan.options.policy), format_bytes(plan.options.device_budget),
               format_bytes(plan.options.device_budget == kUnlimited ? kUnlimited : plan.pool_bytes),
               format_bytes(plan.options.device_budget == kUnlimited ? kUnlimited : plan.step_limit_bytes), parts,
               plan.steps.size());
  spdlog::info("plan: predicted per epoch: h2d {} (cache {}), d2h {} (cache {}), recompute ratio {:.3f}",
               format_bytes(plan.predicted_h2d_bytes()), format_bytes(plan.cache.h2d_bytes),
               format_bytes(plan.predicted_d2h_bytes()), format_bytes(plan.cache.d2h_bytes),
               static_cast<double>(plan.rows_computed) / static_cast<double>(plan.rows_needed));
}

std::string format_execution(const ExecutionMetrics& m) {
  return fmt::format(" | h2d {} d2h {} | hit {:.1f}% | recompute {:.2f} | peak {} | wait {:.3f} s",
                     format_bytes(m.h2d_bytes), format_bytes(m.d2h_bytes), 100.0 * m.hit_rate(), m.recompute_ratio(),
                     format_bytes(m.peak_device_bytes), m.wait_seconds);
}

}  // namespace nj::cli
