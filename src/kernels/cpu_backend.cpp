#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "nj/core/error.hpp"
#include "nj/kernels/backend.hpp"

// OpenBLAS's own thread count; declared here because not every cblas.h exposes it.
extern "C" void openblas_set_num_threads(int num_threads);

namespace nj {
namespace {

// Below this many floats touched, a kernel runs on the calling thread: waking the team costs more than the
// work (the small steps of a tight device budget issue many such kernels).
constexpr std::int64_t kParallelWork = std::int64_t{1} << 14;
bool worth_threads(std::int64_t floats) { return floats >= kParallelWork; }

// Calls f with the activation as a compile-time constant: the element loops f runs then vectorise, which a
// switch per element prevents. Element c of a row reads and writes only column c, so those loops are `omp
// simd` even where input and output alias.
template <class F>
void with_activation(Activation act, F&& f) {
  switch (act) {
    case Activation::kRelu: f(std::integral_constant<Activation, Activation::kRelu>{}); return;
    case Activation::kElu: f(std::integral_constant<Activation, Activation::kElu>{}); return;
    case Activation::kNone: break;
  }
  f(std::integral_constant<Activation, Activation::kNone>{});
}

// The first local source of each of `threads` ranges of a block's sources holding about as many in-edges each (and
// num_src after the last): the sources counted in buckets of 2^shift consecutive ids (at most kSourceBuckets of
// them), every kSampleStride-th in-edge read, by the threads together.
std::vector<vid_t> source_ranges(const SparseBlockView& b, int threads) {
  constexpr std::int64_t kSourceBuckets = 1024;
  constexpr eid_t kSampleStride = 8;
  unsigned shift = 0;
  while ((std::int64_t{b.num_src} >> shift) >= kSourceBuckets) ++shift;
  const std::int64_t buckets = (std::int64_t{b.num_src} >> shift) + 1;
  std::vector<eid_t> counts(static_cast<std::size_t>(buckets * threads), 0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    eid_t* mine = counts.data() + static_cast<std::size_t>(t) * static_cast<std::size_t>(buckets);
    for (eid_t e = b.edges * t / threads; e < b.edges * (t + 1) / threads; e += kSampleStride) {
      ++mine[b.source(e) >> shift];
    }
  }
  // Range r starts after the bucket where the edges counted reach r/threads of them.
  const auto ranges = static_cast<std::size_t>(threads);
  std::vector<vid_t> first{0};
  eid_t counted = 0;
  for (std::int64_t bucket = 0; bucket < buckets && first.size() < ranges; ++bucket) {
    for (int t = 0; t < threads; ++t) counted += counts[static_cast<std::size_t>(t * buckets + bucket)];
    while (first.size() < ranges && counted * kSampleStride >= b.edges * static_cast<eid_t>(first.size()) / threads) {
      first.push_back(static_cast<vid_t>(std::min(std::int64_t{b.num_src}, (bucket + 1) << shift)));
    }
  }
  first.resize(ranges + 1, b.num_src);
  return first;
}

// A transpose over a block without out-edges (a packed block read as it lies): edge(j, i, e) for every in-edge e
// (from local source j into destination i), then own(j) for every source, each adding into source j's row of
// `gradients`, which start at zero unless `accumulate`. Each thread owns a range of sources (source_ranges), zeroes
// their rows where it starts them, and reads every in-edge for those of its range,
// so a source's edges come in destination order, as a gather over its out-edges visits them: the sums are the same,
// bit for bit, whatever the thread count. The in-edges of the range are first listed without a branch, a batch at a
// time, so that the test costs no mispredicted jump, and the rows the batch adds into are asked for ahead.
template <class Edge, class Own>
void by_source_over_in_edges(const SparseBlockView& b, std::int64_t work, DeviceRows gradients, bool accumulate,
                             Edge&& edge, Own&& own) {
  const int threads = worth_threads(work) ? std::max(1, omp_get_max_threads()) : 1;
  const std::vector<vid_t> first = threads > 1 ? source_ranges(b, threads) : std::vector<vid_t>{0, b.num_src};
#pragma omp parallel num_threads(threads)
  {
    constexpr eid_t kBatch = 256;
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const vid_t low = first[t];
    const auto count = static_cast<std::uint32_t>(first[t + 1] - low);
    if (!accumulate) {
      for (vid_t j = low; j < first[t + 1]; ++j) rowmath::zero_row(gradients.row(b.gradient_row_of(j)), gradients.cols);
    }
    eid_t edge_of[kBatch];
    vid_t source_of[kBatch];
    vid_t destination_of[kBatch];
    vid_t i = 0;
    for (eid_t start = 0; start < b.edges; start += kBatch) {
      const eid_t stop = std::min(b.edges, start + kBatch);
      eid_t listed = 0;
      for (eid_t e = start; e < stop; ++e) {
        while (b.dst_offsets[i + 1] <= e) ++i;
        const vid_t j = b.source(e);
        edge_of[listed] = e;
        source_of[listed] = j;
        destination_of[listed] = i;
        listed += static_cast<std::uint32_t>(j - low) < count ? 1 : 0;
      }
      for (eid_t k = 0; k < listed; ++k) {
        if (k + rowmath::kPrefetchDistance < listed) {
          rowmath::prefetch_row(gradients.row(b.gradient_row_of(source_of[k + rowmath::kPrefetchDistance])),
                                gradients.cols);
        }
        edge(source_of[k], destination_of[k], edge_of[k]);
      }
    }
    for (vid_t j = low; j < first[t + 1]; ++j) own(j);
  }
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) {
    if (threads > 0) {
      omp_set_num_threads(threads);
      openblas_set_num_threads(threads);
    }
  }

  std::string_view name() const override { return "cpu"; }
  LibraryMemory library_memory() const override { return {.reads_packed_blocks = true}; }

  void gemm(bool transpose_a, bool transpose_b, float alpha, ConstDeviceRows a, ConstDeviceRows b, float beta,
            DeviceRows c) override {
    const auto [m, n, k] = gemm_shape(transpose_a, transpose_b, a, b, c);
    if (m == 0 || n == 0) return;
    cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a.data,
                static_cast<blasint>(a.cols), b.data, static_cast<blasint>(b.cols), beta, c.data,
                static_cast<blasint>(c.cols));
  }

  void spmm(const SparseBlockView& block, ConstDeviceRows in, DeviceRows out) override {
    expect_spmm_shapes(block, in, out);
#pragma omp parallel for schedule(dynamic, 64) if (worth_threads((block.num_edges() + block.num_dst) * in.cols))
    for (vid_t i = 0; i < block.num_dst; ++i) rowmath::spmm_row(block, i, in.data, in.cols, out.row(i));
  }

  void spmm_transpose(const SparseBlockView& block, ConstDeviceRows grad_out, DeviceRows grad_in,
                      bool accumulate) override {
    expect_spmm_shapes(block, grad_in, grad_out);
    const std::int64_t work = (block.num_edges() + block.num_src) * grad_out.cols;
    if (!block.has_out_edges()) {
      by_source_over_in_edges(
          block, work, grad_in, accumulate,
          [&](vid_t j, vid_t i, eid_t e) {
            rowmath::spmm_transpose_edge(block.weight(e, j, i), grad_out.row(i), grad_in.row(block.gradient_row_of(j)),
                                         grad_out.cols);
          },
          [](vid_t /*j*/) {});
      return;
    }
#pragma omp parallel for schedule(dynamic, 64) if (worth_threads(work))
    for (vid_t j = 0; j < block.num_src; ++j) {
      rowmath::spmm_transpose_row(block, j, grad_out.data, grad_out.cols, grad_in.row(block.gradient_row_of(j)),
                                  accumulate);
    }
  }

  void rooted_sum(const SparseBlockView& block, const RootedSum& sum, ConstDeviceRows z, DeviceRows out) override {
    expect_rooted_sum_shapes(block, sum, z, out);
#pragma omp parallel for schedule(dynamic, 64) if (worth_threads((block.num_edges() + block.num_dst) * sum.width))
    for (vid_t i = 0; i < block.num_dst; ++i) rowmath::rooted_sum_row(block, sum, i, z.data, z.cols, out.row(i));
  }

  void rooted_sum_transpose(const SparseBlockView& block, const RootedSum& sum, ConstDeviceRows grad_out,
                            DeviceRows grad_z, bool accumulate) override {
    expect_rooted_sum_shapes(block, sum, grad_z, grad_out);
    const std::int64_t work = (block.num_edges() + block.num_src) * grad_z.cols;
    // A sum that reads no neighbour reads no out-edge either.
    if (!block.has_out_edges() && sum.reads_neighbours) {
      by_source_over_in_edges(
          block, work, grad_z, accumulate,
          [&](vid_t j, vid_t i, eid_t e) {
            rowmath::rooted_sum_transpose_edge(sum, block.weight(e, j, i), grad_out.row(i),
                                               grad_z.row(block.gradient_row_of(j)));
          },
          [&](vid_t j) {
            if (j < block.num_dst)
              rowmath::rooted_sum_transpose_own(sum, grad_out.row(j), grad_z.row(block.gradient_row_of(j)));
          });
      return;
    }
#pragma omp parallel for schedule(dynamic, 64) if (worth_threads(work))
    for (vid_t j = 0; j < block.num_src; ++j) {
      rowmath::rooted_sum_transpose_row(block, sum, j, grad_out.data, grad_z.row(block.gradient_row_of(j)), grad_z.cols,
                                        accumulate);
    }
  }

  void gat_forward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                   ConstDeviceRows z, DeviceRows out) override {
    expect_gat_shapes(block, shape, z, out);
#pragma omp parallel for schedule(dynamic, 64) if (worth_threads(block.num_edges() * z.cols))
    for (vid_t i = 0; i < block.num_dst; ++i) rowmath::gat_forward_row(block, shape, attention, i, z.data, out.row(i));
  }

  void gat_backward(const SparseBlockView& block, const GatShape& shape, const RandomStream& attention,
                    ConstDeviceRows z, ConstDeviceRows grad_out, DeviceRows grad_z, bool accumulate,
                    DeviceSpan<float> workspace) override {
    expect_gat_shapes(block, shape, grad_z, grad_out);
    NJ_EXPECTS(workspace.size >= rowmath::gat_backward_workspace_floats(block.num_dst, block.num_edges(), shape.heads),
               "gat_backward workspace of {} floats", workspace.size);
    // Per edge: its heads' coefficients and score gradients; then per destination its heads' score gradients.
    float* edge_workspace = workspace.data;
    float* dst_score_grad = workspace.data + rowmath::gat_dst_score_grad_offset(block.num_edges(), shape.heads);
#pragma omp parallel for schedule(dynamic, 64) if (worth_threads(block.num_edges() * z.cols))
    for (vid_t i = 0; i < block.num_dst; ++i) {
      rowmath::gat_backward_row(block, shape, attention, i, z.data, grad_out.row(i), edge_workspace,
                                dst_score_grad + static_cast<std::int64_t>(i) * shape.heads);
    }
    // Destinations are the first sources: each adds its own score gradient after its out-edges.
    const auto own_score_gradient = [&](vid_t j) {
      return j < block.num_dst ? dst_score_grad + static_cast<std::int64_t>(j) * shape.heads : nullptr;
    };
    if (!block.has_out_edges()) {
      by_source_over_in_edges(
          block, block.num_edges() * z.cols, grad_z, accumulate,
          [&](vid_t j, vid_t i, eid_t e) {
            rowmath::gat_backward_edge(shape, edge_workspace + e * 2 * shape.heads, grad_out.row(i),
                                       grad_z.row(block.gradient_row_of(j)));
          },
          [&](vid_t j) {
            if (const float* own = own_score_gradient(j)) {
              rowmath::gat_backward_own(shape, own, grad_z.row(block.gradient_row_of(j)));
            }
          });
      return;
    }
#pragma omp parallel for schedule(dynamic, 64) if (worth_threads(block.num_edges() * z.cols))
    for (vid_t j = 0; j < block.num_src; ++j) {
      rowmath::gat_backward_source_row(block, shape, j, edge_workspace, own_score_gradient(j), grad_out.data,
                                       grad_z.row(block.gradient_row_of(j)), accumulate);
    }
  }

  void dropout(ConstDeviceRows in, DeviceSpan<const gid_t> row_gid, const RandomStream& stream, float p,
               DeviceRows out) override {
    NJ_EXPECTS(in.rows == out.rows && in.cols == out.cols && row_gid.size >= in.rows, "dropout shapes");
    // A group of 128 columns draws 16 Philox blocks together (the rounds vectorise across them), and column
    // 128g + 16k + lane takes half k of block lane (RandomStream::vertex_uniform's layout).
    constexpr int kLanes = 16;
    constexpr std::int64_t kGroup = 128;
    const float scale = 1.0F / (1.0F - p);
#pragma omp parallel for schedule(static) if (worth_threads(in.size()))
    for (std::int64_t r = 0; r < in.rows; ++r) {
      const float* x = in.row(r);
      float* y = out.row(r);
      const auto gid = static_cast<std::uint64_t>(row_gid.data[r]);
      for (std::int64_t first = 0; first < in.cols; first += kGroup) {
        const std::int64_t end = std::min(in.cols, first + kGroup);
        // Sparse inputs (bag-of-words features) are mostly zero, and zero stays zero whatever the mask.
        if (std::all_of(x + first, x + end, [](float v) { return v == 0.0F; })) {
          std::fill(y + first, y + end, 0.0F);
          continue;
        }
        std::uint32_t counters[kLanes];
        for (int lane = 0; lane < kLanes; ++lane) {
          counters[lane] = static_cast<std::uint32_t>((first / kGroup) * kLanes + lane);
        }
        std::uint32_t words[4][kLanes];
        philox_blocks<kLanes>(stream, static_cast<std::uint32_t>(gid), static_cast<std::uint32_t>(gid >> 32U), counters,
                              words);
        for (std::int64_t k = 0; k < kGroup / kLanes && first + k * kLanes < end; ++k) {
          const std::int64_t base = first + k * kLanes;
          const int lanes = static_cast<int>(std::min<std::int64_t>(kLanes, end - base));
          const std::uint32_t* word = words[k >> 1];
          const auto half = static_cast<std::uint32_t>(k & 1);
          // A select of the factor, not of the store, so that it vectorises as a blend rather than a branch
          // that dropout's coin flips would mispredict half the time.
#pragma omp simd
          for (int lane = 0; lane < lanes; ++lane) {
            const float factor = uniform_from_half(word[lane], half) < p ? 0.0F : scale;
            y[base + lane] = x[base + lane] * factor;
          }
        }
      }
    }
  }

  void dropout_entries(const SparseBlockView& x, DeviceSpan<const gid_t> row_gid, const RandomStream& stream, float p,
                       DeviceSpan<float> weights, DeviceSpan<float> out_weights) override {
    expect_dropout_entries_shapes(x, row_gid, weights, out_weights);
    if (!weights.empty()) {
#pragma omp parallel for schedule(dynamic, 256) if (worth_threads(x.num_edges()))
      for (vid_t i = 0; i < x.num_dst; ++i) rowmath::dropout_row_entries(x, i, row_gid.data, stream, p, weights.data);
    }
    if (!out_weights.empty()) {
#pragma omp parallel for schedule(dynamic, 64) if (worth_threads(x.num_edges()))
      for (vid_t j = 0; j < x.num_src; ++j) {
        rowmath::dropout_column_entries(x, j, row_gid.data, stream, p, out_weights.data);
      }
    }
  }

  void bias_activation(ConstDeviceRows y, DeviceSpan<const float> bias_values, Activation act, DeviceRows h) override {
    NJ_EXPECTS(bias_values.empty() || bias_values.size == y.cols, "a bias of {} values for rows of {}",
               bias_values.size, y.cols);
    const float* bias = bias_values.data;
    with_activation(act, [&](auto kind) {
#pragma omp parallel for schedule(static) if (worth_threads(y.size()))
      for (std::int64_t r = 0; r < y.rows; ++r) {
        const float* in = y.row(r);
        float* out = h.row(r);
        if (bias != nullptr) {
#pragma omp simd
          for (std::int64_t c = 0; c < y.cols; ++c) out[c] = rowmath::bias_activation_element(kind, in[c], bias[c]);
        } else {
#pragma omp simd
          for (std::int64_t c = 0; c < y.cols; ++c) out[c] = rowmath::bias_activation_element(kind, in[c], 0.0F);
        }
      }
    });
  }

  void activation_backward(Activation act, ConstDeviceRows h, ConstDeviceRows grad_h, DeviceRows grad_y) override {
    with_activation(act, [&](auto kind) {
#pragma omp parallel for schedule(static) if (worth_threads(h.size()))
      for (std::int64_t r = 0; r < h.rows; ++r) {
        const float* out = h.row(r);
        const float* grad_out = grad_h.row(r);
        float* grad_in = grad_y.row(r);
#pragma omp simd
        for (std::int64_t c = 0; c < h.cols; ++c) {
          grad_in[c] = rowmath::activation_backward_element(kind, out[c], grad_out[c]);
        }
      }
    });
  }

  void column_sums(ConstDeviceRows in, DeviceSpan<float> sums_out, bool accumulate) override {
    NJ_EXPECTS(sums_out.size == in.cols, "{} column sums of rows of {}", sums_out.size, in.cols);
    // rowmath::column_sum's order, with the blocks' partials formed in parallel and row by row.
    constexpr std::int64_t kBlock = rowmath::kColumnSumBlockRows;
    float* out = sums_out.data;
    const std::int64_t blocks = (in.rows + kBlock - 1) / kBlock;
    std::vector<float> partial(static_cast<std::size_t>(blocks * in.cols), 0.0F);
#pragma omp parallel for schedule(static) if (worth_threads(in.size()))
    for (std::int64_t blk = 0; blk < blocks; ++blk) {
      float* sums = partial.data() + blk * in.cols;
      const std::int64_t end = std::min(in.rows, (blk + 1) * kBlock);
      for (std::int64_t r = blk * kBlock; r < end; ++r) rowmath::move_row(in.row(r), sums, in.cols, true);
    }
    for (std::int64_t c = 0; c < in.cols; ++c) {
      float total = accumulate ? out[c] : 0.0F;
      for (std::int64_t blk = 0; blk < blocks; ++blk) total += partial[static_cast<std::size_t>(blk * in.cols + c)];
      out[c] = total;
    }
  }

  void copy_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst,
                 DeviceSpan<const vid_t> dst_rows, std::int64_t count) override {
    move_rows(src, src_rows.data, dst, dst_rows.data, count, false);
  }
  void add_rows(ConstDeviceRows src, DeviceSpan<const vid_t> src_rows, DeviceRows dst, DeviceSpan<const vid_t> dst_rows,
                std::int64_t count) override {
    move_rows(src, src_rows.data, dst, dst_rows.data, count, true);
  }
  // Each thread takes a range of destinations holding about as many edges as the others' and, in one read of them,
  // widens and weighs their in-edges and counts them per source; after one prefix over the sources it places them
  // among the out-edges from cursors of its own. A source's out-edges so keep destination order (the host
  // transpose's) whatever the thread count, and every edge is read twice in all, not by every thread. The counts
  // and cursors (one array of sources per thread) are host memory the backend keeps beside the emulated device,
  // as a GPU kernel's would be its own; the cursor workspace the caller passes, which the CUDA backend uses, is
  // left unread.
  void expand_block(const PackedBlockView& b, const ExpandedArrays& out, DeviceSpan<eid_t> cursor) override {
    expect_expand_shapes(b, out, cursor);
    const bool in_edges = out.src_index != nullptr || out.edge_weight != nullptr;
    const bool out_edges = out.src_offsets != nullptr;
    const int threads = worth_threads(b.edges) ? std::max(1, omp_get_max_threads()) : 1;
    const auto sources = static_cast<std::size_t>(b.num_src);
    if (out_edges) expand_cursors_.assign(static_cast<std::size_t>(threads) * sources, 0);
    std::vector<eid_t> range_start(static_cast<std::size_t>(threads) + 1, 0);
#pragma omp parallel num_threads(threads)
    {
      const int team = omp_get_num_threads();
      const int t = omp_get_thread_num();
      const auto destinations_from = [&](int u) {
        if (u == team) return b.num_dst;
        const eid_t edge = b.edges * u / team;
        return static_cast<vid_t>(std::lower_bound(b.dst_offsets, b.dst_offsets + b.num_dst, edge) - b.dst_offsets);
      };
      const vid_t first = destinations_from(t);
      const vid_t last = destinations_from(t + 1);
      eid_t* const cursor_of = out_edges ? expand_cursors_.data() + static_cast<std::size_t>(t) * sources : nullptr;
      for (vid_t i = first; i < last; ++i) {
        if (in_edges) rowmath::expand_in_edges(b, i, out);
        if (!out_edges) continue;
        for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) ++cursor_of[b.source(e)];
      }
      if (out_edges) {
        // This thread's range of sources: their out-edges in all, then, once every range's start is known, each
        // source's offset and every thread's first slot among its out-edges.
        const auto source_from = [&](int u) { return static_cast<vid_t>(std::int64_t{b.num_src} * u / team); };
        const auto count_of = [&](int u, vid_t s) -> eid_t& {
          return expand_cursors_[static_cast<std::size_t>(u) * sources + static_cast<std::size_t>(s)];
        };
#pragma omp barrier
        eid_t range_edges = 0;
        for (vid_t s = source_from(t); s < source_from(t + 1); ++s) {
          for (int u = 0; u < team; ++u) range_edges += count_of(u, s);
        }
        range_start[static_cast<std::size_t>(t) + 1] = range_edges;
#pragma omp barrier
#pragma omp single
        {
          for (int u = 0; u < team; ++u)
            range_start[static_cast<std::size_t>(u) + 1] += range_start[static_cast<std::size_t>(u)];
          out.src_offsets[b.num_src] = b.edges;
        }
        eid_t at = range_start[static_cast<std::size_t>(t)];
        for (vid_t s = source_from(t); s < source_from(t + 1); ++s) {
          out.src_offsets[s] = at;
          for (int u = 0; u < team; ++u) at += std::exchange(count_of(u, s), at);
        }
#pragma omp barrier
        for (vid_t destination = first; destination < last; ++destination) {
          for (eid_t e = b.dst_offsets[destination]; e < b.dst_offsets[destination + 1]; ++e) {
            rowmath::place_out_edge(b, cursor_of[b.source(e)]++, e, destination, out);
          }
        }
      }
    }
  }

  void zero_rows(DeviceRows dst, DeviceSpan<const vid_t> row_list, std::int64_t count) override {
    const vid_t* rows = row_list.data;
#pragma omp parallel for schedule(static) if (worth_threads(count * dst.cols))
    for (std::int64_t i = 0; i < count; ++i) {
      rowmath::zero_row(dst.row(rows != nullptr ? rows[i] : i), dst.cols);
    }
  }

 private:
  // expand_block's per-thread counts of out-edges per source, then each thread's cursors among them.
  std::vector<eid_t> expand_cursors_;

  // dst rows = src rows, or dst rows += src rows: copy_rows and add_rows.
  static void move_rows(ConstDeviceRows src, const vid_t* src_rows, DeviceRows dst, const vid_t* dst_rows,
                        std::int64_t count, bool accumulate) {
    NJ_EXPECTS(src.cols == dst.cols, "row widths {} and {}", src.cols, dst.cols);
#pragma omp parallel for schedule(static) if (worth_threads(count * src.cols))
    for (std::int64_t i = 0; i < count; ++i) {
      rowmath::move_row(src.row(src_rows != nullptr ? src_rows[i] : i), dst.row(dst_rows != nullptr ? dst_rows[i] : i),
                        src.cols, accumulate);
    }
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace nj
