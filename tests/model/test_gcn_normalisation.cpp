// GCN's edge weights against the dense D^-1/2 (A + I) D^-1/2 written out here from the edge list alone, as
// PyG's gcn_norm defines it: a vertex that already has a self-loop keeps that one (add_remaining_self_loops),
// and a vertex's degree counts its in-edges with the self-loop. Checked on the whole graph and on each rank's
// shard of two, whose mirrors' degrees live on the other rank.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <utility>

#include "nj/graph/csr.hpp"
#include "nj/graph/shard.hpp"
#include "nj/graph/sparse_block.hpp"
#include "nj/model/model.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

// Â[(dst, src)] for every non-zero of the normalised adjacency, by global ids.
using DenseWeights = std::map<std::pair<vid_t, vid_t>, double>;

DenseWeights dense_normalised_adjacency(const CsrGraph& graph) {
  const vid_t n = graph.num_vertices();
  std::vector<std::vector<double>> a(static_cast<std::size_t>(n), std::vector<double>(static_cast<std::size_t>(n)));
  for (vid_t dst = 0; dst < n; ++dst) {
    for (const vid_t src : graph.in_neighbors(dst)) a[dst][src] += 1.0;
  }
  for (vid_t v = 0; v < n; ++v) {
    if (a[v][v] == 0.0) a[v][v] = 1.0;  // the self-loop a vertex lacks
  }
  std::vector<double> degree(static_cast<std::size_t>(n));
  for (vid_t v = 0; v < n; ++v) {
    for (const double x : a[v]) degree[v] += x;
  }
  DenseWeights weights;
  for (vid_t dst = 0; dst < n; ++dst) {
    for (vid_t src = 0; src < n; ++src) {
      if (a[dst][src] != 0.0) weights[{dst, src}] = a[dst][src] / std::sqrt(degree[dst] * degree[src]);
    }
  }
  return weights;
}

// The weights nj's GCN gives the in-edges of `local`'s owned vertices, summed per (dst, src) by global ids.
DenseWeights prepared_weights(const LocalGraph& local) {
  ModelConfig config;
  config.kind = ModelKind::kGcn;
  const Model model(config, 3, 2);
  const PreparedGraph prepared = model.prepare(local);
  const std::vector<float> per_edge = edge_weights(prepared.graph, prepared.weights());
  DenseWeights weights;
  for (vid_t dst = 0; dst < local.num_owned; ++dst) {
    for (eid_t e = prepared.graph.offsets[dst]; e < prepared.graph.offsets[dst + 1]; ++e) {
      const vid_t src = prepared.graph.sources[static_cast<std::size_t>(e)];
      const auto key =
          std::make_pair(static_cast<vid_t>(local.global_id[dst]), static_cast<vid_t>(local.global_id[src]));
      weights[key] += per_edge[static_cast<std::size_t>(e)];
    }
  }
  return weights;
}

void expect_same_weights(const DenseWeights& actual, const DenseWeights& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [edge, weight] : expected) {
    const auto it = actual.find(edge);
    ASSERT_NE(it, actual.end()) << "no edge " << edge.second << " -> " << edge.first;
    EXPECT_NEAR(it->second, weight, 1e-6 * weight) << edge.second << " -> " << edge.first;
  }
}

// A random directed graph, with a self-loop on every third vertex or on none.
CsrGraph graph_with_self_loops(bool some) {
  const Dataset data = test::random_dataset(40, 150, 3, 2, 9);
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
  for (vid_t v = 0; v < data.graph.num_vertices(); ++v) {
    for (const vid_t u : data.graph.in_neighbors(v)) {
      if (u == v) continue;
      src.push_back(u);
      dst.push_back(v);
    }
    if (some && v % 3 == 0) {
      src.push_back(v);
      dst.push_back(v);
    }
  }
  return build_csr(data.graph.num_vertices(), src, dst);
}

class GcnNormalisation : public ::testing::TestWithParam<bool> {};

TEST_P(GcnNormalisation, WholeGraphWeightsAreTheDenseNormalisedAdjacency) {
  const CsrGraph graph = graph_with_self_loops(GetParam());
  expect_same_weights(prepared_weights(whole_local_graph(graph)), dense_normalised_adjacency(graph));
}

TEST_P(GcnNormalisation, EachRankWeighsItsEdgesAsTheWholeGraphDoes) {
  Dataset data = test::random_dataset(40, 150, 3, 2, 9);
  data.graph = graph_with_self_loops(GetParam());
  const DenseWeights whole = dense_normalised_adjacency(data.graph);
  std::vector<std::int32_t> part_of(static_cast<std::size_t>(data.graph.num_vertices()));
  for (std::size_t v = 0; v < part_of.size(); ++v) part_of[v] = static_cast<std::int32_t>(v % 2);
  PartitionInfo info;
  info.parts = 2;
  DenseWeights from_ranks;
  for (int part = 0; part < 2; ++part) {
    const Shard shard = make_shard(data, part_of, part, info);
    ASSERT_GT(shard.local.num_mirrors(), 0);
    for (const auto& [edge, weight] : prepared_weights(shard.local)) from_ranks[edge] += weight;
  }
  expect_same_weights(from_ranks, whole);
}

INSTANTIATE_TEST_SUITE_P(SelfLoops, GcnNormalisation, ::testing::Bool(),
                         [](const auto& test_info) { return test_info.param ? "some_stored" : "none_stored"; });

}  // namespace
}  // namespace nj
