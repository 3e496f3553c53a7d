// A packed block (what a budgeted step uploads) expands on the device into the very arrays of the block uploaded
// whole: widened sources, weights from vertex factors, and the out-edges in SparseBlock::index_by_source's order.
// Every array is compared element for element, for each way of holding weights and both source widths, on blocks
// one thread expands and blocks the CPU backend's threads share; and the kernels read a packed block as it lies
// exactly as they read it expanded.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "nj/graph/shard.hpp"
#include "nj/graph/sparse_block.hpp"
#include "nj/kernels/device_block.hpp"
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
  std::vector<Matrix> kernel_results(const SparseBlockView& blank, vid_t num_src, bool accumulate);

  template <typename T>
  std::vector<T> get(const T* data, std::int64_t size) {
    return on().get_array(DeviceSpan<const T>{data, size});
  }

  std::optional<test::OnDevice> on_;
};

// A block small enough for one thread, and one whose edges the CPU backend's threads share (each a range of
// destinations, whose out-edges must still come out in destination order per source). Copied whole, and in pieces
// of 1,000 bytes, which end inside the arrays.
TEST_P(PackedBlockTest, ExpandsIntoTheArraysOfTheWholeBlock) {
  const PackedWeights weights = std::get<1>(GetParam());
  for (const std::int64_t piece_bytes : {Transfers::kPieceBytes, std::int64_t{1000}}) {
    on_.emplace(std::get<0>(GetParam()), 2, piece_bytes);
    for (const auto& [vertices, destinations] :
         {std::pair<vid_t, vid_t>{300, 120}, std::pair<vid_t, vid_t>{6000, 4000}}) {
      SCOPED_TRACE(::testing::Message() << destinations << " destinations, pieces of " << piece_bytes << " bytes");
      expect_expands_into_the_whole_block(weights, block_weighted(weights, vertices, destinations));
    }
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

Matrix random_rows(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
  Matrix m(rows, cols);
  for (std::int64_t k = 0; k < m.size(); ++k) m.data()[k] = uniform(rng);
  return m;
}

// What every aggregation and its transpose write reading `view`, its sources' rows and gradients in slots of
// buffers of their own (source j's row in row 2j+1, its gradient added into row 3j+2, the other rows left as they
// were), the gradients `accumulate`d or not; a backend that does not read packed blocks as they lie is not asked to
// transpose `view` where it has no out-edges, and refuses.
std::vector<Matrix> PackedBlockTest::kernel_results(const SparseBlockView& blank, vid_t num_src, bool accumulate) {
  const auto n = static_cast<std::int64_t>(num_src);
  const auto dst = static_cast<std::int64_t>(blank.num_dst);
  GatShape gat;
  gat.heads = 2;
  gat.channels = 3;
  gat.attention_dropout = 0.2F;
  const std::int64_t width = gat.row_width();
  RootedSum sum;
  sum.width = 4;
  sum.neighbour_column = 1;
  sum.neighbour_scale = 0.5F;
  sum.root_scale = 2.0F;
  sum.carried = 2;
  sum.carried_column = 5;
  std::vector<vid_t> rows(static_cast<std::size_t>(n));
  std::vector<vid_t> gradient_rows(static_cast<std::size_t>(n));
  Matrix z = random_rows(2 * n + 1, width, 3);
  for (vid_t j = 0; j < num_src; ++j) {
    rows[static_cast<std::size_t>(j)] = 2 * j + 1;
    gradient_rows[static_cast<std::size_t>(j)] = 3 * j + 2;
  }
  const DeviceArray<vid_t> drows = on().put_array(std::span<const vid_t>(rows));
  const DeviceArray<vid_t> dgradient_rows = on().put_array(std::span<const vid_t>(gradient_rows));
  SparseBlockView view = blank;
  view.src_row = drows.view().data;
  view.grad_row = dgradient_rows.view().data;
  const RandomStream stream{1, RandomPurpose::kAttentionDropout, 0, 0};
  const bool transposes = view.has_out_edges() || on().backend().library_memory().reads_packed_blocks;
  const DeviceMatrix dz = on().put(z);
  const Matrix gradients_before = random_rows(3 * n + 2, width, 4);
  std::vector<Matrix> results;
  const auto transpose = [&](const auto& kernel) {
    DeviceMatrix gradients = on().put(gradients_before);
    if (!transposes) {
      EXPECT_THROW(kernel(gradients.view()), Error);
      return;
    }
    kernel(gradients.view());
    results.push_back(on().get(gradients.view()));
  };

  DeviceMatrix out = on().zeros(dst, width);
  on().backend().spmm(view, dz.view(), out.view());
  results.push_back(on().get(out.view()));
  const DeviceMatrix grad_out = on().put(random_rows(dst, width, 5));
  transpose([&](DeviceRows g) { on().backend().spmm_transpose(view, grad_out.view(), g, accumulate); });

  DeviceMatrix summed = on().zeros(dst, sum.output_width());
  on().backend().rooted_sum(view, sum, dz.view(), summed.view());
  results.push_back(on().get(summed.view()));
  const DeviceMatrix grad_summed = on().put(random_rows(dst, sum.output_width(), 6));
  transpose([&](DeviceRows g) { on().backend().rooted_sum_transpose(view, sum, grad_summed.view(), g, accumulate); });

  DeviceMatrix attended = on().zeros(dst, gat.output_width());
  on().backend().gat_forward(view, gat, stream, dz.view(), attended.view());
  results.push_back(on().get(attended.view()));
  const DeviceMatrix grad_attended = on().put(random_rows(dst, gat.output_width(), 7));
  DeviceArray<float> workspace(on().device(), rowmath::gat_backward_workspace_floats(dst, view.num_edges(), gat.heads),
                               "gat_backward workspace");
  transpose([&](DeviceRows g) {
    on().backend().gat_backward(view, gat, stream, dz.view(), grad_attended.view(), g, accumulate, workspace.view());
  });
  return results;
}

// A backend that reads packed blocks as they lie (LibraryMemory::reads_packed_blocks) gives, from the packed arrays
// alone (16-bit or 32-bit sources, vertex factors, no out-edges), the very bits it gives from the expanded block:
// the aggregations, and their transposes, which visit the in-edges by source instead of gathering over out-edges,
// on one thread and with the edges of the larger block shared among threads.
TEST_P(PackedBlockTest, KernelsReadTheBlockAsItLiesBitForBit) {
  const PackedWeights weights = std::get<1>(GetParam());
  for (const auto& [vertices, destinations] :
       {std::pair<vid_t, vid_t>{300, 120}, std::pair<vid_t, vid_t>{6000, 4000}}) {
    const SparseBlock host = block_weighted(weights, vertices, destinations);
    for (const std::int64_t narrow_limit : {kNarrowSourceLimit, std::int64_t{host.num_src} - 1}) {
      const PackedBlock packed(on().transfers(), host, PackedBlock::shape_of(host, narrow_limit, true),
                               "graph: packed test block");
      const ExpandedBlock expanded(on().backend(), on().device(), packed, true);
      const SparseBlockView direct = packed.direct_view();
      EXPECT_FALSE(direct.has_out_edges());
      EXPECT_EQ(direct.weighted(), weights != PackedWeights::kNone);
      for (const bool accumulate : {false, true}) {
        SCOPED_TRACE(::testing::Message() << destinations << " destinations, narrow " << packed.shape().narrow()
                                          << ", accumulating " << accumulate);
        const std::vector<Matrix> expected = kernel_results(expanded.view(), host.num_src, accumulate);
        const std::vector<Matrix> got = kernel_results(direct, host.num_src, accumulate);
        ASSERT_EQ(got.size(), on().backend().library_memory().reads_packed_blocks ? expected.size() : 3U);
        for (std::size_t k = 0; k < got.size(); ++k) {
          const Matrix& want = expected[on().backend().library_memory().reads_packed_blocks ? k : 2 * k];
          ASSERT_EQ(got[k].size(), want.size());
          for (std::int64_t v = 0; v < want.size(); ++v) {
            ASSERT_EQ(got[k].data()[v], want.data()[v]) << "result " << k << ", value " << v;
          }
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
