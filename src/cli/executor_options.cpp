#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "nj/core/bytes.hpp"
#include "nj/core/error.hpp"

namespace nj::cli {

ModelConfig ModelArguments::resolve() const {
  ModelConfig resolved = config;
  resolved.kind = parse_model_kind(model);
  resolved.activation = activation.empty() ? default_activation(resolved.kind) : parse_activation(activation);
  return resolved;
}

bool ModelArguments::default_to(const ModelConfig& checkpoint) {
  bool any = false;
  const auto take = [&](const char* option, auto& field, const auto& value) {
    if (command->get_option(option)->count() > 0) return;
    field = value;
    any = true;
  };
  take("--model", model, std::string(to_string(checkpoint.kind)));
  take("--layers", config.layers, checkpoint.layers);
  take("--hidden", config.hidden, checkpoint.hidden);
  take("--heads", config.heads, checkpoint.heads);
  take("--output-heads", config.output_heads, checkpoint.output_heads);
  take("--activation", activation, std::string(to_string(checkpoint.activation)));
  take("--dropout", config.dropout, checkpoint.dropout);
  take("--attention-dropout", config.attention_dropout, checkpoint.attention_dropout);
  take("--gin-eps", config.gin_eps, checkpoint.gin_eps);
  take("--gin-train-eps", config.gin_train_eps, checkpoint.gin_train_eps);
  take("--propagation-steps", config.propagation_steps, checkpoint.propagation_steps);
  take("--teleport", config.teleport, checkpoint.teleport);
  take("--seed", config.seed, checkpoint.seed);
  return any;
}

void add_model_options(CLI::App& cmd, ModelArguments& args) {
  args.command = &cmd;
  cmd.add_option("--model", args.model,
                 "Model: gcn, gat, sage (GraphSAGE, mean), gin (sum, then a 2-layer MLP) or appnp (an MLP, then "
                 "propagation)")
      ->check(one_of({"gcn", "gat", "sage", "gin", "appnp"}))
      ->capture_default_str();
  cmd.add_option("--layers", args.config.layers, "Number of layers (APPNP: of its MLP)")
      ->check(at_least(1))
      ->capture_default_str();
  cmd.add_option("--hidden", args.config.hidden, "Hidden width (GAT: channels per head)")
      ->check(at_least(1))
      ->capture_default_str();
  cmd.add_option("--heads", args.config.heads, "GAT heads in hidden layers (concatenated)")
      ->check(at_least(1))
      ->capture_default_str();
  cmd.add_option("--output-heads", args.config.output_heads, "GAT heads in the output layer (averaged)")
      ->check(at_least(1))
      ->capture_default_str();
  cmd.add_option("--activation", args.activation, "Activation between layers: relu or elu [relu for GCN, elu for GAT]")
      ->check(one_of({"relu", "elu"}));
  cmd.add_option("--dropout", args.config.dropout, "Dropout on every layer's input rows")
      ->check(between(0.0, 0.99))
      ->capture_default_str();
  cmd.add_option("--attention-dropout", args.config.attention_dropout, "GAT dropout on attention coefficients")
      ->check(between(0.0, 0.99))
      ->capture_default_str();
  cmd.add_option("--gin-eps", args.config.gin_eps, "GIN's ε: the vertex's own row counts 1+ε times")
      ->capture_default_str();
  cmd.add_flag("--gin-train-eps", args.config.gin_train_eps, "GIN's ε is learnt, starting from --gin-eps");
  cmd.add_option("--propagation-steps", args.config.propagation_steps, "APPNP's propagation steps K")
      ->check(at_least(1))
      ->capture_default_str();
  cmd.add_option("--teleport", args.config.teleport, "APPNP's teleport probability α")
      ->check(between(0.0, 1.0))
      ->capture_default_str();
  cmd.add_option("--seed", args.config.seed, "Seed of weights and dropout masks")->capture_default_str();
}

void add_executor_options(CLI::App& cmd, ExecutorArguments& args) {
  cmd.add_option("--execution", args.execution,
                 "reuse (embedding reuse, layer by layer), recompute (each subgraph through all layers: the "
                 "baseline), in-memory (plain full-graph training, the whole graph on the device), or auto "
                 "(in-memory unless --device-memory is given)")
      ->check(one_of({"auto", "reuse", "recompute", "in-memory"}))
      ->capture_default_str();
  cmd.add_option("--device-memory", args.device_memory,
                 "Device memory budget, e.g. 512M or 2G (K/M/G/T suffixes), or unlimited")
      ->check(byte_size())
      ->capture_default_str();
  cmd.add_option("--cache-policy", args.cache_policy,
                 "What stays on the device: st-aware, lru, fifo, degree, size-order, belady or none")
      ->check(one_of({"st-aware", "lru", "fifo", "degree", "size-order", "belady", "none"}))
      ->capture_default_str();
  cmd.add_option("--vertex-order", args.vertex_order,
                 "How a rank numbers its vertices: community (neighbours together, for cache locality) or input "
                 "(as stored); results differ only in rounding")
      ->check(one_of({"community", "input"}))
      ->capture_default_str();
  cmd.add_option("--host-blocks", args.host_blocks,
                 "Within a budget: keep every subgraph's graph block in host memory when they take at most this much "
                 "together; otherwise each step builds its block as it runs, holding one at a time (less memory, "
                 "a little more time per step)")
      ->check(byte_size())
      ->capture_default_str();
  cmd.add_option("--sparse-inputs", args.sparse_inputs,
                 "Whether the first layer multiplies the features as sparse rows (their non-zero entries: SpMM, "
                 "dropout and the weight gradient over those alone) or dense ones: on, off, or auto (sparse where at "
                 "most 1 entry in 16 is non-zero); results differ only in rounding")
      ->check(one_of({"auto", "on", "off"}))
      ->capture_default_str();
  cmd.add_option("--recompute-outputs", args.recompute_outputs,
                 "Within a budget on one rank, where each layer transforms the previous one's outputs as they are "
                 "aggregated: whether training computes those outputs again in the backward half instead of keeping "
                 "them on the host: on, off, or auto (only on a GPU, where moving them costs more: from the first "
                 "layer's sums of its inputs, or by aggregating again, an attention layer's)")
      ->check(one_of({"auto", "on", "off"}))
      ->capture_default_str();
}

ExecutorChoice parse_executor_choice(const ExecutorArguments& args) {
  ExecutorChoice choice;
  choice.options.device_budget = parse_byte_size(args.device_memory);
  choice.automatic = args.execution == "auto";
  choice.in_memory = args.execution == "in-memory" || (choice.automatic && choice.options.device_budget == kUnlimited);
  if (!choice.in_memory)
    choice.options.mode = choice.automatic ? ExecutionMode::kReuse : parse_execution_mode(args.execution);
  choice.options.policy = parse_cache_policy(args.cache_policy);
  choice.options.kept_block_bytes = parse_byte_size(args.host_blocks);
  choice.options.recompute_outputs = parse_recompute_outputs(args.recompute_outputs);
  choice.vertex_order = parse_vertex_order(args.vertex_order);
  choice.sparse_inputs = parse_sparse_inputs(args.sparse_inputs);
  // Ids numbered by community are already a locality order: subgraphs are cut in it, with no search of their own.
  if (choice.vertex_order == VertexOrder::kCommunity) choice.options.cut_order = CutOrder::kVertexIds;
  NJ_USAGE(!choice.in_memory || choice.options.device_budget == kUnlimited,
           "--device-memory needs --execution reuse or recompute (in-memory training has no budget)");
  return choice;
}

namespace {

// " (+ graph 12.0M, slots and ids 1.2M, parameters 84.8K)": what moved besides rows, by what it carried.
std::string format_other(const TrafficBytes& other) {
  std::string parts;
  for (const auto& [kind, name] : {std::pair{Traffic::kStructure, "graph"}, std::pair{Traffic::kIndex, "slots and ids"},
                                   std::pair{Traffic::kParameters, "parameters"}}) {
    if (other[kind] > 0) parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", name, format_bytes(other[kind]));
  }
  return parts.empty() ? std::string() : fmt::format(" (+ {})", parts);
}

}  // namespace

std::string format_copies(const ExecutionMetrics& m) {
  return fmt::format("h2d {}{} d2h {}{}", format_bytes(m.h2d_bytes), format_other(m.h2d_other),
                     format_bytes(m.d2h_bytes), format_other(m.d2h_other));
}

std::string format_execution(const ExecutionMetrics& m) {
  return fmt::format(" | {} | hit {:.1f}% | rows computed {:.2f}x | peak {} | wait {:.3f} s", format_copies(m),
                     100.0 * m.hit_rate(), m.recompute_ratio(), format_bytes(m.peak_device_footprint_bytes),
                     m.wait_seconds);
}

}  // namespace nj::cli
