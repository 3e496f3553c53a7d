// nj plan: plans an epoch of the subgraph executor without training, and compares the cache policies.
#include <spdlog/spdlog.h>

#include <chrono>
#include <iostream>

#include "cli/commands.hpp"
#include "nj/io/dataset_file.hpp"

namespace nj::cli {
namespace {

struct PlanArguments {
  std::string dataset;
  ModelArguments model;
  ExecutorArguments executor;
  bool all_policies = false;
  bool list_subgraphs = false;
};

void run_plan(PlanArguments& args) {
  Dataset dataset = read_dataset(args.dataset);
  Model model(args.model.resolve(), dataset.features.cols(), dataset.num_classes);
  const LocalGraph local = whole_local_graph(std::move(dataset.graph));
  const ExecutorChoice choice = parse_executor_choice(args.executor);

  const auto start = std::chrono::steady_clock::now();
  EpochPlan plan = plan_epoch(model, local, choice.options);
  plan.memory = forecast_device_memory(*make_cpu_backend(), model, local, dataset.features.view(), plan);
  spdlog::info("planned in {:.2f} s", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  log_plan(plan);
  // Each category at the moment the footprint peaked, and at its own highest.
  std::cout << fmt::format("device memory: peak {} of budget {}\n", format_bytes(plan.memory.peak_footprint_bytes),
                           format_bytes(plan.options.device_budget));
  std::cout << fmt::format("  {:<26} {:>12} {:>14}\n", "category", "at the peak", "most at once");
  for (const auto& [category, most] : plan.memory.category_peaks) {
    const auto at = plan.memory.at_peak.find(category);
    std::cout << fmt::format("  {:<26} {:>12} {:>14}\n", category,
                             format_bytes(at == plan.memory.at_peak.end() ? 0 : at->second), format_bytes(most));
  }
  std::cout << fmt::format("  {:<26} {:>12}\n", "alignment, fragmentation",
                           format_bytes(plan.memory.padding_at_peak()));
  if (const std::int64_t short_by = device_memory_shortfall(plan); short_by > 0) {
    std::cout << fmt::format("the budget {} is {} short\n", format_bytes(plan.options.device_budget),
                             format_bytes(short_by));
  }
  if (args.list_subgraphs) {
    for (const Pass& pass : plan.passes) {
      for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) {
        for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
          const Subgraph& s = pass.layer_parts[l][k];
          std::cout << fmt::format("layer {} subgraph {}: {} destinations, {} sources, {} edges\n", l + 1, k,
                                   s.num_dst(), s.sources.size(), s.block.src_index.size());
        }
      }
    }
    for (std::size_t k = 0; k < plan.closures.size(); ++k) {
      std::cout << fmt::format("subgraph {}: {} destinations\n", k, plan.closures[k].size());
    }
  }

  std::vector<CachePolicy> policies = {choice.options.policy};
  if (args.all_policies) {
    policies = {CachePolicy::kStAware,   CachePolicy::kLru,    CachePolicy::kFifo, CachePolicy::kDegree,
                CachePolicy::kSizeOrder, CachePolicy::kBelady, CachePolicy::kNone};
  }
  std::cout << fmt::format("{:<11} {:>12} {:>12} {:>12} {:>9}\n", "policy", "h2d", "d2h", "total", "hit rate");
  for (const CachePolicy policy : policies) {
    SubgraphExecutorOptions options = choice.options;
    options.policy = policy;
    const EpochPlan t = policy == plan.options.policy ? EpochPlan{} : plan_epoch(model, local, options);
    const EpochPlan& p = policy == plan.options.policy ? plan : t;
    const auto accesses = p.cache_hits + p.cache_misses;
    std::cout << fmt::format(
        "{:<11} {:>12} {:>12} {:>12} {:>8.1f}%\n", to_string(policy), format_bytes(p.h2d_bytes),
        format_bytes(p.d2h_bytes), format_bytes(p.h2d_bytes + p.d2h_bytes),
        accesses > 0 ? 100.0 * static_cast<double>(p.cache_hits) / static_cast<double>(accesses) : 100.0);
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArguments>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Plan an epoch of the subgraph executor (subgraphs, device budget, predicted transfers) without training");
  cmd->add_option("dataset,--dataset", args->dataset, "Dataset file (HDF5)")->required()->check(CLI::ExistingFile);
  add_model_options(*cmd, args->model);
  add_executor_options(*cmd, args->executor, false);
  cmd->add_flag("--all-policies", args->all_policies, "Predict the transfers of every cache policy");
  cmd->add_flag("--list-subgraphs", args->list_subgraphs, "Print every subgraph's size");
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace nj::cli
