// Subgraph building blocks: closures listed as nested prefixes, runs cut to a cost limit, and the recompute
// baseline's closure passes, which must hold exactly the rows and in-edges each layer needs.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "nj/exec/subgraph.hpp"
#include "nj/exec/subgraph_executor.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

// The vertices within `hops` in-hops of `dsts`, by plain breadth-first search.
std::set<vid_t> closure_of(const CsrGraph& graph, std::span<const vid_t> dsts, int hops) {
  std::set<vid_t> closure(dsts.begin(), dsts.end());
  std::vector<vid_t> frontier(dsts.begin(), dsts.end());
  std::vector<vid_t> next;
  for (int h = 0; h < hops; ++h) {
    next.clear();
    for (const vid_t v : frontier) {
      for (const vid_t s : graph.in_neighbors(v)) {
        if (closure.insert(s).second) next.push_back(s);
      }
    }
    frontier.swap(next);
  }
  return closure;
}

TEST(ClosureLister, EveryLevelIsAPrefixAndListsRepeatFromOneLister) {
  const Dataset data = test::random_dataset(300, 900, 4, 3, 11);
  ClosureLister reused(data.graph, 2);
  const std::vector<std::vector<vid_t>> sets = {{5}, {7, 8, 9, 120}, {5}, {299, 0}};
  for (const auto& dsts : sets) {
    std::vector<std::int64_t> levels;
    const std::vector<vid_t> order = reused.list(dsts, levels);
    ASSERT_EQ(levels.size(), 3U);
    EXPECT_TRUE(std::equal(dsts.begin(), dsts.end(), order.begin()));
    EXPECT_EQ(std::set<vid_t>(order.begin(), order.end()).size(), order.size()) << "a vertex listed twice";
    for (int k = 0; k <= 2; ++k) {
      const auto prefix = std::span(order).first(static_cast<std::size_t>(levels[static_cast<std::size_t>(k)]));
      EXPECT_EQ(std::set<vid_t>(prefix.begin(), prefix.end()), closure_of(data.graph, dsts, k)) << "level " << k;
    }
    std::vector<std::int64_t> fresh_levels;
    EXPECT_EQ(ClosureLister(data.graph, 2).list(dsts, fresh_levels), order);
    EXPECT_EQ(fresh_levels, levels);
  }
}

// The subgraph as first written: sources sorted and deduplicated, local ids by binary search.
Subgraph reference_subgraph(const CsrGraph& graph, std::span<const float> weights, std::span<const vid_t> dsts,
                            std::span<const gid_t> global_id) {
  Subgraph sub;
  sub.sources.assign(dsts.begin(), dsts.end());
  std::vector<vid_t> others;
  for (const vid_t d : dsts) {
    for (const vid_t s : graph.in_neighbors(d)) {
      if (std::find(dsts.begin(), dsts.end(), s) == dsts.end()) others.push_back(s);
    }
  }
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  sub.sources.insert(sub.sources.end(), others.begin(), others.end());
  SparseBlock& b = sub.block;
  b.num_src = static_cast<vid_t>(sub.sources.size());
  for (const vid_t d : dsts) {
    for (eid_t e = graph.offsets[static_cast<std::size_t>(d)]; e < graph.offsets[static_cast<std::size_t>(d) + 1];
         ++e) {
      const vid_t s = graph.sources[static_cast<std::size_t>(e)];
      b.src_index.push_back(
          static_cast<vid_t>(std::find(sub.sources.begin(), sub.sources.end(), s) - sub.sources.begin()));
      if (!weights.empty()) b.edge_weight.push_back(weights[static_cast<std::size_t>(e)]);
    }
    b.dst_offsets.push_back(static_cast<eid_t>(b.src_index.size()));
  }
  b.index_by_source();
  for (const vid_t v : sub.sources) b.src_gid.push_back(global_id[static_cast<std::size_t>(v)]);
  return sub;
}

void expect_same_subgraph(const Subgraph& a, const Subgraph& b) {
  EXPECT_EQ(a.sources, b.sources);
  EXPECT_EQ(a.block.num_src, b.block.num_src);
  EXPECT_EQ(a.block.dst_offsets, b.block.dst_offsets);
  EXPECT_EQ(a.block.src_index, b.block.src_index);
  EXPECT_EQ(a.block.edge_weight, b.block.edge_weight);
  EXPECT_EQ(a.block.by_source.offsets, b.block.by_source.offsets);
  EXPECT_EQ(a.block.by_source.destinations, b.block.by_source.destinations);
  EXPECT_EQ(a.block.by_source.edge_position, b.block.by_source.edge_position);
  EXPECT_EQ(a.block.out_weight, b.block.out_weight);
  EXPECT_EQ(a.block.src_gid, b.block.src_gid);
}

// One builder makes many subgraphs of a graph in time linear in their edges; each is the subgraph the plain
// construction makes, whether its other sources are listed by sorting (small subgraphs) or by a scan of the
// bitmap (large ones), and whatever the builder made before.
TEST(SubgraphBuilder, BuildsWhatThePlainConstructionBuilds) {
  const Dataset data = test::random_dataset(700, 6000, 4, 3, 17);
  std::vector<float> weights(data.graph.sources.size());
  for (std::size_t e = 0; e < weights.size(); ++e) weights[e] = 0.5F + static_cast<float>(e % 7);
  std::vector<gid_t> global_id(static_cast<std::size_t>(data.num_vertices()));
  for (std::size_t v = 0; v < global_id.size(); ++v) global_id[v] = static_cast<gid_t>(3 * v + 11);
  // Weights given as a factor per vertex: each edge's is the product of its endpoints'.
  std::vector<float> factor(static_cast<std::size_t>(data.num_vertices()));
  for (std::size_t v = 0; v < factor.size(); ++v) factor[v] = 0.25F + static_cast<float>(v % 5);
  const EdgeWeights per_edge{.per_edge = weights, .vertex_factor = {}};
  const EdgeWeights by_vertex{.per_edge = {}, .vertex_factor = factor};
  const std::vector<float> products = edge_weights(data.graph, by_vertex);
  ASSERT_EQ(products.size(), data.graph.sources.size());
  for (vid_t d = 0; d < data.num_vertices(); ++d) {
    for (eid_t e = data.graph.offsets[static_cast<std::size_t>(d)];
         e < data.graph.offsets[static_cast<std::size_t>(d) + 1]; ++e) {
      const auto s = static_cast<std::size_t>(data.graph.sources[static_cast<std::size_t>(e)]);
      ASSERT_EQ(products[static_cast<std::size_t>(e)], factor[s] * factor[static_cast<std::size_t>(d)]);
    }
  }
  EXPECT_EQ(edge_weights(data.graph, per_edge), weights);
  SubgraphBuilder builder(data.graph, per_edge, global_id);
  SubgraphBuilder unweighted(data.graph, {}, global_id);
  SubgraphBuilder factored(data.graph, by_vertex, global_id);
  // Every block by three threads: runs of destinations, a bitmap and counts per thread.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  SubgraphBuilder in_parallel(data.graph, per_edge, global_id, {}, 0);
  SubgraphBuilder factored_in_parallel(data.graph, by_vertex, global_id, {}, 0);
  std::vector<vid_t> order(static_cast<std::size_t>(data.num_vertices()));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 random(5);
  std::shuffle(order.begin(), order.end(), random);
  // Sizes from one vertex (sorted) to most of the graph (bitmap), in an order that revisits vertices.
  for (const std::size_t size : {1UL, 3UL, 40UL, 2UL, 500UL, 7UL, 700UL, 1UL}) {
    std::shuffle(order.begin(), order.end(), random);
    const std::span<const vid_t> dsts(order.data(), size);
    SCOPED_TRACE(fmt::format("{} destinations", size));
    expect_same_subgraph(builder.build(dsts), reference_subgraph(data.graph, weights, dsts, global_id));
    expect_same_subgraph(unweighted.build(dsts), reference_subgraph(data.graph, {}, dsts, global_id));
    expect_same_subgraph(make_subgraph(data.graph, per_edge, dsts, global_id),
                         reference_subgraph(data.graph, weights, dsts, global_id));
    expect_same_subgraph(factored.build(dsts), reference_subgraph(data.graph, products, dsts, global_id));
    expect_same_subgraph(factored_in_parallel.build(dsts), reference_subgraph(data.graph, products, dsts, global_id));
    Subgraph reused;
    in_parallel.build(dsts, reused);
    expect_same_subgraph(reused, reference_subgraph(data.graph, weights, dsts, global_id));
    // Inside another parallel region (nesting off) its team has one thread for the three runs: the same block.
    Subgraph nested;
#pragma omp parallel num_threads(2)
#pragma omp single
    in_parallel.build(dsts, nested);
    expect_same_subgraph(nested, reference_subgraph(data.graph, weights, dsts, global_id));
    // Listed from their one-hop closure, in any order, the sources are the block's.
    const std::set<vid_t> closure_set = closure_of(data.graph, dsts, 1);
    std::vector<vid_t> closure(closure_set.begin(), closure_set.end());
    std::shuffle(closure.begin(), closure.end(), random);
    std::vector<vid_t> sources;
    EXPECT_EQ(builder.list_sources(dsts, closure, sources), static_cast<eid_t>(reused.block.src_index.size()));
    EXPECT_EQ(sources, reused.sources);
  }
  omp_set_num_threads(threads);
}

TEST(PartitionInOrder, AVertexOverTheLimitRunsAloneOrThrows) {
  // A star: vertex 0 reads every other vertex, the others read only 0.
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
  for (vid_t v = 1; v < 10; ++v) src.push_back(v), dst.push_back(0);
  const CsrGraph graph = build_csr(10, src, dst, {.symmetrize = true});
  const std::vector<vid_t> order = {1, 2, 0, 3, 4};
  const SubgraphCost edges = [](const ClosureSize& size) { return size.edges[0]; };
  const auto runs = partition_in_order(graph, order, 1, edges, 2, nullptr);
  EXPECT_EQ(runs, (std::vector<std::vector<vid_t>>{{1, 2}, {0}, {3, 4}}));
  EXPECT_THROW(partition_in_order(graph, order, 1, edges, 2,
                                  [](std::int64_t minimum) {
                                    EXPECT_EQ(minimum, 9);
                                    return std::string("too small");
                                  }),
               InputError);
}

// Each run is handed over as it closes with its one-hop closure: a run that ends before a vertex without that
// vertex's in-neighbours, a vertex over the limit alone with its own.
TEST(PartitionInOrder, HandsOverEachRunWithItsOneHopClosure) {
  const Dataset data = test::random_dataset(300, 2400, 4, 3, 29);
  std::vector<vid_t> order(static_cast<std::size_t>(data.num_vertices()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  const SubgraphCost closure_size = [](const ClosureSize& size) { return size.vertices.back(); };
  std::vector<std::vector<vid_t>> handed;
  bool alone = false;
  const auto runs = partition_in_order(data.graph, order, 1, closure_size, 12, nullptr,
                                       [&](std::span<const vid_t> run, std::span<const vid_t> closure) {
                                         handed.emplace_back(run.begin(), run.end());
                                         const std::set<vid_t> expected = closure_of(data.graph, run, 1);
                                         EXPECT_EQ(closure.size(), expected.size()) << "each vertex once";
                                         EXPECT_EQ(std::set<vid_t>(closure.begin(), closure.end()), expected);
                                         alone = alone || static_cast<std::int64_t>(expected.size()) > 12;
                                       });
  EXPECT_EQ(handed, runs);
  EXPECT_GT(runs.size(), 20U);
  EXPECT_TRUE(alone) << "some vertex's closure is over the limit";
}

// The smallest limit is the largest one-vertex closure's cost, counted without marks where in-neighbours are
// sorted and with them where not; either way what a plain breadth-first search finds.
TEST(PartitionInOrder, TheLargestSingleVertexCostIsTheLargestClosure) {
  Dataset data = test::random_dataset(200, 1500, 4, 3, 23);
  CsrGraph& graph = data.graph;
  // Unsort one vertex's in-neighbours and give another a repeated in-neighbour and a self-loop.
  const auto busiest =
      static_cast<vid_t>(std::max_element(graph.offsets.begin() + 1, graph.offsets.end(),
                                          [&](const eid_t& a, const eid_t& b) { return a - (&a)[-1] < b - (&b)[-1]; }) -
                         graph.offsets.begin() - 1);
  ASSERT_GE(graph.in_degree(busiest), 2);
  const auto first = graph.sources.begin() + graph.offsets[static_cast<std::size_t>(busiest)];
  std::reverse(first, first + graph.in_degree(busiest));
  std::vector<vid_t> order(static_cast<std::size_t>(data.num_vertices()));
  std::iota(order.begin(), order.end(), 0);
  const SubgraphCost sources = [](const ClosureSize& size) { return size.vertices.back() * 1000 + size.edges[0]; };
  for (const int hops : {1, 2}) {
    std::int64_t expected = 0;
    for (const vid_t v : order) {
      const std::vector<vid_t> one = {v};
      const auto closure = static_cast<std::int64_t>(closure_of(graph, one, hops).size());
      expected = std::max(expected, closure * 1000 + graph.in_degree(v));
    }
    EXPECT_EQ(largest_single_vertex_cost(graph, order, hops, sources), expected) << hops << " hops";
  }
}

TEST(ClosurePlanner, APassHoldsEachLayersRowsAndAllTheirInEdges) {
  const Dataset data = test::random_dataset(400, 1600, 6, 3, 5);
  ModelConfig config;
  config.layers = 3;
  config.hidden = 4;
  const Model model(config, data.features.cols(), data.num_classes);
  // Global ids that differ from the local ones, to see that passes carry the right ones.
  LocalGraph shifted = whole_local_graph(data.graph);
  for (gid_t& id : shifted.global_id) id += 1000;
  const SubgraphExecutorOptions options{2 * minimum_device_budget(model, shifted), ExecutionMode::kRecompute,
                                        CachePolicy::kSizeOrder};
  const EpochPlan plan = plan_epoch(model, shifted, options);
  ASSERT_GT(plan.closures.size(), 1U);
  ClosurePlanner planner(model, shifted);
  const CsrGraph& prepared = planner.prepared_graph();
  const PreparedGraph whole = model.prepare(shifted);
  const std::vector<float> weights = edge_weights(whole.graph, whole.weights());
  std::set<vid_t> outputs;
  for (const auto& dsts : plan.closures) {
    const Pass pass = planner.plan(plan, dsts);
    PassSubgraphs subgraphs(pass, shifted.global_id);
    ASSERT_EQ(pass.num_outputs, static_cast<std::int64_t>(dsts.size()));
    for (std::int64_t r = 0; r < pass.num_outputs; ++r)
      EXPECT_TRUE(outputs.insert(pass.vertex(static_cast<vid_t>(r))).second);
    for (std::size_t l = 0; l < 3; ++l) {
      // Layer l aggregates the rows within 2-l hops of the subgraph and transforms those within 3-l.
      std::multiset<vid_t> aggregated;
      for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
        const Subgraph& part = subgraphs.get(l, k);
        for (vid_t i = 0; i < part.num_dst(); ++i) {
          const vid_t v = pass.vertex(part.sources[static_cast<std::size_t>(i)]);
          aggregated.insert(v);
          // All of v's in-edges, with the whole graph's weights and global ids.
          std::multiset<std::pair<vid_t, float>> expected;
          for (eid_t e = prepared.offsets[v]; e < prepared.offsets[v + 1]; ++e) {
            expected.insert({prepared.sources[static_cast<std::size_t>(e)], weights[static_cast<std::size_t>(e)]});
          }
          std::multiset<std::pair<vid_t, float>> actual;
          for (eid_t e = part.block.dst_offsets[i]; e < part.block.dst_offsets[i + 1]; ++e) {
            const vid_t local = part.block.src_index[static_cast<std::size_t>(e)];
            const vid_t source = pass.vertex(part.sources[static_cast<std::size_t>(local)]);
            EXPECT_EQ(part.block.src_gid[static_cast<std::size_t>(local)], 1000 + source);
            actual.insert({source, part.block.edge_weight[static_cast<std::size_t>(e)]});
          }
          EXPECT_EQ(actual, expected) << "vertex " << v << " layer " << l;
        }
      }
      const std::set<vid_t> within = closure_of(prepared, dsts, static_cast<int>(2 - l));
      EXPECT_EQ(aggregated, std::multiset<vid_t>(within.begin(), within.end())) << "layer " << l;
      std::multiset<vid_t> transformed;
      for (const auto& chunk : pass.transform_chunks[l]) {
        for (const vid_t r : chunk) transformed.insert(pass.vertex(r));
      }
      const std::set<vid_t> inputs = closure_of(prepared, dsts, static_cast<int>(3 - l));
      EXPECT_EQ(transformed, std::multiset<vid_t>(inputs.begin(), inputs.end())) << "layer " << l;
    }
  }
  EXPECT_EQ(static_cast<vid_t>(outputs.size()), data.num_vertices()) << "every vertex is one pass's output";
}

}  // namespace
}  // namespace nj
