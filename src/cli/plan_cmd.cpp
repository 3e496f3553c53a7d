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
  std::string model = "gcn";
  ModelConfig config;
  std::string execution = "reuse";
  std::string device_memory = "unlimited";
  std::string cache_policy = "st-aware";
  bool all_policies = false;
  bool list_subgraphs = false;
};

void run_plan(PlanArguments& args) {
  args.config.kind = parse_model_kind(args.model);
  const Dataset dataset = read_dataset(args.dataset);
  const Model model(args.config, dataset.features.cols(), dataset.num_classes);
  ExecutorChoice choice = parse_executor_choice(args.execution, args.device_memory, args.cache_policy);
  NJ_REQUIRE(!choice.in_memory, "nj plan plans the subgraph executor: use --execution reuse or recompute");

  const auto start = std::chrono::steady_clock::now();
  const EpochPlan plan = plan_epoch(model, dataset.graph, choice.options);
  spdlog::info("planned in {:.2f} s", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  log_plan(plan);
  if (args.list_subgraphs) {
    for (std::size_t l = 0; l < plan.layer_parts.size(); ++l) {
      for (std::size_t k = 0; k < plan.layer_parts[l].size(); ++k) {
        const Subgraph& s = plan.layer_parts[l][k];
        std::cout << fmt::format("layer {} subgraph {}: {} destinations, {} sources, {} edges\n", l + 1, k, s.num_dst(),
                                 s.sources.size(), s.block.src_index.size());
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
    const CachePlan cache = policy == plan.options.policy ? plan.cache : plan_cache(plan.trace, policy);
    const std::int64_t h2d = cache.h2d_bytes + plan.stream_h2d_bytes;
    const std::int64_t d2h = cache.d2h_bytes + plan.stream_d2h_bytes;
    const auto accesses = cache.hits + cache.misses;
    std::cout << fmt::format(
        "{:<11} {:>12} {:>12} {:>12} {:>8.1f}%\n", to_string(policy), format_bytes(h2d), format_bytes(d2h),
        format_bytes(h2d + d2h),
        accesses > 0 ? 100.0 * static_cast<double>(cache.hits) / static_cast<double>(accesses) : 100.0);
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArguments>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Plan an epoch of the subgraph executor (subgraphs, device budget, predicted transfers) without training");
  cmd->add_option("dataset,--dataset", args->dataset, "Dataset file (HDF5)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--model", args->model, "Model: gcn or gat")
      ->check(CLI::IsMember({"gcn", "gat"}))
      ->capture_default_str();
  cmd->add_option("--layers", args->config.layers, "Number of layers")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--hidden", args->config.hidden, "Hidden width (GAT: channels per head)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--heads", args->config.heads, "GAT heads in hidden layers")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--output-heads", args->config.output_heads, "GAT heads in the output layer")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--execution", args->execution, "reuse or recompute")
      ->check(CLI::IsMember({"reuse", "recompute"}))
      ->capture_default_str();
  cmd->add_option("--device-memory", args->device_memory, "Device memory budget (K/M/G/T suffixes) or unlimited")
      ->capture_default_str();
  cmd->add_option("--cache-policy", args->cache_policy, "st-aware, lru, fifo, degree, size-order, belady or none")
      ->check(CLI::IsMember({"st-aware", "lru", "fifo", "degree", "size-order", "belady", "none"}))
      ->capture_default_str();
  cmd->add_flag("--all-policies", args->all_policies, "Predict the transfers of every cache policy");
  cmd->add_flag("--list-subgraphs", args->list_subgraphs, "Print every subgraph's size");
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace nj::cli
