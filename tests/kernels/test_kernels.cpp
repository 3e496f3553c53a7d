// Each kernel's backward is checked against central finite differences of its forward, on small random
// graphs (the GAT with two and eleven heads, both concatenated and averaged, with attention dropout on); GAT's
// forward and backward also against a plain reference in double with 1 to 11 heads. Kernels run on
// the checked CPU device emulation (support/on_device.hpp), so every test also checks that they touch only
// live device memory the copies were ordered for.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <tuple>

#include "nj/core/error.hpp"
#include "nj/graph/shard.hpp"
#include "nj/graph/sparse_block.hpp"
#include "nj/kernels/backend.hpp"
#include "support/backends.hpp"
#include "support/on_device.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

using test::OnDevice;

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

// Checks analytic ∂f/∂x against central differences for every element of x; f reads x from the host, so it
// must upload x again before running any kernel on it.
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

// gat_backward's workspace for a block, on the device.
DeviceArray<float> gat_workspace(OnDevice& on, const SparseBlock& block, const GatShape& shape) {
  const auto edges = static_cast<eid_t>(block.src_index.size());
  return DeviceArray<float>(on.device(), rowmath::gat_backward_workspace_floats(block.num_dst(), edges, shape.heads),
                            "gat_backward workspace");
}

// Kernels on one backend: a test's parameter is the backend (with more, the first of a tuple).
template <typename Param>
class OnBackend : public ::testing::TestWithParam<Param> {
 protected:
  static DeviceKind kind_of(DeviceKind kind) { return kind; }
  template <typename... Rest>
  static DeviceKind kind_of(const std::tuple<DeviceKind, Rest...>& param) {
    return std::get<0>(param);
  }
  DeviceKind kind() const { return kind_of(this->GetParam()); }
  void SetUp() override {
    NJ_SKIP_WITHOUT_BACKEND(kind());
    device_.emplace(kind(), 2);
  }
  OnDevice& on() { return *device_; }
  Backend& backend() { return device_->backend(); }

 private:
  std::optional<OnDevice> device_;
};
using KernelTest = OnBackend<DeviceKind>;

TEST_P(KernelTest, SpmmTransposeIsTheAdjointOfSpmm) {
  const SparseBlock block = random_block(40, 150, false, 1);
  const Matrix x = random_matrix(40, 5, 2);
  const Matrix y = random_matrix(40, 5, 3);
  const DeviceBlock b = on().block(block);
  const DeviceMatrix dx = on().put(x);
  const DeviceMatrix dy = on().put(y);
  DeviceMatrix dax = on().zeros(40, 5);
  DeviceMatrix daty = on().zeros(40, 5);
  backend().spmm(b.view(), dx.view(), dax.view());
  backend().spmm_transpose(b.view(), dy.view(), daty.view(), false);
  EXPECT_NEAR(dot(y, on().get(dax.view())), dot(on().get(daty.view()), x), 1e-3);
}

TEST_P(KernelTest, SpmmMatchesADenseReference) {
  const SparseBlock block = random_block(12, 30, true, 4);
  const Matrix x = random_matrix(12, 3, 5);
  const DeviceBlock b = on().block(block);
  const DeviceMatrix dx = on().put(x);
  DeviceMatrix dout = on().zeros(12, 3);
  backend().spmm(b.view(), dx.view(), dout.view());
  const Matrix out = on().get(dout.view());
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

// The sums of SAGE (mean columns beside root columns), GIN (a scaled root term on the neighbours' columns), APPNP's
// propagation step (columns carried on) and a dense layer (no edges), on a block whose last sources are no
// destination.
struct RootedSumCase {
  const char* name;
  RootedSum sum;
  std::int64_t z_cols;
};
void PrintTo(const RootedSumCase& c, std::ostream* out) { *out << c.name; }

class RootedSumTest : public OnBackend<std::tuple<DeviceKind, RootedSumCase>> {
 protected:
  static constexpr vid_t kVertices = 30;
  static constexpr vid_t kDestinations = 22;
  const RootedSum& sum() const { return std::get<1>(GetParam()).sum; }
  std::int64_t z_cols() const { return std::get<1>(GetParam()).z_cols; }
  static SparseBlock block() {
    const Dataset d = test::random_dataset(kVertices, 110, 1, 2, 8);
    std::vector<float> weights(static_cast<std::size_t>(d.graph.offsets[kDestinations]));
    for (std::size_t e = 0; e < weights.size(); ++e) weights[e] = 0.1F + 0.05F * static_cast<float>(e % 13);
    return local_graph_block(d.graph, weights, kDestinations, whole_local_graph(d.graph).global_id);
  }
};

TEST_P(RootedSumTest, MatchesANaiveReference) {
  const SparseBlock host_block = block();
  const Matrix z = random_matrix(kVertices, z_cols(), 9);
  const DeviceBlock b = on().block(host_block);
  const DeviceMatrix dz = on().put(z);
  DeviceMatrix dout = on().put(random_matrix(kDestinations, sum().output_width(), 10));  // overwritten
  backend().rooted_sum(b.view(), sum(), dz.view(), dout.view());
  const Matrix out = on().get(dout.view());
  const RootedSum& s = sum();
  for (vid_t i = 0; i < kDestinations; ++i) {
    for (std::int64_t c = 0; c < s.width; ++c) {
      double expected = s.root_scale * static_cast<double>(z(i, s.root_column + c));
      for (eid_t e = host_block.dst_offsets[i]; s.reads_neighbours && e < host_block.dst_offsets[i + 1]; ++e) {
        expected += static_cast<double>(s.neighbour_scale) * host_block.edge_weight[e] *
                    z(host_block.src_index[e], s.neighbour_column + c);
      }
      EXPECT_NEAR(out(i, c), expected, 1e-5) << "row " << i << " column " << c;
    }
    for (std::int64_t c = 0; c < s.carried; ++c) EXPECT_EQ(out(i, s.width + c), z(i, s.carried_column + c));
  }
}

TEST_P(RootedSumTest, TransposeIsTheAdjointAndAccumulates) {
  const SparseBlock host_block = block();
  const Matrix z = random_matrix(kVertices, z_cols(), 11);
  const Matrix g = random_matrix(kDestinations, sum().output_width(), 12);
  const DeviceBlock b = on().block(host_block);
  const DeviceMatrix dz = on().put(z);
  const DeviceMatrix dg = on().put(g);
  DeviceMatrix dout = on().zeros(kDestinations, sum().output_width());
  // Rows the backward must overwrite hold garbage first: every column, read or not, is written.
  const Matrix before = random_matrix(kVertices, z_cols(), 13);
  DeviceMatrix dgrad_z = on().put(before);
  backend().rooted_sum(b.view(), sum(), dz.view(), dout.view());
  backend().rooted_sum_transpose(b.view(), sum(), dg.view(), dgrad_z.view(), false);
  const Matrix grad_z = on().get(dgrad_z.view());
  EXPECT_NEAR(dot(g, on().get(dout.view())), dot(grad_z, z), 1e-3);

  on().set(dgrad_z, before);
  backend().rooted_sum_transpose(b.view(), sum(), dg.view(), dgrad_z.view(), true);
  const Matrix accumulated = on().get(dgrad_z.view());
  for (std::int64_t k = 0; k < accumulated.size(); ++k) {
    EXPECT_NEAR(accumulated.data()[k], before.data()[k] + grad_z.data()[k], 1e-5) << "element " << k;
  }
}

TEST_P(KernelTest, RootedSumRefusesColumnsBeyondItsRows) {
  const SparseBlock host_block = random_block(10, 20, false, 14);
  const DeviceBlock b = on().block(host_block);
  const DeviceMatrix dz = on().zeros(10, 4);
  DeviceMatrix dout = on().zeros(10, 3);
  const RootedSum reads_past_the_row{.width = 3, .root_column = 2, .root_scale = 1.0F};
  EXPECT_THROW(backend().rooted_sum(b.view(), reads_past_the_row, dz.view(), dout.view()), Error);
}

std::string rooted_sum_case_name(const ::testing::TestParamInfo<std::tuple<DeviceKind, RootedSumCase>>& info) {
  return fmt::format("{}_{}", test::backend_name(std::get<0>(info.param)), std::get<1>(info.param).name);
}

INSTANTIATE_TEST_SUITE_P(
    Sums, RootedSumTest,
    ::testing::Combine(
        test::all_backends(),
        ::testing::Values(
            RootedSumCase{"sage", {.width = 3, .neighbour_column = 0, .root_column = 3, .root_scale = 1.0F}, 6},
            RootedSumCase{"gin", {.width = 4, .neighbour_column = 0, .root_column = 0, .root_scale = 1.25F}, 4},
            RootedSumCase{"propagation",
                          {.width = 3,
                           .neighbour_column = 0,
                           .neighbour_scale = 0.9F,
                           .root_column = 3,
                           .root_scale = 0.1F,
                           .carried = 3,
                           .carried_column = 3},
                          6},
            RootedSumCase{"dense", {.width = 5, .reads_neighbours = false, .root_column = 0, .root_scale = 1.0F}, 5},
            RootedSumCase{"wide", {.width = 40, .neighbour_column = 2, .root_column = 45, .root_scale = 0.5F}, 90})),
    rooted_sum_case_name);

class GatKernelTest : public OnBackend<std::tuple<DeviceKind, bool>> {
 protected:
  // GAT's backward of a random block of n vertices against finite differences of its forward, with attention
  // dropout; the seeds draw the block, z and the probe.
  void expect_backward_matches_finite_differences(int heads, int channels, vid_t n, eid_t edges,
                                                  const RandomStream& stream, std::array<std::uint64_t, 3> seeds) {
    GatShape shape;
    shape.heads = heads;
    shape.channels = channels;
    shape.concat = std::get<1>(GetParam());
    shape.attention_dropout = 0.3F;
    const SparseBlock block = random_block(n, edges, true, seeds[0]);
    Matrix z = random_matrix(n, shape.row_width(), seeds[1]);
    const Matrix probe = random_matrix(n, shape.output_width(), seeds[2]);
    const DeviceBlock b = on().block(block);
    DeviceMatrix dz = on().put(z);
    const DeviceMatrix dprobe = on().put(probe);
    DeviceMatrix dout = on().zeros(n, shape.output_width());
    auto f = [&] {
      on().set(dz, z);
      backend().gat_forward(b.view(), shape, stream, dz.view(), dout.view());
      return dot(probe, on().get(dout.view()));
    };
    DeviceMatrix dgrad_z = on().zeros(n, shape.row_width());
    DeviceArray<float> workspace = gat_workspace(on(), block, shape);
    backend().gat_backward(b.view(), shape, stream, dz.view(), dprobe.view(), dgrad_z.view(), false, workspace.view());
    expect_gradient_matches(z, on().get(dgrad_z.view()), f, 1e-3F);
  }
};

TEST_P(GatKernelTest, BackwardMatchesFiniteDifferences) {
  expect_backward_matches_finite_differences(2, 3, 10, 30, RandomStream{7, RandomPurpose::kAttentionDropout, 0, 3},
                                             {6, 8, 9});
}

INSTANTIATE_TEST_SUITE_P(HeadsConcatenatedOrAveraged, GatKernelTest,
                         ::testing::Combine(test::all_backends(), ::testing::Bool()), [](const auto& instance) {
                           return test::backend_name(std::get<0>(instance.param)) +
                                  (std::get<1>(instance.param) ? "_concatenated" : "_averaged");
                         });

// The in-edge arrays and global ids of a host block, as the row math reads them.
SparseBlockView host_view(const SparseBlock& block) {
  SparseBlockView view;
  view.num_dst = block.num_dst();
  view.num_src = block.num_src;
  view.edges = static_cast<eid_t>(block.src_index.size());
  view.dst_offsets = block.dst_offsets.data();
  view.src_index = block.src_index.data();
  view.src_gid = block.src_gid.data();
  return view;
}

// GAT aggregation and its backward computed the plain way in double, head by head: softmax over each
// destination's in-edges, the per-head dropout mask of gat_edge_dropout, and the softmax's backward.
struct GatReference {
  Matrix out;
  Matrix grad_z;  // with respect to z, rows indexed like z
};

GatReference gat_reference(const SparseBlock& block, const GatShape& s, const RandomStream& stream, const Matrix& z,
                           const Matrix& grad_out) {
  const SparseBlockView b = host_view(block);
  const double head_scale = s.concat ? 1.0 : 1.0 / s.heads;
  std::vector<double> out(static_cast<std::size_t>(block.num_dst() * s.output_width()), 0.0);
  std::vector<double> grad(static_cast<std::size_t>(z.size()), 0.0);
  auto column = [&](int h, int c) { return (s.concat ? std::int64_t{h} * s.channels : 0) + c; };
  for (vid_t i = 0; i < block.num_dst(); ++i) {
    const eid_t first = block.dst_offsets[i];
    const eid_t end = block.dst_offsets[i + 1];
    for (int h = 0; h < s.heads; ++h) {
      std::vector<double> pre;
      std::vector<double> logit;
      for (eid_t e = first; e < end; ++e) {
        pre.push_back(static_cast<double>(z(block.src_index[e], s.src_score(h))) + z(i, s.dst_score(h)));
        logit.push_back(pre.back() > 0.0 ? pre.back() : s.negative_slope * pre.back());
      }
      const double max = logit.empty() ? 0.0 : *std::max_element(logit.begin(), logit.end());
      double sum = 0.0;
      for (const double l : logit) sum += std::exp(l - max);
      std::vector<double> alpha;
      std::vector<double> grad_alpha;
      double weighted = 0.0;
      for (eid_t e = first; e < end; ++e) {
        const vid_t j = block.src_index[e];
        const double a = std::exp(logit[e - first] - max) / sum;
        const double keep = rowmath::gat_edge_dropout(b, s, stream, i, e, h) * head_scale;
        double dot = 0.0;
        for (int c = 0; c < s.channels; ++c) {
          const double x = z(j, std::int64_t{h} * s.channels + c);
          out[i * s.output_width() + column(h, c)] += a * keep * x;
          dot += grad_out(i, column(h, c)) * x;
          grad[j * z.cols() + std::int64_t{h} * s.channels + c] += a * keep * grad_out(i, column(h, c));
        }
        alpha.push_back(a);
        grad_alpha.push_back(keep * dot);
        weighted += a * keep * dot;
      }
      for (eid_t e = first; e < end; ++e) {
        const std::size_t k = static_cast<std::size_t>(e - first);
        const double grad_pre = alpha[k] * (grad_alpha[k] - weighted) * (pre[k] > 0.0 ? 1.0 : s.negative_slope);
        grad[block.src_index[e] * z.cols() + s.src_score(h)] += grad_pre;
        grad[i * z.cols() + s.dst_score(h)] += grad_pre;
      }
    }
  }
  GatReference r{Matrix(block.num_dst(), s.output_width()), Matrix(z.rows(), z.cols())};
  for (std::size_t k = 0; k < out.size(); ++k) r.out.data()[k] = static_cast<float>(out[k]);
  for (std::size_t k = 0; k < grad.size(); ++k) r.grad_z.data()[k] = static_cast<float>(grad[k]);
  return r;
}

void expect_near_matrix(const Matrix& actual, const Matrix& expected, const std::string& what) {
  ASSERT_EQ(actual.rows(), expected.rows()) << what;
  ASSERT_EQ(actual.cols(), expected.cols()) << what;
  for (std::int64_t r = 0; r < actual.rows(); ++r) {
    for (std::int64_t c = 0; c < actual.cols(); ++c) {
      ASSERT_NEAR(actual(r, c), expected(r, c), 1e-5 + 1e-4 * std::abs(expected(r, c)))
          << what << " at " << r << "," << c;
    }
  }
}

// The kernels against the reference on random graphs: one head, several, eight (one Philox block) and more
// than eight; with and without attention dropout; every vertex a destination with its self-loop, and fewer
// destinations than sources in a graph without self-loops (some destinations have no in-edge at all). Global
// ids above 2^32 reach every word of the dropout's address. The backward accumulates onto earlier values.
TEST_P(GatKernelTest, ForwardAndBackwardMatchANaiveReference) {
  struct GraphCase {
    vid_t vertices;
    eid_t edges;
    bool self_loops;
    vid_t num_dst;
  };
  const GraphCase graphs[] = {{30, 160, true, 30}, {40, 50, false, 25}};
  std::uint64_t seed = 100;
  for (const GraphCase& g : graphs) {
    const Dataset d = test::random_dataset(g.vertices, g.edges, 1, 2, ++seed);
    const CsrGraph graph = g.self_loops ? with_self_loops(d.graph, true) : d.graph;
    std::vector<gid_t> gids(static_cast<std::size_t>(g.vertices));
    for (std::size_t v = 0; v < gids.size(); ++v) {
      gids[v] = static_cast<gid_t>(v) * 2654435761LL + (v % 3 == 0 ? (gid_t{5} << 32) : 0);
    }
    const SparseBlock block = local_graph_block(graph, {}, g.num_dst, gids);
    const DeviceBlock b = on().block(block);
    for (const int heads : {1, 3, 8, 11}) {
      for (const float dropout : {0.0F, 0.4F}) {
        GatShape shape;
        shape.heads = heads;
        shape.channels = 5;
        shape.concat = std::get<1>(GetParam());
        shape.attention_dropout = dropout;
        const std::string what = "heads " + std::to_string(heads) + ", dropout " + std::to_string(dropout) +
                                 ", graph of " + std::to_string(g.vertices) + " vertices";
        const RandomStream stream{9, RandomPurpose::kAttentionDropout, 1, 4};
        const Matrix z = random_matrix(g.vertices, shape.row_width(), ++seed);
        const Matrix grad_out = random_matrix(g.num_dst, shape.output_width(), ++seed);
        const Matrix before = random_matrix(g.vertices, shape.row_width(), ++seed);
        const GatReference expected = gat_reference(block, shape, stream, z, grad_out);

        const DeviceMatrix dz = on().put(z);
        const DeviceMatrix dgrad_out = on().put(grad_out);
        DeviceMatrix dout = on().zeros(g.num_dst, shape.output_width());
        backend().gat_forward(b.view(), shape, stream, dz.view(), dout.view());
        expect_near_matrix(on().get(dout.view()), expected.out, "forward, " + what);

        DeviceArray<float> workspace = gat_workspace(on(), block, shape);
        DeviceMatrix dgrad_z = on().put(before);
        backend().gat_backward(b.view(), shape, stream, dz.view(), dgrad_out.view(), dgrad_z.view(), true,
                               workspace.view());
        Matrix expected_grad = expected.grad_z;
        for (std::int64_t k = 0; k < expected_grad.size(); ++k) expected_grad.data()[k] += before.data()[k];
        expect_near_matrix(on().get(dgrad_z.view()), expected_grad, "backward, " + what);
      }
    }
  }
}

// Many heads, crossing a Philox block of eight, with attention dropout: the backward against finite differences.
TEST_P(GatKernelTest, BackwardWithElevenHeadsMatchesFiniteDifferences) {
  expect_backward_matches_finite_differences(11, 2, 9, 25, RandomStream{3, RandomPurpose::kAttentionDropout, 2, 5},
                                             {61, 62, 63});
}

TEST_P(KernelTest, GatRefusesMoreHeadsThanItsRowsKeep) {
  GatShape shape;
  shape.heads = rowmath::kMaxGatHeads + 1;
  shape.channels = 1;
  const SparseBlock block = random_block(4, 6, true, 70);
  const DeviceBlock b = on().block(block);
  const DeviceMatrix dz = on().zeros(4, shape.row_width());
  DeviceMatrix dout = on().zeros(4, shape.output_width());
  EXPECT_THROW(backend().gat_forward(b.view(), shape, RandomStream{}, dz.view(), dout.view()), Error);
}

// Attention dropout's mask is addressed by (source, destination, head): head h takes half h % 8
// of the Philox block at counter (src low, dst low, src high · W0 ^ dst high ^ (h / 8) << 20), and drawing all
// heads of an edge at once gives each head's draw.
TEST(GatRowMath, EdgeDropoutsAreEachHeadsDraw) {
  const RandomStream stream{0x1234'5678'9abcULL, RandomPurpose::kAttentionDropout, 3, 17};
  const std::vector<gid_t> gids = {0, 7, gid_t{3} << 32, (gid_t{1} << 40) + 99, 123456789};
  for (const gid_t src : gids) {
    for (const gid_t dst : gids) {
      for (std::int32_t head = 0; head < 24; ++head) {
        const auto s = static_cast<std::uint64_t>(src);
        const auto d = static_cast<std::uint64_t>(dst);
        const std::uint32_t high = static_cast<std::uint32_t>(s >> 32U) * Philox4x32::kWeyl0 ^
                                   static_cast<std::uint32_t>(d >> 32U) ^
                                   (static_cast<std::uint32_t>(head >> 3) << 20U);
        EXPECT_EQ(stream.edge_uniform(src, dst, head),
                  stream.uniform(static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(d), high,
                                 static_cast<std::uint32_t>(head & 7)));
      }
    }
  }
  // Destination 0 has more in-edges than are drawn together, destination 1 fewer.
  SparseBlock block;
  block.num_src = 24;
  block.dst_offsets = {0, 20, 23};
  for (vid_t j = 0; j < 20; ++j) block.src_index.push_back((j * 7 + 3) % 24);
  block.src_index.insert(block.src_index.end(), {5, 0, 23});
  for (vid_t j = 0; j < 24; ++j) block.src_gid.push_back(gids[static_cast<std::size_t>(j) % gids.size()] + j * 1000);
  const SparseBlockView b = host_view(block);
  for (const int heads : {1, 5, 8, 9, 16, 21, rowmath::kMaxGatHeads}) {
    for (const float p : {0.0F, 0.5F}) {
      GatShape shape;
      shape.heads = heads;
      shape.attention_dropout = p;
      for (vid_t i = 0; i < 2; ++i) {
        const eid_t end = block.dst_offsets[i + 1];
        for (eid_t e = block.dst_offsets[i]; e < end; ++e) {
          const int count = static_cast<int>(std::min<eid_t>(end - e, rowmath::kGatDropoutLanes));
          std::uint64_t kept[rowmath::kGatDropoutLanes];
          rowmath::gat_edge_keep_masks(b, shape, stream, i, e, count, kept);
          for (int k = 0; k < count; ++k) {
            float keep[rowmath::kMaxGatHeads];
            rowmath::gat_keep_factors(shape, kept[k], rowmath::gat_kept_scale(shape), keep);
            for (int h = 0; h < heads; ++h) {
              EXPECT_EQ(keep[h], rowmath::gat_edge_dropout(b, shape, stream, i, e + k, h))
                  << heads << " heads, p " << p << ", edge " << e + k << " drawn from " << e << ", head " << h;
            }
          }
        }
      }
    }
  }
}

// The shared exp is within 1.03 ulp of e^x (checked for every float once; here on a sample of them), 0 where
// e^x is denormal, and keeps infinities and NaN.
TEST(GatRowMath, ExpIsWithinAnUlpOfTheExactValue) {
  double worst = 0.0;
  for (std::uint64_t bits = 0; bits <= 0xFFFFFFFFULL; bits += 997) {
    const auto word = static_cast<std::uint32_t>(bits);
    float x = 0.0F;
    std::memcpy(&x, &word, sizeof x);
    if (!(x >= -87.3F && x <= 88.7F)) continue;
    const double exact = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(exact)) - 23);
    worst = std::max(worst, std::abs(rowmath::exp_vectorisable(x) - exact) / ulp);
  }
  EXPECT_LT(worst, 1.05);
  EXPECT_EQ(rowmath::exp_vectorisable(0.0F), 1.0F);
  EXPECT_EQ(rowmath::exp_vectorisable(-100.0F), 0.0F);
  EXPECT_EQ(rowmath::exp_vectorisable(-INFINITY), 0.0F);
  EXPECT_EQ(rowmath::exp_vectorisable(INFINITY), INFINITY);
  EXPECT_EQ(rowmath::exp_vectorisable(89.0F), INFINITY);
  EXPECT_TRUE(std::isnan(rowmath::exp_vectorisable(NAN)));
  EXPECT_NEAR(rowmath::exp_vectorisable(88.7F), std::exp(double{88.7F}), std::exp(double{88.7F}) * 2e-7);
}

TEST_P(KernelTest, GatAttentionIsASoftmaxOverInEdges) {
  GatShape shape;
  shape.heads = 2;
  shape.channels = 1;
  const SparseBlock block = random_block(8, 20, true, 10);
  Matrix z = random_matrix(8, shape.row_width(), 11);
  for (vid_t j = 0; j < 8; ++j) z(j, 0) = z(j, 1) = 1.0F;  // every x' = 1, so out = Σ α = 1
  const DeviceBlock b = on().block(block);
  const DeviceMatrix dz = on().put(z);
  DeviceMatrix dout = on().zeros(8, shape.output_width());
  backend().gat_forward(b.view(), shape, RandomStream{}, dz.view(), dout.view());
  const Matrix out = on().get(dout.view());
  for (const float value : out.span()) EXPECT_NEAR(value, 1.0F, 1e-5);
}

TEST_P(KernelTest, ActivationBackwardMatchesFiniteDifferences) {
  for (const Activation act : {Activation::kRelu, Activation::kElu}) {
    Matrix y = random_matrix(5, 4, 13);
    const Matrix probe = random_matrix(5, 4, 14);
    DeviceMatrix dy = on().put(y);
    const DeviceMatrix dprobe = on().put(probe);
    DeviceMatrix dh = on().zeros(5, 4);
    backend().bias_activation(dy.view(), {}, act, dh.view());
    DeviceMatrix dgrad = on().zeros(5, 4);
    backend().activation_backward(act, dh.view(), dprobe.view(), dgrad.view());
    expect_gradient_matches(y, on().get(dgrad.view()), [&] {
      on().set(dy, y);
      backend().bias_activation(dy.view(), {}, act, dh.view());
      return dot(probe, on().get(dh.view()));
    });
  }
}

TEST_P(KernelTest, DropoutDependsOnlyOnGlobalIdAndColumn) {
  const DeviceMatrix dx = on().put(Matrix(6, 300, 1.0F));
  const std::vector<gid_t> gids = {10, 11, 12, 13, 14, 15};
  const DeviceArray<gid_t> dgids = on().put_array(std::span<const gid_t>(gids));
  const RandomStream stream{3, RandomPurpose::kFeatureDropout, 1, 7};
  DeviceMatrix dfull = on().zeros(6, 300);
  backend().dropout(dx.view(), dgids.view(), stream, 0.5F, dfull.view());
  const Matrix full = on().get(dfull.view());
  // The same rows, processed as two separate chunks in the other order, get the same mask.
  DeviceMatrix dpart = on().zeros(3, 300);
  backend().dropout(dx.view().slice(3, 3), dgids.view().subspan(3, 3), stream, 0.5F, dpart.view());
  const Matrix part = on().get(dpart.view());
  for (std::int64_t r = 0; r < 3; ++r) {
    for (std::int64_t c = 0; c < 300; ++c) EXPECT_EQ(part(r, c), full(r + 3, c));
  }
  // Every backend draws exactly the shared per-element mask (the CPU's vectorised kernel included).
  for (std::int64_t r = 0; r < 6; ++r) {
    for (std::int64_t c = 0; c < 300; ++c) {
      EXPECT_EQ(full(r, c), rowmath::dropout_element(stream, gids[r], c, 0.5F, 1.0F)) << r << "," << c;
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
  DeviceMatrix dnext = on().zeros(6, 300);
  backend().dropout(dx.view(), dgids.view(), RandomStream{3, RandomPurpose::kFeatureDropout, 1, 8}, 0.5F, dnext.view());
  const Matrix next = on().get(dnext.view());
  EXPECT_NE(std::vector<float>(full.span().begin(), full.span().end()),
            std::vector<float>(next.span().begin(), next.span().end()));
}

// A matrix with about one entry in `one_in` non-zero (whole rows of zeros among them), of normal values.
Matrix sparse_matrix(std::int64_t rows, std::int64_t cols, int one_in, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  Matrix m(rows, cols, 0.0F);
  for (std::int64_t r = 0; r < rows; ++r) {
    if (r % 7 == 3) continue;
    for (std::int64_t c = 0; c < cols; ++c) {
      if (rng() % static_cast<std::uint64_t>(one_in) == 0) m(r, c) = normal(rng);
    }
  }
  return m;
}

// Sparse rows as a block multiply as the dense matrix does: SpMM is X·W over chosen rows, in their order, and its
// transpose Xᵀ·G; the dropout of their entries is the dense dropout of those rows, in both orders of the entries.
TEST_P(KernelTest, SparseRowsMultiplyAndDropOutAsTheDenseMatrix) {
  const Matrix x = sparse_matrix(30, 200, 9, 41);
  const SparseRows sparse = sparse_rows_of(x.view());
  ASSERT_EQ(sparse.rows(), 30);
  ASSERT_GT(sparse.nonzeros(), 0);
  EXPECT_EQ(std::count_if(x.span().begin(), x.span().end(), [](float v) { return v != 0.0F; }), sparse.nonzeros());
  const std::vector<vid_t> rows = {17, 3, 29, 0, 8, 10};  // row 3 is empty
  const SparseBlock block = sparse_rows_block(sparse, rows);
  ASSERT_EQ(block.num_dst(), 6);
  ASSERT_EQ(block.num_src, 200);
  const DeviceBlock b = on().block(block);
  const Matrix w = random_matrix(200, 5, 42);
  const Matrix g = random_matrix(6, 5, 43);
  const DeviceMatrix dw = on().put(w);
  const DeviceMatrix dg = on().put(g);
  const std::vector<gid_t> gids = {700, 701, std::int64_t{1} << 33, 703, 704, 705};
  const DeviceArray<gid_t> dgids = on().put_array(std::span<const gid_t>(gids));
  const RandomStream stream{5, RandomPurpose::kFeatureDropout, 0, 3};
  for (const float p : {0.0F, 0.5F}) {
    SCOPED_TRACE(fmt::format("dropout {}", p));
    // The dense reference: the chosen rows, dropped as dense rows are.
    Matrix dropped(6, 200);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (std::int64_t c = 0; c < 200; ++c) {
        const float v = x(rows[i], c);
        dropped(static_cast<std::int64_t>(i), c) = p > 0.0F ? rowmath::dropout_element(stream, gids[i], c, p, v) : v;
      }
    }
    DeviceArray<float> in_order(on().device(), static_cast<std::int64_t>(block.src_index.size()), "weights");
    DeviceArray<float> out_order(on().device(), static_cast<std::int64_t>(block.src_index.size()), "out weights");
    SparseBlockView view = b.view();
    if (p > 0.0F) {
      backend().dropout_entries(view, dgids.view(), stream, p, in_order.view(), out_order.view());
      view.edge_weight = in_order.view().data;
      view.out_weight = out_order.view().data;
    }
    DeviceMatrix dz = on().zeros(6, 5);
    backend().spmm(view, dw.view(), dz.view());
    const Matrix z = on().get(dz.view());
    DeviceMatrix dwg = on().put(Matrix(200, 5, 1.0F));
    backend().spmm_transpose(view, dg.view(), dwg.view(), true);
    const Matrix wg = on().get(dwg.view());
    for (std::int64_t i = 0; i < 6; ++i) {
      for (std::int64_t o = 0; o < 5; ++o) {
        double expected = 0.0;
        for (std::int64_t c = 0; c < 200; ++c) expected += double{dropped(i, c)} * w(c, o);
        EXPECT_NEAR(z(i, o), expected, 1e-4) << i << "," << o;
      }
    }
    for (std::int64_t c = 0; c < 200; ++c) {
      for (std::int64_t o = 0; o < 5; ++o) {
        double expected = 1.0;
        for (std::int64_t i = 0; i < 6; ++i) expected += double{dropped(i, c)} * g(i, o);
        EXPECT_NEAR(wg(c, o), expected, 1e-4) << c << "," << o;
      }
    }
  }
}

// Column sums add the same floats in the same order on every backend: the shared row math's blocks.
TEST_P(KernelTest, ColumnSumsAreTheSharedBlockedSumsBitForBit) {
  const Matrix x = random_matrix(2 * rowmath::kColumnSumBlockRows + 77, 7, 31, 3.0F);
  const DeviceMatrix dx = on().put(x);
  const std::vector<float> initial = {1.0F, -2.0F, 0.5F, 3.0F, 0.0F, 7.0F, -1.0F};
  DeviceArray<float> dsums = on().put_array(std::span<const float>(initial));
  backend().column_sums(dx.view(), dsums.view(), true);
  const std::vector<float> sums = on().get_array(dsums.view());
  for (std::int64_t c = 0; c < x.cols(); ++c) {
    EXPECT_EQ(sums[c], rowmath::column_sum(x.data(), x.rows(), x.cols(), c, initial[c])) << c;
  }
}

// Gathering rows into slots, adding them back and zeroing some: what the cache pools do with rows.
TEST_P(KernelTest, RowsMoveAddAndZeroThroughIndexLists) {
  const Matrix src = random_matrix(5, 3, 41);
  const Matrix base = random_matrix(8, 3, 42);
  const std::vector<vid_t> from = {4, 0, 2};
  const std::vector<vid_t> to = {7, 1, 5};
  const DeviceMatrix dsrc = on().put(src);
  DeviceMatrix ddst = on().put(base);
  const DeviceArray<vid_t> dfrom = on().put_array(std::span<const vid_t>(from));
  const DeviceArray<vid_t> dto = on().put_array(std::span<const vid_t>(to));
  backend().copy_rows(dsrc.view(), dfrom.view(), ddst.view(), dto.view(), 3);
  backend().add_rows(dsrc.view(), dfrom.view(), ddst.view(), dto.view(), 2);
  backend().zero_rows(ddst.view(), dfrom.view().subspan(2, 1), 1);  // row 2
  const Matrix dst = on().get(ddst.view());
  for (std::int64_t r = 0; r < 8; ++r) {
    for (std::int64_t c = 0; c < 3; ++c) {
      float expected = base(r, c);
      if (r == 7) expected = src(4, c) + src(4, c);
      if (r == 1) expected = src(0, c) + src(0, c);
      if (r == 5) expected = src(2, c);
      if (r == 2) expected = 0.0F;
      EXPECT_EQ(dst(r, c), expected) << r << "," << c;
    }
  }
}

TEST_P(KernelTest, ColumnSumsDoNotDependOnThreadCount) {
  const Matrix x = random_matrix(5000, 7, 15);
  auto sums = [&](OnDevice& device) {
    const DeviceMatrix dx = device.put(x);
    DeviceArray<float> dsums(device.device(), 7, "column sums");
    device.backend().column_sums(dx.view(), dsums.view(), false);
    return device.get_array(dsums.view());
  };
  const std::vector<float> sums_two = sums(on());
  std::vector<float> sums_one;
  {
    OnDevice single(kind(), 1);
    sums_one = sums(single);
  }
  EXPECT_EQ(sums_two, sums_one);
  make_cpu_backend(2);  // restore the fixture's thread count for later tests
}

// Small kernels run on the calling thread; these blocks are large enough for the team, whose results must be
// the serial ones bit for bit.
TEST_P(KernelTest, LargeKernelsDoNotDependOnThreadCount) {
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

  auto run = [&](OnDevice& device) {
    Backend& k = device.backend();
    const DeviceBlock b = device.block(block);
    const DeviceMatrix dx = device.put(x);
    const DeviceMatrix dz = device.put(z);
    const DeviceMatrix dgrad = device.put(grad);
    const DeviceArray<gid_t> dgids = device.put_array(std::span<const gid_t>(gids));
    DeviceArray<float> workspace = gat_workspace(device, block, shape);
    std::vector<Matrix> out;
    DeviceMatrix d = device.zeros(3000, 16);
    k.spmm(b.view(), dx.view(), d.view());
    out.push_back(device.get(d.view()));
    d = device.zeros(3000, 16);
    k.spmm_transpose(b.view(), dx.view(), d.view(), false);
    out.push_back(device.get(d.view()));
    d = device.zeros(3000, shape.output_width());
    k.gat_forward(b.view(), shape, stream, dz.view(), d.view());
    out.push_back(device.get(d.view()));
    d = device.zeros(3000, shape.row_width());
    k.gat_backward(b.view(), shape, stream, dz.view(), dgrad.view(), d.view(), false, workspace.view());
    out.push_back(device.get(d.view()));
    d = device.zeros(3000, 16);
    k.dropout(dx.view(), dgids.view(), dropout, 0.5F, d.view());
    out.push_back(device.get(d.view()));
    return out;
  };
  const std::vector<Matrix> two = run(on());
  std::vector<Matrix> one;
  {
    OnDevice single(kind(), 1);
    one = run(single);
  }
  make_cpu_backend(2);  // restore the fixture's thread count for later tests
  ASSERT_EQ(one.size(), two.size());
  for (std::size_t k = 0; k < one.size(); ++k) {
    EXPECT_TRUE(std::equal(one[k].span().begin(), one[k].span().end(), two[k].span().begin())) << "kernel " << k;
  }
}

TEST_P(KernelTest, GemmHonoursTransposeFlags) {
  const Matrix a = random_matrix(3, 4, 16);
  const Matrix b = random_matrix(3, 5, 17);
  const DeviceMatrix da = on().put(a);
  const DeviceMatrix db = on().put(b);
  DeviceMatrix dc = on().zeros(4, 5);
  backend().gemm(true, false, 1.0F, da.view(), db.view(), 0.0F, dc.view());
  const Matrix c = on().get(dc.view());
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 5; ++j) {
      double expected = 0.0;
      for (int k = 0; k < 3; ++k) expected += a(k, i) * b(k, j);
      EXPECT_NEAR(c(i, j), expected, 1e-5);
    }
  }
}

// Rows placed anywhere in a larger buffer (as in device cache slots) give the same results as rows in order.
TEST_P(KernelTest, SourceRowsCanLiveInAnyRowOfTheBuffer) {
  GatShape shape;
  shape.heads = 2;
  shape.channels = 2;
  shape.attention_dropout = 0.2F;
  const SparseBlock block = random_block(10, 30, true, 18);
  const Matrix z = random_matrix(10, shape.row_width(), 19);
  const Matrix grad_out = random_matrix(10, shape.output_width(), 20);
  const RandomStream stream{1, RandomPurpose::kAttentionDropout, 0, 0};
  const DeviceBlock b = on().block(block);
  DeviceArray<float> workspace = gat_workspace(on(), block, shape);
  const DeviceMatrix dz = on().put(z);
  const DeviceMatrix dgrad_out = on().put(grad_out);
  DeviceMatrix dout = on().zeros(10, shape.output_width());
  DeviceMatrix dgrad_z = on().zeros(10, shape.row_width());
  DeviceMatrix dgcn_out = on().zeros(10, shape.row_width());
  DeviceMatrix dgcn_grad = on().zeros(10, shape.row_width());
  backend().gat_forward(b.view(), shape, stream, dz.view(), dout.view());
  backend().gat_backward(b.view(), shape, stream, dz.view(), dgrad_out.view(), dgrad_z.view(), false, workspace.view());
  backend().spmm(b.view(), dz.view(), dgcn_out.view());
  backend().spmm_transpose(b.view(), dgcn_out.view(), dgcn_grad.view(), false);

  // Source j goes to slot 3j+2 of a 32-row buffer.
  std::vector<vid_t> slots(10);
  Matrix scattered(32, shape.row_width(), -9.0F);
  for (vid_t j = 0; j < 10; ++j) {
    slots[j] = 3 * j + 2;
    std::copy(z.row(j), z.row(j) + z.cols(), scattered.row(slots[j]));
  }
  const DeviceArray<vid_t> dslots = on().put_array(std::span<const vid_t>(slots));
  const SparseBlockView view = b.view(dslots.view());
  const DeviceMatrix dscattered = on().put(scattered);
  DeviceMatrix dout2 = on().zeros(10, shape.output_width());
  DeviceMatrix dgrad_z2 = on().zeros(32, shape.row_width());
  DeviceMatrix dgcn_out2 = on().zeros(10, shape.row_width());
  DeviceMatrix dgcn_grad2 = on().zeros(32, shape.row_width());
  backend().gat_forward(view, shape, stream, dscattered.view(), dout2.view());
  backend().gat_backward(view, shape, stream, dscattered.view(), dgrad_out.view(), dgrad_z2.view(), false,
                         workspace.view());
  backend().spmm(view, dscattered.view(), dgcn_out2.view());
  backend().spmm_transpose(view, dgcn_out2.view(), dgcn_grad2.view(), false);

  const Matrix out = on().get(dout.view());
  const Matrix out2 = on().get(dout2.view());
  const Matrix gcn_out = on().get(dgcn_out.view());
  const Matrix gcn_out2 = on().get(dgcn_out2.view());
  const Matrix grad_z = on().get(dgrad_z.view());
  const Matrix grad_z2 = on().get(dgrad_z2.view());
  const Matrix gcn_grad = on().get(dgcn_grad.view());
  const Matrix gcn_grad2 = on().get(dgcn_grad2.view());
  for (std::int64_t k = 0; k < out.size(); ++k) EXPECT_EQ(out.data()[k], out2.data()[k]);
  for (std::int64_t k = 0; k < gcn_out.size(); ++k) EXPECT_EQ(gcn_out.data()[k], gcn_out2.data()[k]);
  for (vid_t j = 0; j < 10; ++j) {
    for (std::int64_t c = 0; c < shape.row_width(); ++c) {
      EXPECT_EQ(grad_z(j, c), grad_z2(slots[j], c));
      EXPECT_EQ(gcn_grad(j, c), gcn_grad2(slots[j], c));
    }
  }

  // Their gradients may go to rows of a buffer of their own (grad_row, as a pool of gradients beside the pool of
  // rows): source j's to row 5j+1 of a 50-row buffer, while its row is read from slot 3j+2.
  std::vector<vid_t> gradient_slots(10);
  for (vid_t j = 0; j < 10; ++j) gradient_slots[j] = 5 * j + 1;
  const DeviceArray<vid_t> dgradient_slots = on().put_array(std::span<const vid_t>(gradient_slots));
  SparseBlockView apart = view;
  apart.grad_row = dgradient_slots.view().data;
  DeviceMatrix dgrad_z3 = on().zeros(50, shape.row_width());
  DeviceMatrix dgcn_grad3 = on().zeros(50, shape.row_width());
  backend().gat_backward(apart, shape, stream, dscattered.view(), dgrad_out.view(), dgrad_z3.view(), false,
                         workspace.view());
  backend().spmm_transpose(apart, dgcn_out2.view(), dgcn_grad3.view(), false);
  const Matrix grad_z3 = on().get(dgrad_z3.view());
  const Matrix gcn_grad3 = on().get(dgcn_grad3.view());
  for (vid_t j = 0; j < 10; ++j) {
    for (std::int64_t c = 0; c < shape.row_width(); ++c) {
      EXPECT_EQ(grad_z(j, c), grad_z3(gradient_slots[j], c));
      EXPECT_EQ(gcn_grad(j, c), gcn_grad3(gradient_slots[j], c));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, KernelTest, test::all_backends(), test::BackendName());

// Every array of a host block, as the row math reads them.
SparseBlockView full_host_view(const SparseBlock& block) {
  SparseBlockView view = host_view(block);
  view.edge_weight = block.edge_weight.data();
  view.src_offsets = block.by_source.offsets.data();
  view.out_dst = block.by_source.destinations.data();
  view.out_edge = block.by_source.edge_position.data();
  view.out_weight = block.out_weight.data();
  return view;
}

// What the CUDA kernels run a warp a row: lanes 0..31 each compute their own columns (rowmath::LaneColumns). Run
// one lane after the other here, they must write every element once and give the whole row bit for bit.
template <typename RowFunction>
void expect_lanes_give_the_whole_row(std::int64_t rows, std::int64_t cols, float initial, RowFunction&& row) {
  Matrix whole(rows, cols);
  Matrix split(rows, cols);
  Matrix writes(rows, cols);  // how many lanes wrote each element
  whole.fill(initial);
  split.fill(initial);
  for (std::int64_t r = 0; r < rows; ++r) row(r, whole.row(r), rowmath::AllColumns{});
  for (std::int64_t lane = 0; lane < rowmath::LaneColumns::kStep; ++lane) {
    Matrix before = split;
    for (std::int64_t r = 0; r < rows; ++r) row(r, split.row(r), rowmath::LaneColumns{lane});
    for (std::int64_t k = 0; k < split.size(); ++k) {
      if (split.data()[k] != before.data()[k]) writes.data()[k] += 1.0F;
    }
  }
  for (std::int64_t k = 0; k < whole.size(); ++k) {
    ASSERT_EQ(split.data()[k], whole.data()[k]) << "element " << k;
    ASSERT_LE(writes.data()[k], 1.0F) << "element " << k << " written by two lanes";
  }
}

TEST(RowMathLanes, SplitRowsEqualWholeRows) {
  const SparseBlock block = random_block(30, 200, true, 12);
  const SparseBlockView b = full_host_view(block);
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  for (const std::int64_t cols : {1, 7, 32, 45, 70}) {
    SCOPED_TRACE(fmt::format("{} columns", cols));
    Matrix in(b.num_src, cols);
    for (float& x : in.span()) x = normal(rng);
    expect_lanes_give_the_whole_row(b.num_dst, cols, 0.0F, [&](std::int64_t i, float* out, auto columns) {
      rowmath::spmm_row(b, static_cast<vid_t>(i), in.data(), cols, out, columns);
    });
    for (const bool accumulate : {false, true}) {
      expect_lanes_give_the_whole_row(b.num_src, cols, 0.5F, [&](std::int64_t j, float* out, auto columns) {
        rowmath::spmm_transpose_row(b, static_cast<vid_t>(j), in.data(), cols, out, accumulate, columns);
      });
      expect_lanes_give_the_whole_row(b.num_src, cols, 0.5F, [&](std::int64_t r, float* out, auto columns) {
        rowmath::move_row(in.row(r), out, cols, accumulate, columns);
      });
    }
    expect_lanes_give_the_whole_row(b.num_src, cols, 0.5F, [&](std::int64_t /*r*/, float* out, auto columns) {
      rowmath::zero_row(out, cols, columns);
    });
  }
  for (const bool concat : {true, false}) {
    for (const int heads : {1, 3, 8}) {
      SCOPED_TRACE(fmt::format("{} heads, {}", heads, concat ? "concatenated" : "averaged"));
      GatShape shape;
      shape.heads = heads;
      shape.channels = 5;
      shape.concat = concat;
      shape.attention_dropout = 0.3F;
      const RandomStream stream{3, RandomPurpose::kAttentionDropout, 1, 2};
      Matrix z(b.num_src, shape.row_width());
      for (float& x : z.span()) x = normal(rng);
      expect_lanes_give_the_whole_row(
          b.num_dst, shape.output_width(), 0.0F, [&](std::int64_t i, float* out, auto columns) {
            rowmath::gat_forward_row(b, shape, stream, static_cast<vid_t>(i), z.data(), out, columns);
          });
      // The source pass reads the destination pass's workspace, which a thread a destination writes.
      Matrix grad_out(b.num_dst, shape.output_width());
      for (float& x : grad_out.span()) x = normal(rng);
      std::vector<float> workspace(
          static_cast<std::size_t>(rowmath::gat_backward_workspace_floats(b.num_dst, b.num_edges(), heads)));
      float* dst_score_grad = workspace.data() + rowmath::gat_dst_score_grad_offset(b.num_edges(), heads);
      for (vid_t i = 0; i < b.num_dst; ++i) {
        rowmath::gat_backward_row(b, shape, stream, i, z.data(), grad_out.row(i), workspace.data(),
                                  dst_score_grad + std::int64_t{i} * heads);
      }
      for (const bool accumulate : {false, true}) {
        expect_lanes_give_the_whole_row(
            b.num_src, shape.row_width(), 0.25F, [&](std::int64_t j, float* out, auto columns) {
              const float* own = j < b.num_dst ? dst_score_grad + j * heads : nullptr;
              rowmath::gat_backward_source_row(b, shape, static_cast<vid_t>(j), workspace.data(), own, grad_out.data(),
                                               out, accumulate, columns);
            });
      }
    }
  }
}

}  // namespace
}  // namespace nj
