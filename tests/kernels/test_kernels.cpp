// Each kernel's backward is checked against central finite differences of its forward, on small random
// graphs (the GAT with two heads, both concatenated and averaged, with attention dropout on).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "nj/graph/shard.hpp"
#include "nj/kernels/backend.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

Matrix random_matrix(std::int64_t rows, std::int64_t cols, std::uint64_t seed, float scale = 1.0F) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0F, scale);
  Matrix m(rows, cols);
  for (auto& x : m.span()) x = normal(rng);
  return m;
}

double dot(const Matrix& a, const Matrix& b) {
  double s = 0.0;
  for (std::int64_t i = 0; i < a.size(); ++i) s += static_cast<double>(a.data()[i]) * b.data()[i];
  return s;
}

// Checks analytic ∂f/∂x against central differences for every element of x.
void expect_gradient_matches(Matrix& x, const Matrix& analytic, const std::function<double()>& f, float eps = 1e-2F,
                             double tolerance = 2e-2) {
  ASSERT_EQ(x.size(), analytic.size());
  for (std::int64_t k = 0; k < x.size(); ++k) {
    const float saved = x.data()[k];
    x.data()[k] = saved + eps;
    const double up = f();
    x.data()[k] = saved - eps;
    const double down = f();
    x.data()[k] = saved;
    const double numeric = (up - down) / (2.0 * eps);
    EXPECT_NEAR(analytic.data()[k], numeric, 1e-3 + tolerance * std::abs(numeric)) << "element " << k;
  }
}

SparseBlock random_block(vid_t n, eid_t edges, bool self_loops, std::uint64_t seed) {
  const Dataset d = test::random_dataset(n, edges, 1, 2, seed);
  const CsrGraph g = self_loops ? with_self_loops(d.graph, true) : d.graph;
  std::vector<float> weights(g.sources.size());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(0.1F, 1.0F);
  for (auto& w : weights) w = uniform(rng);
  const LocalGraph local = whole_local_graph(g);
  return local_graph_block(g, weights, g.num_vertices(), local.global_id);
}

class KernelTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend = make_cpu_backend(2);
};

TEST_F(KernelTest, SpmmTransposeIsTheAdjointOfSpmm) {
  const SparseBlock block = random_block(40, 150, false, 1);
  const Matrix x = random_matrix(40, 5, 2);
  const Matrix y = random_matrix(40, 5, 3);
  Matrix ax(40, 5);
  Matrix aty(40, 5);
  backend->spmm(block.view(), x.view(), ax.view());
  backend->spmm_transpose(block.view(), y.view(), aty.view(), false);
  EXPECT_NEAR(dot(y, ax), dot(aty, x), 1e-3);
}

TEST_F(KernelTest, SpmmMatchesADenseReference) {
  const SparseBlock block = random_block(12, 30, true, 4);
  const Matrix x = random_matrix(12, 3, 5);
  Matrix out(12, 3);
  backend->spmm(block.view(), x.view(), out.view());
  for (vid_t i = 0; i < 12; ++i) {
    for (int c = 0; c < 3; ++c) {
      double expected = 0.0;
      for (eid_t e = block.dst_offsets[i]; e < block.dst_offsets[i + 1]; ++e) {
        expected += block.edge_weight[e] * x(block.src_index[e], c);
      }
      EXPECT_NEAR(out(i, c), expected, 1e-5);
    }
  }
}

class GatKernelTest : public KernelTest, public ::testing::WithParamInterface<bool> {};

TEST_P(GatKernelTest, BackwardMatchesFiniteDifferences) {
  GatShape shape;
  shape.heads = 2;
  shape.channels = 3;
  shape.concat = GetParam();
  shape.attention_dropout = 0.3F;
  const SparseBlock block = random_block(10, 30, true, 6);
  const RandomStream stream{7, RandomPurpose::kAttentionDropout, 0, 3};
  Matrix z = random_matrix(10, shape.row_width(), 8);
  const Matrix probe = random_matrix(10, shape.output_width(), 9);
  Matrix out(10, shape.output_width());
  auto f = [&] {
    backend->gat_forward(block.view(), shape, stream, z.view(), out.view());
    return dot(probe, out);
  };
  Matrix grad_z(10, shape.row_width());
  backend->gat_backward(block.view(), shape, stream, z.view(), probe.view(), grad_z.view(), false);
  expect_gradient_matches(z, grad_z, f, 1e-3F);
}

INSTANTIATE_TEST_SUITE_P(HeadsConcatenatedOrAveraged, GatKernelTest, ::testing::Bool());

TEST_F(KernelTest, GatAttentionIsASoftmaxOverInEdges) {
  GatShape shape;
  shape.heads = 2;
  shape.channels = 1;
  const SparseBlock block = random_block(8, 20, true, 10);
  Matrix z = random_matrix(8, shape.row_width(), 11);
  for (vid_t j = 0; j < 8; ++j) z(j, 0) = z(j, 1) = 1.0F;  // every x' = 1, so out = Σ α = 1
  Matrix out(8, shape.output_width());
  backend->gat_forward(block.view(), shape, RandomStream{}, z.view(), out.view());
  for (const float value : out.span()) EXPECT_NEAR(value, 1.0F, 1e-5);
}

TEST_F(KernelTest, SoftmaxCrossEntropyGradientMatchesFiniteDifferences) {
  Matrix logits = random_matrix(6, 4, 12);
  const std::vector<std::int32_t> labels = {0, 3, 1, 2, 2, 1};
  const std::vector<std::uint8_t> mask = {1, 0, 1, 1, 0, 1};
  Matrix grad(6, 4);
  Matrix scratch(6, 4);
  backend->softmax_cross_entropy(logits.view(), labels.data(), mask.data(), 0.25F, grad.view());
  expect_gradient_matches(logits, grad, [&] {
    return 0.25 * backend->softmax_cross_entropy(logits.view(), labels.data(), mask.data(), 1.0F, scratch.view());
  });
  for (std::int64_t c = 0; c < 4; ++c) EXPECT_EQ(grad(1, c), 0.0F);
}

TEST_F(KernelTest, ActivationBackwardMatchesFiniteDifferences) {
  for (const Activation act : {Activation::kRelu, Activation::kElu}) {
    Matrix y = random_matrix(5, 4, 13);
    const Matrix probe = random_matrix(5, 4, 14);
    Matrix h(5, 4);
    backend->bias_activation(y.view(), nullptr, act, h.view());
    Matrix grad(5, 4);
    backend->activation_backward(act, h.view(), probe.view(), grad.view());
    expect_gradient_matches(y, grad, [&] {
      backend->bias_activation(y.view(), nullptr, act, h.view());
      return dot(probe, h);
    });
  }
}

TEST_F(KernelTest, DropoutDependsOnlyOnGlobalIdAndColumn) {
  const Matrix x(6, 300, 1.0F);
  const std::vector<gid_t> gids = {10, 11, 12, 13, 14, 15};
  const RandomStream stream{3, RandomPurpose::kFeatureDropout, 1, 7};
  Matrix full(6, 300);
  backend->dropout(x.view(), gids.data(), stream, 0.5F, full.view());
  // The same rows, processed as two separate chunks in the other order, get the same mask.
  Matrix part(3, 300);
  backend->dropout(ConstRows{x.row(3), 3, 300}, gids.data() + 3, stream, 0.5F, part.view());
  for (std::int64_t r = 0; r < 3; ++r) {
    for (std::int64_t c = 0; c < 300; ++c) EXPECT_EQ(part(r, c), full(r + 3, c));
  }
  // The vectorised kernel draws exactly the per-element stream the CUDA kernels will use.
  for (std::int64_t r = 0; r < 6; ++r) {
    for (std::int64_t c = 0; c < 300; ++c) {
      EXPECT_EQ(full(r, c), rowmath::dropout_scale(stream.vertex_uniform(gids[r], c), 0.5F)) << r << "," << c;
    }
  }
  std::int64_t kept = 0;
  for (const float v : full.span()) {
    EXPECT_TRUE(v == 0.0F || v == 2.0F);
    kept += v > 0.0F ? 1 : 0;
  }
  EXPECT_GT(kept, 800);
  EXPECT_LT(kept, 1000);
  // Another epoch draws another mask.
  Matrix next(6, 300);
  backend->dropout(x.view(), gids.data(), RandomStream{3, RandomPurpose::kFeatureDropout, 1, 8}, 0.5F, next.view());
  EXPECT_NE(std::vector<float>(full.span().begin(), full.span().end()),
            std::vector<float>(next.span().begin(), next.span().end()));
}

TEST_F(KernelTest, ColumnSumsDoNotDependOnThreadCount) {
  const Matrix x = random_matrix(5000, 7, 15);
  std::vector<float> sums_two(7);
  backend->column_sums(x.view(), sums_two.data(), false);
  auto single = make_cpu_backend(1);
  std::vector<float> sums_one(7);
  single->column_sums(x.view(), sums_one.data(), false);
  EXPECT_EQ(sums_two, sums_one);
  make_cpu_backend(2);  // restore the fixture's thread count for later tests
}

// Small kernels run on the calling thread; these blocks are large enough for the team, whose results must be
// the serial ones bit for bit.
TEST_F(KernelTest, LargeKernelsDoNotDependOnThreadCount) {
  const SparseBlock block = random_block(3000, 30000, true, 21);
  GatShape shape;
  shape.heads = 2;
  shape.channels = 8;
  shape.attention_dropout = 0.3F;
  const RandomStream stream{5, RandomPurpose::kAttentionDropout, 1, 2};
  const Matrix x = random_matrix(3000, 16, 22);
  const Matrix z = random_matrix(3000, shape.row_width(), 23);
  const Matrix grad = random_matrix(3000, shape.output_width(), 24);
  std::vector<gid_t> gids(3000);
  for (std::size_t i = 0; i < gids.size(); ++i) gids[i] = static_cast<gid_t>(i) * 7 + 1;
  const RandomStream dropout{5, RandomPurpose::kFeatureDropout, 0, 2};

  auto run = [&](Backend& b) {
    std::vector<Matrix> out;
    out.emplace_back(3000, 16);
    b.spmm(block.view(), x.view(), out.back().view());
    out.emplace_back(3000, 16);
    b.spmm_transpose(block.view(), x.view(), out.back().view(), false);
    out.emplace_back(3000, shape.output_width());
    b.gat_forward(block.view(), shape, stream, z.view(), out.back().view());
    out.emplace_back(3000, shape.row_width());
    b.gat_backward(block.view(), shape, stream, z.view(), grad.view(), out.back().view(), false);
    out.emplace_back(3000, 16);
    b.dropout(x.view(), gids.data(), dropout, 0.5F, out.back().view());
    return out;
  };
  const std::vector<Matrix> two = run(*backend);
  auto single = make_cpu_backend(1);
  const std::vector<Matrix> one = run(*single);
  make_cpu_backend(2);  // restore the fixture's thread count for later tests
  ASSERT_EQ(one.size(), two.size());
  for (std::size_t k = 0; k < one.size(); ++k) {
    EXPECT_TRUE(std::equal(one[k].span().begin(), one[k].span().end(), two[k].span().begin())) << "kernel " << k;
  }
}

TEST_F(KernelTest, GemmHonoursTransposeFlags) {
  const Matrix a = random_matrix(3, 4, 16);
  const Matrix b = random_matrix(3, 5, 17);
  Matrix c(4, 5);
  backend->gemm(true, false, 4, 5, 3, 1.0F, a.data(), 4, b.data(), 5, 0.0F, c.data(), 5);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 5; ++j) {
      double expected = 0.0;
      for (int k = 0; k < 3; ++k) expected += a(k, i) * b(k, j);
      EXPECT_NEAR(c(i, j), expected, 1e-5);
    }
  }
}

}  // namespace
}  // namespace nj

namespace nj {
namespace {

// Rows placed anywhere in a larger buffer (as in device cache slots) give the same results as rows in order.
TEST_F(KernelTest, SourceRowsCanLiveInAnyRowOfTheBuffer) {
  GatShape shape;
  shape.heads = 2;
  shape.channels = 2;
  shape.attention_dropout = 0.2F;
  SparseBlock block = random_block(10, 30, true, 18);
  const Matrix z = random_matrix(10, shape.row_width(), 19);
  const Matrix grad_out = random_matrix(10, shape.output_width(), 20);
  const RandomStream stream{1, RandomPurpose::kAttentionDropout, 0, 0};
  Matrix out(10, shape.output_width());
  Matrix grad_z(10, shape.row_width());
  Matrix gcn_out(10, shape.row_width());
  Matrix gcn_grad(10, shape.row_width());
  backend->gat_forward(block.view(), shape, stream, z.view(), out.view());
  backend->gat_backward(block.view(), shape, stream, z.view(), grad_out.view(), grad_z.view(), false);
  backend->spmm(block.view(), z.view(), gcn_out.view());
  backend->spmm_transpose(block.view(), gcn_out.view(), gcn_grad.view(), false);

  // Source j goes to slot 3j+2 of a 32-row buffer.
  std::vector<vid_t> slots(10);
  Matrix scattered(32, shape.row_width(), -9.0F);
  for (vid_t j = 0; j < 10; ++j) {
    slots[j] = 3 * j + 2;
    std::copy(z.row(j), z.row(j) + z.cols(), scattered.row(slots[j]));
  }
  SparseBlockView view = block.view();
  view.src_row = slots.data();
  Matrix out2(10, shape.output_width());
  Matrix grad_z2(32, shape.row_width());
  Matrix gcn_out2(10, shape.row_width());
  Matrix gcn_grad2(32, shape.row_width());
  backend->gat_forward(view, shape, stream, scattered.view(), out2.view());
  backend->gat_backward(view, shape, stream, scattered.view(), grad_out.view(), grad_z2.view(), false);
  backend->spmm(view, scattered.view(), gcn_out2.view());
  backend->spmm_transpose(view, gcn_out2.view(), gcn_grad2.view(), false);
  for (std::int64_t k = 0; k < out.size(); ++k) EXPECT_EQ(out.data()[k], out2.data()[k]);
  for (std::int64_t k = 0; k < gcn_out.size(); ++k) EXPECT_EQ(gcn_out.data()[k], gcn_out2.data()[k]);
  for (vid_t j = 0; j < 10; ++j) {
    for (std::int64_t c = 0; c < shape.row_width(); ++c) {
      EXPECT_EQ(grad_z(j, c), grad_z2(slots[j], c));
      EXPECT_EQ(gcn_grad(j, c), gcn_grad2(slots[j], c));
    }
  }
}

}  // namespace
}  // namespace nj
