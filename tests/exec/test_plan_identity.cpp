// Planning is made faster and smaller without changing what it plans: these tests hash everything an epoch plan
// tells the executor (subgraphs and their blocks, steps, exchange chunks, every slot and transfer of the cache
// plan, the predicted bytes) for a set of graphs, models, budgets and policies, cut in a breadth-first order and in
// community-ordered ids (CutOrder::kVertexIds), and compare the hashes with those recorded below. A change that is
// meant to change plans updates the hashes and says why in its commit message.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <type_traits>

#include "nj/exec/subgraph_executor.hpp"
#include "nj/graph/generate.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/partition/partition.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

// FNV-1a over the bytes of every value, with sizes in front of every list.
class Digest {
 public:
  template <typename T>
  requires std::is_arithmetic_v<T> || std::is_enum_v<T>
  void add(T value) {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    for (const unsigned char b : bytes) hash_ = (hash_ ^ b) * 1099511628211ULL;
  }
  template <typename T>
  void add(const std::vector<T>& values) {
    add(static_cast<std::uint64_t>(values.size()));
    for (const T& v : values) add(v);
  }
  void add(const std::string& text) {
    add(static_cast<std::uint64_t>(text.size()));
    for (const char c : text) add(c);
  }
  void add(const RowRef& r) {
    add(r.tensor);
    add(r.row);
  }
  void add(const SlotAssignment& a) {
    add(a.row);
    add(a.slot);
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 14695981039346656037ULL;
};

void add_block(Digest& d, const Subgraph& part) {
  d.add(part.sources);
  const SparseBlock& b = part.block;
  d.add(b.num_src);
  d.add(b.dst_offsets);
  d.add(b.src_index);
  d.add(b.edge_weight);
  d.add(b.by_source.offsets);
  d.add(b.by_source.destinations);
  d.add(b.by_source.edge_position);
  d.add(b.out_weight);
  d.add(b.src_gid);
}

void add_pass(Digest& d, const Pass& pass, std::span<const gid_t> global_id) {
  d.add(pass.vertices);
  d.add(pass.num_rows);
  d.add(pass.num_outputs);
  d.add(pass.aggregated_rows);
  for (const auto& chunks : pass.transform_chunks) {
    for (const auto& chunk : chunks) d.add(chunk);
  }
  PassSubgraphs subgraphs(pass, global_id);
  for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) {
    d.add(static_cast<std::uint64_t>(pass.layer_parts[l].size()));
    for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) add_block(d, subgraphs.get(l, k));
  }
  for (const PlannedStep& s : pass.steps) {
    d.add(s.kind);
    d.add(s.layer);
    d.add(s.index);
  }
  d.add(static_cast<std::uint64_t>(pass.forward_steps));
  for (const LayerExchange& e : pass.exchange) {
    for (const auto& c : e.send_rows) d.add(c);
    for (const auto& c : e.send_gradients) d.add(c);
    for (const auto& c : e.receive_gradients) d.add(c);
    d.add(e.receive_first);
  }
  for (const ExchangePoints& p : pass.exchange_points) {
    d.add(static_cast<std::uint64_t>(p.start));
    d.add(static_cast<std::uint64_t>(p.finish));
  }
  const AccessTrace& trace = pass.trace;
  for (const TensorSpec& t : trace.tensors) {
    d.add(t.name);
    d.add(t.row_bytes);
    d.add(t.keep_on_host);
  }
  for (const auto& phase : trace.capacity_rows) d.add(phase);
  for (const TraceStep& s : trace.steps) {
    d.add(s.phase);
    d.add(s.fence);
  }
  const CachePlan& cache = pass.cache;
  for (const StepPlan& s : cache.steps) {
    d.add(s.evict_writeback);
    d.add(s.drops);
    d.add(s.loads);
    d.add(s.allocations);
    d.add(s.zeroed);
    d.add(s.prefetch);
    d.add(s.read_slots);
    d.add(s.write_slots);
    d.add(s.accumulate_slots);
  }
  for (const PhaseEnd& e : cache.phase_ends) d.add(e.writeback);
  d.add(cache.h2d_bytes);
  d.add(cache.d2h_bytes);
  d.add(cache.hits);
  d.add(cache.misses);
  for (const auto& phase : cache.peak_rows) d.add(phase);
  d.add(pass.largest_step_bytes);
  d.add(pass.stream_h2d_bytes);
  d.add(pass.stream_d2h_bytes);
  d.add(pass.rows_computed);
  for (const auto& layer : pass.outputs_stay) d.add(layer);
  if (pass.lasting) d.add(pass.lasting);
  if (pass.first_layer_sums_inputs) d.add(pass.first_layer_sums_inputs);
  // Chained layers, where a budget chains them (a plan that chains none hashes as before there were any).
  if (std::ranges::any_of(pass.chained, [](char c) { return c != 0; })) {
    d.add(pass.chained);
    d.add(pass.outputs_recomputed);
    for (const auto& layer : pass.own_destinations) {
      for (const auto& destinations : layer) d.add(destinations);
    }
  }
}

std::uint64_t digest(const EpochPlan& plan, std::span<const gid_t> global_id) {
  Digest d;
  d.add(plan.options.device_budget);
  d.add(plan.options.mode);
  d.add(plan.options.policy);
  for (const Pass& pass : plan.passes) add_pass(d, pass, global_id);
  for (const auto& closure : plan.closures) d.add(closure);
  for (const std::int64_t value :
       {plan.resident_bytes, plan.pool_bytes, plan.step_limit_bytes, plan.staging_limit_bytes, plan.largest_step_bytes,
        plan.largest_pass_rows, plan.largest_aggregated_rows, plan.num_steps, plan.peak_bytes_bound, plan.rows_computed,
        plan.rows_needed, plan.h2d_bytes, plan.d2h_bytes, plan.cache_h2d_bytes, plan.cache_d2h_bytes, plan.cache_hits,
        plan.cache_misses}) {
    d.add(value);
  }
  return d.value();
}

Dataset generated(std::int64_t vertices, std::int64_t edges, std::uint64_t seed) {
  GeneratorOptions options;
  options.vertices = vertices;
  options.edges = edges;
  options.features = 12;
  options.classes = 4;
  options.seed = seed;
  return generate_dataset(options);
}

ModelConfig gcn(int layers, int hidden) {
  ModelConfig config;
  config.layers = layers;
  config.hidden = hidden;
  return config;
}

ModelConfig gat(int hidden, int heads) {
  ModelConfig config;
  config.kind = ModelKind::kGat;
  config.hidden = hidden;
  config.heads = heads;
  return config;
}

// Every case's hash, keyed by a name that says what was planned; printed so that a deliberate change can copy
// them. `kept_block_bytes`: what a pass may keep of its blocks (0: steps build every one, as they run).
std::map<std::string, std::uint64_t> plan_hashes(std::int64_t kept_block_bytes) {
  std::map<std::string, std::uint64_t> hashes;
  const Dataset sbm = generated(3000, 40000, 1);
  const LocalGraph whole = whole_local_graph(sbm.graph);
  const auto plan_of = [&](const std::string& name, const ModelConfig& config, const LocalGraph& local,
                           double budget_factor, ExecutionMode mode, CachePolicy policy,
                           CutOrder cut = CutOrder::kBreadthFirst) {
    const Model model(config, sbm.features.cols(), sbm.num_classes);
    const std::int64_t budget =
        budget_factor > 0
            ? static_cast<std::int64_t>(budget_factor * static_cast<double>(minimum_device_budget(model, local)))
            : kUnlimited;
    SubgraphExecutorOptions options{budget, mode, policy, cut};
    options.kept_block_bytes = kept_block_bytes;
    options.cache_detail = CachePlanDetail::kFull;
    const EpochPlan plan = plan_epoch(model, local, options);
    for (const Pass& pass : plan.passes) {
      EXPECT_EQ(pass.keeps_blocks(), kept_block_bytes > 0) << name;
    }
    std::uint64_t hash = digest(plan, local.global_id);
    if (!plan.closures.empty()) {  // the recompute baseline's passes are cut when they run
      ClosurePlanner planner(model, local);
      Digest d;
      d.add(hash);
      for (const auto& dsts : plan.closures) add_pass(d, planner.plan(plan, dsts), local.global_id);
      hash = d.value();
    }
    hashes[name] = hash;
  };
  for (const CachePolicy policy : {CachePolicy::kStAware, CachePolicy::kLru, CachePolicy::kFifo, CachePolicy::kDegree,
                                   CachePolicy::kSizeOrder, CachePolicy::kBelady, CachePolicy::kNone}) {
    plan_of(fmt::format("gcn2 x4 {}", to_string(policy)), gcn(2, 16), whole, 4, ExecutionMode::kReuse, policy);
  }
  plan_of("gcn2 x16 st-aware", gcn(2, 16), whole, 16, ExecutionMode::kReuse, CachePolicy::kStAware);
  plan_of("gcn2 unlimited st-aware", gcn(2, 16), whole, 0, ExecutionMode::kReuse, CachePolicy::kStAware);
  plan_of("gcn3 x3 belady", gcn(3, 8), whole, 3, ExecutionMode::kReuse, CachePolicy::kBelady);
  for (const CachePolicy policy : {CachePolicy::kStAware, CachePolicy::kLru, CachePolicy::kDegree}) {
    plan_of(fmt::format("gat x6 {}", to_string(policy)), gat(4, 2), whole, 6, ExecutionMode::kReuse, policy);
  }
  plan_of("gcn2 recompute x3 size-order", gcn(2, 16), whole, 3, ExecutionMode::kRecompute, CachePolicy::kSizeOrder);
  plan_of("gat recompute x4 st-aware", gat(4, 2), whole, 4, ExecutionMode::kRecompute, CachePolicy::kStAware);

  // Numbered by community and cut in those ids, as the CLI plans by default (hashes recorded when CutOrder came).
  LocalGraph by_community = whole;
  order_vertices(by_community, VertexOrder::kCommunity);
  plan_of("gcn2 x4 st-aware, community ids", gcn(2, 16), by_community, 4, ExecutionMode::kReuse, CachePolicy::kStAware,
          CutOrder::kVertexIds);
  plan_of("gat x6 st-aware, community ids", gat(4, 2), by_community, 6, ExecutionMode::kReuse, CachePolicy::kStAware,
          CutOrder::kVertexIds);

  // A rank's shard: mirrors, boundary rows and the exchange's chunks.
  PartitionOptions options;
  options.parts = 3;
  PartitionInfo info;
  const auto part_of = assign_parts(sbm, options, info);
  for (int part = 0; part < options.parts; ++part) {
    const Shard shard = make_shard(sbm, part_of, part, info);
    plan_of(fmt::format("gcn2 part {} x6 st-aware", part), gcn(2, 16), shard.local, 6, ExecutionMode::kReuse,
            CachePolicy::kStAware);
    plan_of(fmt::format("gat part {} x6 belady", part), gat(4, 2), shard.local, 6, ExecutionMode::kReuse,
            CachePolicy::kBelady);
  }
  Shard ordered = make_shard(sbm, part_of, 1, info);
  order_vertices(ordered, VertexOrder::kCommunity);
  plan_of("gcn2 part 1 x6 st-aware, community ids", gcn(2, 16), ordered.local, 6, ExecutionMode::kReuse,
          CachePolicy::kStAware, CutOrder::kVertexIds);
  return hashes;
}

TEST(PlanIdentity, PlansAreTheReferencePlannersBitForBit) {
  const std::map<std::string, std::uint64_t> expected = {
      {"gat part 0 x6 belady", 0xd54d44226590fa04ULL},
      {"gat part 1 x6 belady", 0xeba6a23239e34665ULL},
      {"gat part 2 x6 belady", 0x0315c7efd661ee57ULL},
      {"gat recompute x4 st-aware", 0xa8b2097aff1ab3beULL},
      {"gat x6 degree", 0xcd06484f96e4de1dULL},
      {"gat x6 lru", 0x7ea1ce2a181f05abULL},
      {"gat x6 st-aware", 0xea3f904f2eff43e6ULL},
      {"gat x6 st-aware, community ids", 0x0175d478e4f501ebULL},
      {"gcn2 part 0 x6 st-aware", 0xb7a4d7d6e1c4ad33ULL},
      {"gcn2 part 1 x6 st-aware", 0x6a207ba35dc4a095ULL},
      {"gcn2 part 1 x6 st-aware, community ids", 0x37115cf2d4d1a325ULL},
      {"gcn2 part 2 x6 st-aware", 0x36c574b4e5ada324ULL},
      {"gcn2 recompute x3 size-order", 0x55a21a838c3a3ac6ULL},
      {"gcn2 unlimited st-aware", 0xe7345084a36c2c8bULL},
      {"gcn2 x16 st-aware", 0x6af9e84daeab266dULL},
      {"gcn2 x4 belady", 0xc7c9c1821b5fe519ULL},
      {"gcn2 x4 degree", 0x8b3a6ef31b7cde05ULL},
      {"gcn2 x4 fifo", 0xf1b6d09c3488ccc8ULL},
      {"gcn2 x4 lru", 0x124a7f0dd9f6975dULL},
      {"gcn2 x4 none", 0xe5baf31dee61cb6aULL},
      {"gcn2 x4 size-order", 0xc4b571ec9c6ec7a2ULL},
      {"gcn2 x4 st-aware", 0x33a330e8c9d2be72ULL},
      {"gcn2 x4 st-aware, community ids", 0x72d06deb7a93b5d1ULL},
      {"gcn3 x3 belady", 0xfced2eb5908ab2ffULL},
  };
  // Blocks kept, and blocks built by the steps that run them: the same subgraphs.
  for (const std::int64_t kept : {kDefaultKeptBlockBytes, std::int64_t{0}}) {
    const std::map<std::string, std::uint64_t> actual = plan_hashes(kept);
    std::string listing;
    for (const auto& [name, hash] : actual) listing += fmt::format("      {{\"{}\", 0x{:016x}ULL}},\n", name, hash);
    EXPECT_EQ(actual, expected) << "kept_block_bytes " << kept << ", the planner's hashes:\n" << listing;
  }
}

}  // namespace
}  // namespace nj

namespace nj {
namespace {

// The executor's plans leave out the drops and the slot of every list entry (CachePlanDetail::kTransfers); it finds
// each entry's slot as the slot its row was last loaded or allocated into. That is the full plan's slot, entry for
// entry, for reuse on one rank and on a rank's shard and for the recompute baseline's passes, GCN and GAT.
TEST(PlanIdentity, TheExecutorFindsEverySlotFromLoadsAndAllocations) {
  const Dataset sbm = generated(2000, 24000, 2);
  PartitionOptions partition;
  partition.parts = 2;
  PartitionInfo info;
  const auto part_of = assign_parts(sbm, partition, info);
  const Shard shard = make_shard(sbm, part_of, 1, info);
  const LocalGraph whole = whole_local_graph(sbm.graph);
  struct Case {
    ModelConfig config;
    const LocalGraph* local;
    ExecutionMode mode;
    CachePolicy policy;
  };
  for (const Case& c : {Case{gcn(2, 16), &whole, ExecutionMode::kReuse, CachePolicy::kStAware},
                        Case{gat(4, 2), &whole, ExecutionMode::kReuse, CachePolicy::kLru},
                        Case{gat(4, 2), &shard.local, ExecutionMode::kReuse, CachePolicy::kNone},
                        Case{gcn(2, 16), &shard.local, ExecutionMode::kReuse, CachePolicy::kBelady},
                        Case{gcn(2, 16), &whole, ExecutionMode::kRecompute, CachePolicy::kSizeOrder}}) {
    const Model model(c.config, sbm.features.cols(), sbm.num_classes);
    SubgraphExecutorOptions options{4 * minimum_device_budget(model, *c.local), c.mode, c.policy};
    options.kept_block_bytes = 0;
    options.cache_detail = CachePlanDetail::kFull;
    const EpochPlan full = plan_epoch(model, *c.local, options);
    options.cache_detail = CachePlanDetail::kTransfers;
    const EpochPlan compact = plan_epoch(model, *c.local, options);
    std::vector<Pass> full_passes;
    std::vector<Pass> compact_passes;
    if (c.mode == ExecutionMode::kRecompute) {
      ClosurePlanner planner(model, *c.local);
      for (std::size_t k = 0; k < full.closures.size() && k < 5; ++k) {
        full_passes.push_back(planner.plan(full, full.closures[k]));
        compact_passes.push_back(planner.plan(compact, compact.closures[k]));
      }
    } else {
      full_passes.push_back(full.passes.front());
      compact_passes.push_back(compact.passes.front());
    }
    for (std::size_t p = 0; p < full_passes.size(); ++p) {
      const Pass& pass = compact_passes[p];
      const CachePlan& expected = full_passes[p].cache;
      const CachePlan& plan = pass.cache;
      ASSERT_EQ(plan.steps.size(), expected.steps.size());
      EXPECT_EQ(plan.total_bytes(), expected.total_bytes());
      EXPECT_EQ(plan.hits, expected.hits);
      std::vector<std::vector<vid_t>> slot_of(pass.trace.tensors.size(),
                                              std::vector<vid_t>(static_cast<std::size_t>(pass.num_rows), -1));
      PassSubgraphs subgraphs(pass, c.local->global_id);
      for (std::size_t k = 0; k < plan.steps.size(); ++k) {
        const StepPlan& step = plan.steps[k];
        const StepPlan& reference = expected.steps[k];
        EXPECT_TRUE(step.drops.empty() && step.read_slots.empty() && step.write_slots.empty() &&
                    step.accumulate_slots.empty());
        EXPECT_EQ(step.evict_writeback, reference.evict_writeback);
        EXPECT_EQ(step.loads, reference.loads);
        EXPECT_EQ(step.allocations, reference.allocations);
        EXPECT_EQ(step.zeroed, reference.zeroed);
        EXPECT_EQ(step.prefetch, reference.prefetch);
        for (const auto* assignments : {&step.loads, &step.allocations}) {
          for (const SlotAssignment& a : *assignments) {
            slot_of[a.row.tensor][static_cast<std::size_t>(a.row.row)] = a.slot;
          }
        }
        const PlannedStep& s = pass.steps[k];
        const bool aggregation = s.kind == StepKind::kAggregate || s.kind == StepKind::kAggregateBackward;
        const std::vector<vid_t> sources = aggregation ? subgraphs.get(s.layer, s.index).sources : std::vector<vid_t>{};
        const StepRows rows = rows_of_step(model, pass, k, sources);
        const auto found = [&](const RowRun& run) {
          std::vector<std::int32_t> slots;
          for (const vid_t r : run.rows) slots.push_back(slot_of[run.tensor][static_cast<std::size_t>(r)]);
          return slots;
        };
        // An aggregation backward that takes the next layer's transform backward reads those gradients last.
        std::vector<std::int32_t> reads = found(rows.reads);
        for (const std::int32_t slot : found(rows.next_gradient_reads)) reads.push_back(slot);
        ASSERT_EQ(reads, reference.read_slots) << "step " << k;
        ASSERT_EQ(found(rows.writes), reference.write_slots) << "step " << k;
        ASSERT_EQ(found(rows.accumulates), reference.accumulate_slots) << "step " << k;
      }
      for (std::size_t e = 0; e < plan.phase_ends.size(); ++e) {
        EXPECT_EQ(plan.phase_ends[e].writeback, expected.phase_ends[e].writeback);
      }
    }
  }
}

}  // namespace
}  // namespace nj
