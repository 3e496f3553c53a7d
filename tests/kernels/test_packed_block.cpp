// A packed block (what a budgeted step uploads) expands on the device into the very arrays of the block uploaded
// whole: widened sources, weights from vertex factors, and the out-edges in SparseBlock::index_by_source's order.
// Every array is compared element for element, for each way of holding weights and both source widths, on blocks
// one thread expands and blocks the CPU backend's threads share.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "nj/graph/shard.hpp"
#include "nj/kernels/device_block.hpp"
#include "nj/kernels/sparse_block.hpp"
#include "support/backends.hpp"
#include "support/on_device.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

// A block over a random graph with one self-loop per vertex, its first `destinations` vertices the destinations,
// weighted as `weights` says (factors drawn at random, one per vertex).
SparseBlock block_weighted(PackedWeights weights, vid_t vertices, vid_t destinations) {
  const Dataset d = test::random_dataset(vertices, std::int64_t{vertices} * 6, 1, 2, 7);
  const CsrGraph g = with_self_loops(d.graph, true);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> uniform(0.1F, 1.0F);
  std::vector<float> factor(static_cast<std::size_t>(g.num_vertices()));
  for (auto& f : factor) f = uniform(rng);
  std::vector<float> per_edge;
  if (weights == PackedWeights::kPerEdge) {
    for (std::size_t e = 0; e < g.sources.size(); ++e) per_edge.push_back(uniform(rng));
  } else if (weights != PackedWeights::kNone) {
    const EdgeWeights from_factors{
        .per_edge = {},
        .vertex_factor = factor,
        .factor_of = weights == PackedWeights::kTargetFactor ? FactorOf::kTarget : FactorOf::kBothEndpoints};
    per_edge = edge_weights(g, from_factors);
  }
  // The block holds the destinations' in-edges, the first ones of the graph.
  if (!per_edge.empty()) per_edge.resize(static_cast<std::size_t>(g.offsets[static_cast<std::size_t>(destinations)]));
  const LocalGraph local = whole_local_graph(g);
  SparseBlock block = local_graph_block(g, per_edge, destinations, local.global_id);
  if (weights == PackedWeights::kBothFactors || weights == PackedWeights::kTargetFactor) {
    block.src_factor = factor;
    block.factor_of = weights == PackedWeights::kTargetFactor ? FactorOf::kTarget : FactorOf::kBothEndpoints;
  }
  return block;
}

using PackCase = std::tuple<DeviceKind, PackedWeights>;

class PackedBlockTest : public ::testing::TestWithParam<PackCase> {
 protected:
  void SetUp() override {
    NJ_SKIP_WITHOUT_BACKEND(std::get<0>(GetParam()));
    on_.emplace(std::get<0>(GetParam()), 2);
  }
  test::OnDevice& on() { return *on_; }
  void expect_expands_into_the_whole_block(PackedWeights weights, const SparseBlock& host);

  template <typename T>
  std::vector<T> get(const T* data, std::int64_t size) {
    return on().get_array(DeviceSpan<const T>{data, size});
  }

 private:
  std::optional<test::OnDevice> on_;
};

// A block small enough for one thread, and one whose edges the CPU backend's threads share (each a range of
// destinations, whose out-edges must still come out in destination order per source).
TEST_P(PackedBlockTest, ExpandsIntoTheArraysOfTheWholeBlock) {
  const PackedWeights weights = std::get<1>(GetParam());
  for (const auto& [vertices, destinations] :
       {std::pair<vid_t, vid_t>{300, 120}, std::pair<vid_t, vid_t>{6000, 4000}}) {
    SCOPED_TRACE(::testing::Message() << destinations << " destinations");
    expect_expands_into_the_whole_block(weights, block_weighted(weights, vertices, destinations));
  }
}

void PackedBlockTest::expect_expands_into_the_whole_block(PackedWeights weights, const SparseBlock& host) {
  const auto edges = static_cast<std::int64_t>(host.src_index.size());
  const DeviceBlock whole = on().block(host);
  // 16-bit sources with the default limit, 32 with a limit below them.
  for (const std::int64_t narrow_limit : {kNarrowSourceLimit, std::int64_t{host.num_src} - 1}) {
    for (const bool ids : {true, false}) {
      const BlockShape shape = PackedBlock::shape_of(host, narrow_limit, ids);
      ASSERT_EQ(shape.weights, weights);
      EXPECT_EQ(shape.narrow(), narrow_limit == kNarrowSourceLimit);
      const PackedBlock packed(on().transfers(), host, shape, "graph: packed test block");
      // The offsets; per source its global id and its factor, where they travel; per edge 2 or 4 bytes of source
      // and 4 of weight where weights travel per edge. Whole, an edge takes 24 bytes.
      const bool factors = weights == PackedWeights::kBothFactors || weights == PackedWeights::kTargetFactor;
      const std::int64_t per_source = (ids ? 8 : 0) + (factors ? 4 : 0);
      const std::int64_t per_edge = (shape.narrow() ? 2 : 4) + (weights == PackedWeights::kPerEdge ? 4 : 0);
      EXPECT_EQ(packed.bytes(), (host.num_dst() + 1) * 8 + host.num_src * per_source + edges * per_edge);
      EXPECT_LT(packed.bytes(), whole.bytes() / 2);
      for (const bool out_edges : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "narrow " << shape.narrow() << ", ids " << ids << ", out-edges " << out_edges);
        const ExpandedBlock expanded(on().backend(), on().device(), packed, out_edges);
        const SparseBlockView view = expanded.view();
        const SparseBlockView expected = whole.view();
        ASSERT_EQ(view.num_dst, expected.num_dst);
        ASSERT_EQ(view.num_src, expected.num_src);
        ASSERT_EQ(view.num_edges(), edges);
        EXPECT_EQ(get(view.dst_offsets, view.num_dst + 1), host.dst_offsets);
        EXPECT_EQ(get(view.src_index, edges), host.src_index);
        EXPECT_EQ(view.edge_weight != nullptr, weights != PackedWeights::kNone);
        if (view.edge_weight != nullptr) {
          EXPECT_EQ(get(view.edge_weight, edges), host.edge_weight);
        }
        EXPECT_EQ(view.src_gid != nullptr, ids);
        if (ids) {
          EXPECT_EQ(get(view.src_gid, view.num_src), host.src_gid);
        }
        EXPECT_EQ(view.src_offsets != nullptr, out_edges);
        if (!out_edges) continue;
        EXPECT_EQ(get(view.src_offsets, view.num_src + 1), host.by_source.offsets);
        EXPECT_EQ(get(view.out_dst, edges), host.by_source.destinations);
        EXPECT_EQ(get(view.out_edge, edges), host.by_source.edge_position);
        EXPECT_EQ(view.out_weight != nullptr, weights != PackedWeights::kNone);
        if (view.out_weight != nullptr) {
          EXPECT_EQ(get(view.out_weight, edges), host.out_weight);
        }
      }
    }
  }
}

TEST(PackedBlock, RefusesSixteenBitSourcesBeyondTheirRange) {
  const SparseBlock host = block_weighted(PackedWeights::kNone, 20, 5);
  EXPECT_THROW(PackedBlock::shape_of(host, kNarrowSourceLimit + 1, true), Error);
}

std::string pack_case_name(const ::testing::TestParamInfo<PackCase>& info) {
  static constexpr const char* kWeights[] = {"unweighted", "per_edge", "both_factors", "target_factor"};
  return test::backend_name(std::get<0>(info.param)) + "_" + kWeights[static_cast<int>(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(Backends, PackedBlockTest,
                         ::testing::Combine(test::all_backends(),
                                            ::testing::Values(PackedWeights::kNone, PackedWeights::kPerEdge,
                                                              PackedWeights::kBothFactors,
                                                              PackedWeights::kTargetFactor)),
                         pack_case_name);

}  // namespace
}  // namespace nj
