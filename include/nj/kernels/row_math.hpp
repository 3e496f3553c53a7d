#pragma once
// Per-row and per-element math shared by the CPU backend's loops and the CUDA backend's kernels. Each
// function computes one destination row (or one element) from raw pointers, so the CPU tests exercise the
// same arithmetic the device runs. A row function computes the columns its Columns argument names: all of them
// on the CPU (one thread a row), every 32nd on the GPU (a warp a row, each lane its own columns).
#include <cmath>
#include <cstring>

#include "nj/core/hd.hpp"
#include "nj/core/philox.hpp"
#include "nj/kernels/sparse_block_view.hpp"

namespace nj::rowmath {

enum class Activation { kNone, kRelu, kElu };

// The columns of a row one thread computes. Every column is computed in the same order of terms either way, so
// a row split across a warp's lanes equals the row computed whole. Columns are those of the row: a slice that
// starts at row column `offset` is split as the row is, so that the lanes never share an element.
struct AllColumns {
  static constexpr std::int64_t kStep = 1;
  NJ_HD static constexpr std::int64_t first(std::int64_t /*offset*/ = 0) { return 0; }
};
struct LaneColumns {
  static constexpr std::int64_t kStep = 32;
  std::int64_t lane = 0;
  // The first column of the slice at `offset` whose row column is this lane's: row columns lane, lane + 32, ...
  NJ_HD std::int64_t first(std::int64_t offset = 0) const { return ((lane - offset) % kStep + kStep) % kStep; }
};

NJ_HD inline float activate(Activation act, float y) {
  switch (act) {
    case Activation::kRelu: return y > 0.0F ? y : 0.0F;
    case Activation::kElu: return y > 0.0F ? y : std::expm1(y);
    case Activation::kNone: break;
  }
  return y;
}

// Derivative expressed through the activation's output h, so the pre-activation need not be kept.
NJ_HD inline float activation_gradient(Activation act, float h) {
  switch (act) {
    case Activation::kRelu: return h > 0.0F ? 1.0F : 0.0F;
    case Activation::kElu: return h > 0.0F ? 1.0F : h + 1.0F;
    case Activation::kNone: break;
  }
  return 1.0F;
}

// h = act(y + bias) for one element, and its backward: grad_y = act'(h) · grad_h.
NJ_HD inline float bias_activation_element(Activation act, float y, float bias) { return activate(act, y + bias); }
NJ_HD inline float activation_backward_element(Activation act, float h, float grad_h) {
  return grad_h * activation_gradient(act, h);
}

// Inverted dropout: the kept elements are scaled by 1/(1-p), so no rescaling is needed at inference.
NJ_HD inline float dropout_scale(float uniform, float p) { return uniform < p ? 0.0F : 1.0F / (1.0F - p); }

NJ_HD inline float leaky_relu(float x, float slope) { return x > 0.0F ? x : slope * x; }

// e^x within 1.03 ulp of the exact value over the whole float range (checked against double for every float;
// below -87.34, where e^x is denormal, it is 0), with no call and no branch, so that the loops over a GAT
// layer's heads vectorise; the CPU and CUDA kernels share it. Cephes' expf: x = n ln 2 + r with |r| <= ln 2 / 2,
// e^r by its polynomial, scaled by 2^n in two steps so that both factors stay normal.
NJ_HD inline float exp_vectorisable(float x) {
  constexpr float kLow = -87.33654F;
  constexpr float kHigh = 88.72283F;
  const float clamped = x > kLow ? (x < kHigh ? x : kHigh) : kLow;  // also NaN, whose conversion would be undefined
  // n = round(x / ln 2): adding 1.5 · 2^23 leaves no fraction bits (|x / ln 2| < 2^22), which rounds to nearest.
  constexpr float kRound = 12582912.0F;
  const float n = (clamped * 1.44269504088896341F + kRound) - kRound;
  const float r = (clamped - n * 0.693359375F) - n * -2.12194440e-4F;
  float p = 1.9875691500e-4F;
  p = p * r + 1.3981999507e-3F;
  p = p * r + 8.3334519073e-3F;
  p = p * r + 4.1665795894e-2F;
  p = p * r + 1.6666665459e-1F;
  p = p * r + 5.0000001201e-1F;
  p = p * r * r + r + 1.0F;
  const auto whole = static_cast<std::int32_t>(n);
  const std::int32_t half = whole / 2;
  const std::int32_t bits_low = (half + 127) * (std::int32_t{1} << 23);
  const std::int32_t bits_high = (whole - half + 127) * (std::int32_t{1} << 23);
  float scale_low = 0.0F;
  float scale_high = 0.0F;
  std::memcpy(&scale_low, &bits_low, sizeof scale_low);
  std::memcpy(&scale_high, &bits_high, sizeof scale_high);
  const float y = p * scale_low * scale_high;
  return x != x ? x : (x < kLow ? 0.0F : (x > kHigh ? INFINITY : y));
}

// <a, b> over n floats, in eight interleaved partial sums (so that it vectorises) added pairwise at the end.
NJ_HD inline float dot_row(const float* __restrict__ a, const float* __restrict__ b, std::int64_t n) {
  float part[8] = {0.0F, 0.0F, 0.0F, 0.0F, 0.0F, 0.0F, 0.0F, 0.0F};
  std::int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    NJ_SIMD
    for (int k = 0; k < 8; ++k) part[k] += a[c + k] * b[c + k];
  }
  for (int k = 0; c + k < n; ++k) part[k] += a[c + k] * b[c + k];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

// out += w · x over a slice of `cols` columns starting at row column `offset`; the rows never overlap, which lets
// the compiler vectorise.
template <typename Columns = AllColumns>
NJ_HD inline void axpy_row(float w, const float* __restrict__ x, float* __restrict__ out, std::int64_t cols,
                           Columns columns = {}, std::int64_t offset = 0) {
  NJ_SIMD
  for (std::int64_t c = columns.first(offset); c < cols; c += Columns::kStep) out[c] += w * x[c];
}

// out = 0 over a slice, as axpy_row splits it.
template <typename Columns = AllColumns>
NJ_HD inline void zero_columns(float* out, std::int64_t cols, Columns columns = {}, std::int64_t offset = 0) {
  for (std::int64_t c = columns.first(offset); c < cols; c += Columns::kStep) out[c] = 0.0F;
}

// Rows are gathered in an order the hardware prefetcher cannot guess; on the CPU, ask for the row a few edges
// ahead while this one is summed.
NJ_HD inline void prefetch_row(const float* row, std::int64_t cols) {
#if !defined(__CUDA_ARCH__)
  for (std::int64_t c = 0; c < cols; c += 16) __builtin_prefetch(row + c);
#else
  (void)row;
  (void)cols;
#endif
}
inline constexpr eid_t kPrefetchDistance = 8;

// Destination i's in-edges of a packed block, expanded (Backend::expand_block): widened sources, weights.
NJ_HD inline void expand_in_edges(const PackedBlockView& b, vid_t i, const ExpandedArrays& out) {
  for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
    const vid_t s = b.source(e);
    if (out.src_index != nullptr) out.src_index[e] = s;
    if (out.edge_weight != nullptr) out.edge_weight[e] = b.weight_of(e, s, i);
  }
}

// Out-edge k of a packed block's expansion is in-edge e of destination i: its entries of the out-edge arrays.
NJ_HD inline void place_out_edge(const PackedBlockView& b, eid_t k, eid_t e, vid_t i, const ExpandedArrays& out) {
  out.out_dst[k] = i;
  out.out_edge[k] = e;
  if (out.out_weight != nullptr) out.out_weight[k] = b.weight_of(e, b.source(e), i);
}

// out[i] = Σ_e w_e in[src_e] for one destination row (w_e = 1 without weights).
template <typename Columns = AllColumns>
NJ_HD inline void spmm_row(const SparseBlockView& b, vid_t i, const float* in, std::int64_t cols, float* out,
                           Columns columns = {}) {
  zero_columns(out, cols, columns);
  // Edges of the rows that follow are usually summed next by the same thread, so look past this row's end.
  const eid_t edges = b.num_edges();
  for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
    if (e + kPrefetchDistance < edges) prefetch_row(in + b.row_of(b.source(e + kPrefetchDistance)) * cols, cols);
    const vid_t j = b.source(e);
    axpy_row(b.weight(e, j, i), in + b.row_of(j) * cols, out, cols, columns);
  }
}

// What an edge of weight w passes back to its source's gradient row from its destination's: SpMM's backward, one
// edge. A transpose gathers it over a source's out-edges (spmm_transpose_row) or, without out-edges, visits the
// in-edges by source (the CPU backend); either way a source's edges come in destination order.
template <typename Columns = AllColumns>
NJ_HD inline void spmm_transpose_edge(float w, const float* grad_out_row, float* grad_in_row, std::int64_t cols,
                                      Columns columns = {}) {
  axpy_row(w, grad_out_row, grad_in_row, cols, columns);
}

// grad_in_row (+)= Σ_{out-edges e of j} w_e grad_out[dst_e] for local source j.
template <typename Columns = AllColumns>
NJ_HD inline void spmm_transpose_row(const SparseBlockView& b, vid_t j, const float* grad_out, std::int64_t cols,
                                     float* grad_in_row, bool accumulate, Columns columns = {}) {
  if (!accumulate) zero_columns(grad_in_row, cols, columns);
  const eid_t edges = b.src_offsets[b.num_src];
  for (eid_t k = b.src_offsets[j]; k < b.src_offsets[j + 1]; ++k) {
    if (k + kPrefetchDistance < edges) {
      prefetch_row(grad_out + static_cast<std::int64_t>(b.out_dst[k + kPrefetchDistance]) * cols, cols);
    }
    const float w = b.out_weight != nullptr ? b.out_weight[k] : 1.0F;
    spmm_transpose_edge(w, grad_out + static_cast<std::int64_t>(b.out_dst[k]) * cols, grad_in_row, cols, columns);
  }
}

// A sum over a destination's in-edges plus a term of its own row, each over a range of the rows' columns: the
// aggregation of PyG's SAGEConv (mean and root weight), GINConv ((1+ε)·x_i plus the sum), APPNP's propagation step
// ((1-α)·Â·h plus α·h⁰) and, reading no edge, a dense layer's. For destination i (local source i, whose row the
// block holds too) and rows z of width z_cols:
//   out_i[0, width)                = neighbour_scale · Σ_e w_e · z_{src_e}[neighbour_column, +width)
//                                  + root_scale · z_i[root_column, +width)
//   out_i[width, width + carried)  = z_i[carried_column, +carried)
// (w_e = 1 without weights). The carried columns pass a row on to the next layer unchanged, as APPNP's h⁰.
struct RootedSum {
  std::int64_t width = 0;
  bool reads_neighbours = true;
  std::int64_t neighbour_column = 0;
  float neighbour_scale = 1.0F;
  std::int64_t root_column = 0;
  float root_scale = 0.0F;
  std::int64_t carried = 0;
  std::int64_t carried_column = 0;

  NJ_HD std::int64_t output_width() const { return width + carried; }
  // The columns of z the sum reads: every range lies below this.
  NJ_HD std::int64_t columns_read() const {
    std::int64_t end = root_column + width;
    if (reads_neighbours && neighbour_column + width > end) end = neighbour_column + width;
    if (carried > 0 && carried_column + carried > end) end = carried_column + carried;
    return end;
  }
};

// One destination row of a RootedSum.
template <typename Columns = AllColumns>
NJ_HD inline void rooted_sum_row(const SparseBlockView& b, const RootedSum& s, vid_t i, const float* z,
                                 std::int64_t z_cols, float* out, Columns columns = {}) {
  zero_columns(out, s.width, columns);
  if (s.reads_neighbours) {
    const eid_t edges = b.num_edges();
    for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
      if (e + kPrefetchDistance < edges) {
        prefetch_row(z + b.row_of(b.source(e + kPrefetchDistance)) * z_cols + s.neighbour_column, s.width);
      }
      const vid_t j = b.source(e);
      axpy_row(b.weight(e, j, i) * s.neighbour_scale, z + b.row_of(j) * z_cols + s.neighbour_column, out, s.width,
               columns);
    }
  }
  const float* own = z + b.row_of(i) * z_cols;
  if (s.root_scale != 0.0F) axpy_row(s.root_scale, own + s.root_column, out, s.width, columns);
  if (s.carried > 0) {
    zero_columns(out + s.width, s.carried, columns, s.width);
    axpy_row(1.0F, own + s.carried_column, out + s.width, s.carried, columns, s.width);
  }
}

// Its backward, one in-edge of weight w: what its neighbour term passes back to its source's gradient row from its
// destination's (grad_out rows are output_width() wide). Gathered over a source's out-edges or visited by source
// over the in-edges, as spmm_transpose_edge.
template <typename Columns = AllColumns>
NJ_HD inline void rooted_sum_transpose_edge(const RootedSum& s, float w, const float* grad_out_row, float* grad_z_row,
                                            Columns columns = {}) {
  axpy_row(w * s.neighbour_scale, grad_out_row, grad_z_row + s.neighbour_column, s.width, columns, s.neighbour_column);
}
// And what destination j's own terms pass back to its row, after its edges' (grad_out_row is j's own).
template <typename Columns = AllColumns>
NJ_HD inline void rooted_sum_transpose_own(const RootedSum& s, const float* grad_out_row, float* grad_z_row,
                                           Columns columns = {}) {
  if (s.root_scale != 0.0F) {
    axpy_row(s.root_scale, grad_out_row, grad_z_row + s.root_column, s.width, columns, s.root_column);
  }
  if (s.carried > 0) {
    axpy_row(1.0F, grad_out_row + s.width, grad_z_row + s.carried_column, s.carried, columns, s.carried_column);
  }
}

// The backward for local source j: grad_z_row (+)= what every term that read row j passes back, gathered over j's
// out-edges; columns no term read get 0 unless accumulating.
template <typename Columns = AllColumns>
NJ_HD inline void rooted_sum_transpose_row(const SparseBlockView& b, const RootedSum& s, vid_t j, const float* grad_out,
                                           float* grad_z_row, std::int64_t z_cols, bool accumulate,
                                           Columns columns = {}) {
  if (!accumulate) zero_columns(grad_z_row, z_cols, columns);
  const std::int64_t out_cols = s.output_width();
  if (s.reads_neighbours) {
    for (eid_t k = b.src_offsets[j]; k < b.src_offsets[j + 1]; ++k) {
      rooted_sum_transpose_edge(s, b.out_weight != nullptr ? b.out_weight[k] : 1.0F,
                                grad_out + static_cast<std::int64_t>(b.out_dst[k]) * out_cols, grad_z_row, columns);
    }
  }
  if (j < b.num_dst)
    rooted_sum_transpose_own(s, grad_out + static_cast<std::int64_t>(j) * out_cols, grad_z_row, columns);
}

// Layout of a GAT layer's transformed rows: [x'(heads*channels) | s_src(heads) | s_dst(heads)], where
// s_src = <x'_h, a_src_h> and s_dst = <x'_h, a_dst_h> come out of the same GEMM as x'.
struct GatShape {
  int heads = 1;
  int channels = 1;
  bool concat = true;  // concatenate heads (hidden layers) or average them (output layer)
  float negative_slope = 0.2F;
  float attention_dropout = 0.0F;

  NJ_HD std::int64_t features() const { return static_cast<std::int64_t>(heads) * channels; }
  NJ_HD std::int64_t row_width() const { return features() + 2 * heads; }
  NJ_HD std::int64_t output_width() const { return concat ? features() : channels; }
  NJ_HD std::int64_t src_score(int h) const { return features() + h; }
  NJ_HD std::int64_t dst_score(int h) const { return features() + heads + h; }
};

// The GAT row functions keep a few floats per head on the stack (a destination visits its in-edges once for
// all heads); expect_gat_shapes and the model refuse more heads than this.
inline constexpr int kMaxGatHeads = 64;

// Attention of edge e (into destination i) for head h, before dropout: softmax over i's in-edges of the logit
// LeakyReLU(s_src[j] + s_dst[i]). z holds the block's source rows (row b.row_of(j) for local source j); the
// destination's own row is local source i.
NJ_HD inline const float* gat_source_row(const SparseBlockView& b, const GatShape& s, const float* z, vid_t j) {
  return z + b.row_of(j) * s.row_width();
}

// The dropout factor of edge e for head h: 1 without attention dropout.
NJ_HD inline float gat_edge_dropout(const SparseBlockView& b, const GatShape& s, const RandomStream& stream, vid_t i,
                                    eid_t e, int h) {
  if (s.attention_dropout <= 0.0F) return 1.0F;
  return dropout_scale(stream.edge_uniform(b.src_gid[b.source(e)], b.src_gid[i], h), s.attention_dropout);
}

// The factor a kept edge's attention is scaled by: gat_edge_dropout's value where it keeps the edge.
NJ_HD inline float gat_kept_scale(const GatShape& s) {
  return s.attention_dropout > 0.0F ? dropout_scale(1.0F, s.attention_dropout) : 1.0F;
}

// In-edges whose attention dropout is drawn together: on the CPU the Philox rounds vectorise across them; on the
// GPU, where a thread computes one destination row, one at a time.
#if defined(__CUDA_ARCH__)
inline constexpr int kGatDropoutLanes = 1;
#else
inline constexpr int kGatDropoutLanes = 16;
#endif

// Which heads keep in-edges e .. e + count - 1 of destination i (count <= kGatDropoutLanes): bit h of kept[k] is
// set where gat_edge_dropout(.., e + k, h) keeps the edge. One Philox block serves eight heads of an edge.
NJ_HD inline void gat_edge_keep_masks(const SparseBlockView& b, const GatShape& s, const RandomStream& stream, vid_t i,
                                      eid_t e, int count, std::uint64_t* kept) {
  for (int k = 0; k < kGatDropoutLanes; ++k) kept[k] = 0;
  if (s.attention_dropout <= 0.0F) {
    for (int k = 0; k < kGatDropoutLanes; ++k) kept[k] = ~std::uint64_t{0};
    return;
  }
  gid_t src[kGatDropoutLanes];
  for (int k = 0; k < kGatDropoutLanes; ++k) src[k] = b.src_gid[b.source(e + (k < count ? k : 0))];
  const gid_t dst = b.src_gid[i];
  for (int first = 0; first < s.heads; first += 8) {
    std::uint32_t words[4][kGatDropoutLanes];
    stream.edge_blocks<kGatDropoutLanes>(src, dst, first, words);
    const int last = first + 8 < s.heads ? first + 8 : s.heads;
    for (int h = first; h < last; ++h) {
      const auto half = static_cast<std::uint32_t>(h & 7);
      const std::uint32_t* word = words[half >> 1U];
      NJ_SIMD
      for (int k = 0; k < kGatDropoutLanes; ++k) {
        const bool keep = !(uniform_from_half(word[k], half & 1U) < s.attention_dropout);
        kept[k] |= static_cast<std::uint64_t>(keep) << static_cast<unsigned>(h);
      }
    }
  }
}

// keep[h] = the dropout factor of head h from an edge's mask: kept_scale where its bit is set, else 0.
NJ_HD inline void gat_keep_factors(const GatShape& s, std::uint64_t kept, float kept_scale, float* __restrict__ keep) {
  NJ_SIMD
  for (int h = 0; h < s.heads; ++h) keep[h] = ((kept >> static_cast<unsigned>(h)) & 1U) != 0 ? kept_scale : 0.0F;
}

// Asks for what edge e reads of its source, a few edges ahead: the row (width floats from its start) and, with
// attention dropout, its global id.
NJ_HD inline void gat_prefetch_source(const SparseBlockView& b, const GatShape& s, const float* z, eid_t e,
                                      std::int64_t width) {
#if !defined(__CUDA_ARCH__)
  if (e >= b.num_edges()) return;
  const vid_t j = b.source(e);
  prefetch_row(gat_source_row(b, s, z, j), width);
  if (s.attention_dropout > 0.0F) __builtin_prefetch(b.src_gid + j);
#else
  (void)b;
  (void)s;
  (void)z;
  (void)e;
  (void)width;
#endif
}

// s_dst[i] of every head, from destination i's row.
NJ_HD inline void gat_dst_scores(const SparseBlockView& b, const GatShape& s, const float* z, vid_t i,
                                 float* dst_score) {
  const float* row = gat_source_row(b, s, z, i);
  for (int h = 0; h < s.heads; ++h) dst_score[h] = row[s.dst_score(h)];
}

// First pass over destination i's in-edges, reading only the sources' scores: each head's largest logit. It
// asks for the whole rows the next pass gathers, so that the next pass finds them in cache.
NJ_HD inline void gat_max_logits(const SparseBlockView& b, const GatShape& s, vid_t i, const float* z,
                                 const float* __restrict__ dst_score, float* __restrict__ max_logit) {
  for (int h = 0; h < s.heads; ++h) max_logit[h] = -INFINITY;
  const std::int64_t width = s.row_width();
  for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
    gat_prefetch_source(b, s, z, e + kPrefetchDistance, width);
    const float* __restrict__ row = gat_source_row(b, s, z, b.source(e));
    const float* __restrict__ src_score = row + s.features();
    // The rest of the row too, once its scores are asked for: the look-ahead alone leaves most of it to the next
    // pass, which then waits (measured on an AMD EPYC; the scores' load brings the row's page in).
    prefetch_row(row, s.features());
    NJ_SIMD
    for (int h = 0; h < s.heads; ++h) {
      // As fmaxf (a NaN logit is skipped), but inline and vectorisable.
      const float logit = leaky_relu(src_score[h] + dst_score[h], s.negative_slope);
      max_logit[h] = logit > max_logit[h] ? logit : max_logit[h];
    }
  }
}

// One destination row of GAT aggregation: out[i] = Σ_e dropout(α_e) x'_src (heads concatenated or averaged).
// The in-edges are visited with all heads at once, so each source row is gathered once (after the pass that
// finds each head's largest logit): where every head owns its output columns (concatenated, or one head),
// out_h gathers Σ exp(logit − max) · x' and is divided by the head's Σ exp(logit − max) at the end; averaged
// heads share their columns, so there each head's sum comes from a pass of its own first. Split across lanes,
// every lane computes the per-head attention (the same values) and its own columns of the output.
template <typename Columns = AllColumns>
NJ_HD inline void gat_forward_row(const SparseBlockView& b, const GatShape& s, const RandomStream& stream, vid_t i,
                                  const float* z_src, float* __restrict__ out, Columns columns = {}) {
  const std::int64_t width = s.output_width();
  zero_columns(out, width, columns);
  const eid_t first = b.dst_offsets[i];
  const eid_t end = b.dst_offsets[i + 1];
  if (first == end) return;
  const int heads = s.heads;
  const int channels = s.channels;
  const float head_scale = s.concat ? 1.0F : 1.0F / static_cast<float>(heads);
  const bool divide_after = s.concat || heads == 1;
  float dst_score[kMaxGatHeads];
  float max_logit[kMaxGatHeads];
  float sum_exp[kMaxGatHeads];
  float coefficient[kMaxGatHeads];
  gat_dst_scores(b, s, z_src, i, dst_score);
  gat_max_logits(b, s, i, z_src, dst_score, max_logit);
  for (int h = 0; h < heads; ++h) sum_exp[h] = 0.0F;
  if (!divide_after) {
    for (eid_t e = first; e < end; ++e) {
      const float* __restrict__ src_score = gat_source_row(b, s, z_src, b.source(e)) + s.features();
      NJ_SIMD
      for (int h = 0; h < heads; ++h) {
        sum_exp[h] += exp_vectorisable(leaky_relu(src_score[h] + dst_score[h], s.negative_slope) - max_logit[h]);
      }
    }
  }
  const std::int64_t row_width = s.row_width();
  const float kept_scale = gat_kept_scale(s);
  std::uint64_t kept[kGatDropoutLanes];
  for (eid_t e = first; e < end; ++e) {
    const auto lane = static_cast<int>((e - first) % kGatDropoutLanes);
    if (lane == 0) {
      const eid_t left = end - e;
      gat_edge_keep_masks(b, s, stream, i, e, left < kGatDropoutLanes ? static_cast<int>(left) : kGatDropoutLanes,
                          kept);
    }
    gat_prefetch_source(b, s, z_src, e + kPrefetchDistance, row_width);  // the next destination's, for its first pass
    const float* __restrict__ x = gat_source_row(b, s, z_src, b.source(e));
    const float* __restrict__ src_score = x + s.features();
    gat_keep_factors(s, kept[lane], kept_scale, coefficient);
    if (divide_after) {
      NJ_SIMD
      for (int h = 0; h < heads; ++h) {
        const float p = exp_vectorisable(leaky_relu(src_score[h] + dst_score[h], s.negative_slope) - max_logit[h]);
        sum_exp[h] += p;
        coefficient[h] *= p;
      }
    } else {
      NJ_SIMD
      for (int h = 0; h < heads; ++h) {
        const float p = exp_vectorisable(leaky_relu(src_score[h] + dst_score[h], s.negative_slope) - max_logit[h]);
        coefficient[h] *= p / sum_exp[h] * head_scale;
      }
    }
    for (int h = 0; h < heads; ++h) {
      const std::int64_t offset = s.concat ? static_cast<std::int64_t>(h) * channels : 0;
      axpy_row(coefficient[h], x + static_cast<std::int64_t>(h) * channels, out + offset, channels, columns, offset);
    }
  }
  if (divide_after) {
    for (int h = 0; h < heads; ++h) {
      const float scale = head_scale / sum_exp[h];
      const std::int64_t offset = static_cast<std::int64_t>(h) * channels;
      float* out_h = out + offset;
      NJ_SIMD
      for (std::int64_t c = columns.first(offset); c < channels; c += Columns::kStep) out_h[c] *= scale;
    }
  }
}

// GAT backward's workspace: per in-edge e, 2·heads floats (the coefficient of each head, then the score
// gradient of each head: one cache line per edge for the source pass at 8 heads), then per destination the score
// gradient of each head.
NJ_HD inline std::int64_t gat_backward_workspace_floats(std::int64_t num_dst, std::int64_t num_edges, int heads) {
  return (2 * num_edges + num_dst) * heads;
}
NJ_HD inline std::int64_t gat_dst_score_grad_offset(std::int64_t num_edges, int heads) { return 2 * num_edges * heads; }

// Backward of one destination row, first half: for each in-edge e and head h, the coefficient that carries
// grad_out into x'_src (dropped-out, head-scaled attention) and the gradient of the pre-LeakyReLU score
// (which flows to s_src[j] and s_dst[i]). Softmax backward: ∂logit_e = α_e (∂α_e − Σ_k α_k ∂α_k).
// Three passes over the in-edges, all heads at once: the largest logits (scores only); each source row gathered
// once for p = exp(logit − max) and ∂α = dropout · head_scale · <g_h, x'_j,h>, kept in the edge's workspace
// while Σ p and Σ p ∂α are summed; then, from the workspace alone (no gather, no exp, no random draw), the
// coefficient and the score gradient. In between, a kept edge's slots hold (±p, ∂α) and a dropped edge's
// (±inf, p), the sign being the score's (for LeakyReLU's slope): p = exp(logit − max) lies in [0, 1], so an
// infinity marks the edge dropped. dst_score_grad receives Σ_e ∂score for i.
NJ_HD inline void gat_backward_row(const SparseBlockView& b, const GatShape& s, const RandomStream& stream, vid_t i,
                                   const float* z_src, const float* __restrict__ grad_out_row, float* edge_workspace,
                                   float* __restrict__ dst_score_grad) {
  const int heads = s.heads;
  for (int h = 0; h < heads; ++h) dst_score_grad[h] = 0.0F;
  const eid_t first = b.dst_offsets[i];
  const eid_t end = b.dst_offsets[i + 1];
  if (first == end) return;
  const int channels = s.channels;
  const float head_scale = s.concat ? 1.0F : 1.0F / static_cast<float>(heads);
  float dst_score[kMaxGatHeads];
  float max_logit[kMaxGatHeads];
  float sum_exp[kMaxGatHeads];
  float weighted[kMaxGatHeads];  // Σ p ∂α, then Σ α ∂α
  float keep[kMaxGatHeads];
  float dot[kMaxGatHeads];  // <g_h, x'_j,h> of one edge
  gat_dst_scores(b, s, z_src, i, dst_score);
  gat_max_logits(b, s, i, z_src, dst_score, max_logit);
  for (int h = 0; h < heads; ++h) sum_exp[h] = weighted[h] = 0.0F;
  const std::int64_t row_width = s.row_width();
  const float kept_scale = gat_kept_scale(s);
  std::uint64_t kept[kGatDropoutLanes];
  for (eid_t e = first; e < end; ++e) {
    const auto lane = static_cast<int>((e - first) % kGatDropoutLanes);
    if (lane == 0) {
      const eid_t left = end - e;
      gat_edge_keep_masks(b, s, stream, i, e, left < kGatDropoutLanes ? static_cast<int>(left) : kGatDropoutLanes,
                          kept);
    }
    gat_prefetch_source(b, s, z_src, e + kPrefetchDistance, row_width);
    const float* __restrict__ x = gat_source_row(b, s, z_src, b.source(e));
    const float* __restrict__ src_score = x + s.features();
    float* __restrict__ marked = edge_workspace + e * 2 * heads;  // the coefficients' slots
    float* __restrict__ held = marked + heads;                    // the score gradients' slots
    gat_keep_factors(s, kept[lane], kept_scale, keep);
    for (int h = 0; h < heads; ++h) {
      dot[h] = dot_row(grad_out_row + (s.concat ? static_cast<std::int64_t>(h) * channels : 0),
                       x + static_cast<std::int64_t>(h) * channels, channels);
    }
    NJ_SIMD
    for (int h = 0; h < heads; ++h) {
      const float pre = src_score[h] + dst_score[h];
      const float p = exp_vectorisable(leaky_relu(pre, s.negative_slope) - max_logit[h]);
      const float grad_alpha = keep[h] * head_scale * dot[h];
      const bool dropped = keep[h] == 0.0F;
      sum_exp[h] += p;
      weighted[h] += p * grad_alpha;
      marked[h] = dropped ? (pre > 0.0F ? INFINITY : -INFINITY) : (pre > 0.0F ? p : -p);
      held[h] = dropped ? p : grad_alpha;
    }
  }
  for (int h = 0; h < heads; ++h) weighted[h] /= sum_exp[h];
  const float slope = s.negative_slope;
  for (eid_t e = first; e < end; ++e) {
    float* __restrict__ coefficient = edge_workspace + e * 2 * heads;
    float* __restrict__ score_grad = coefficient + heads;
    NJ_SIMD
    for (int h = 0; h < heads; ++h) {
      const float marked = coefficient[h];
      const float held = score_grad[h];
      const bool dropped = fabsf(marked) == INFINITY;
      const float alpha = (dropped ? held : fabsf(marked)) / sum_exp[h];
      const float grad_alpha = dropped ? 0.0F : held;
      // p == 0 (underflow) leaves α == 0, where the slope does not matter.
      const float grad_pre = alpha * (grad_alpha - weighted[h]) * (marked > 0.0F ? 1.0F : slope);
      coefficient[h] = dropped ? 0.0F : alpha * kept_scale * head_scale;
      score_grad[h] = grad_pre;
      dst_score_grad[h] += grad_pre;
    }
  }
}

// Backward, second half, one in-edge: what it passes back to its source's gradient row, from its workspace slot
// (gat_backward_row's coefficients and score gradients) and its destination's grad_out row g: grad x'_j += the
// coefficient · g per head, grad s_src[j] += the score gradient. Gathered over a source's out-edges or visited by
// source over the in-edges, as spmm_transpose_edge.
template <typename Columns = AllColumns>
NJ_HD inline void gat_backward_edge(const GatShape& s, const float* __restrict__ slot, const float* __restrict__ g,
                                    float* __restrict__ grad_z_row, Columns columns = {}) {
  const int heads = s.heads;
  const int channels = s.channels;
  for (int h = 0; h < heads; ++h) {
    const std::int64_t offset = static_cast<std::int64_t>(h) * channels;
    axpy_row(slot[h], g + (s.concat ? offset : 0), grad_z_row + offset, channels, columns, offset);
  }
  float* __restrict__ src_score_grad = grad_z_row + s.features();
  NJ_SIMD
  for (std::int64_t h = columns.first(s.features()); h < heads; h += Columns::kStep) {
    src_score_grad[h] += slot[heads + h];
  }
}
// And, after its edges, a destination's own score gradient (its gat_backward_row output) into its s_dst gradient.
template <typename Columns = AllColumns>
NJ_HD inline void gat_backward_own(const GatShape& s, const float* dst_score_grad, float* grad_z_row,
                                   Columns columns = {}) {
  for (std::int64_t h = columns.first(s.dst_score(0)); h < s.heads; h += Columns::kStep) {
    grad_z_row[s.dst_score(static_cast<int>(h))] += dst_score_grad[h];
  }
}

// The second half for local source j, gathered over j's out-edges in a fixed order: grad x'_j and grad s_src[j]
// (+)= what each passes back; where j is also a destination, dst_score_grad (nullptr otherwise) goes to its s_dst
// gradient.
template <typename Columns = AllColumns>
NJ_HD inline void gat_backward_source_row(const SparseBlockView& b, const GatShape& s, vid_t j,
                                          const float* edge_workspace, const float* dst_score_grad,
                                          const float* grad_out, float* __restrict__ grad_z_row, bool accumulate,
                                          Columns columns = {}) {
  if (!accumulate) zero_columns(grad_z_row, s.row_width(), columns);
  const int heads = s.heads;
  const std::int64_t out_width = s.output_width();
  const eid_t edges = b.src_offsets[b.num_src];
  for (eid_t k = b.src_offsets[j]; k < b.src_offsets[j + 1]; ++k) {
    if (k + kPrefetchDistance < edges) {
      prefetch_row(grad_out + static_cast<std::int64_t>(b.out_dst[k + kPrefetchDistance]) * out_width, out_width);
      prefetch_row(edge_workspace + b.out_edge[k + kPrefetchDistance] * 2 * heads, 2 * heads);
    }
    gat_backward_edge(s, edge_workspace + b.out_edge[k] * 2 * heads,
                      grad_out + static_cast<std::int64_t>(b.out_dst[k]) * out_width, grad_z_row, columns);
  }
  if (dst_score_grad != nullptr) gat_backward_own(s, dst_score_grad, grad_z_row, columns);
}

// Inverted dropout of one element, its mask addressed by (row global id, column).
NJ_HD inline float dropout_element(const RandomStream& stream, std::int64_t gid, std::int64_t column, float p,
                                   float x) {
  return x == 0.0F ? 0.0F : x * dropout_scale(stream.vertex_uniform(gid, column), p);
}

// Dropout of a sparse matrix's stored entries, the matrix held as a block whose destinations are its rows and whose
// sources are its columns: each entry is scaled as dropout_element scales it in the dense row. The entries of row i
// (in-edge order) into `weights`:
NJ_HD inline void dropout_row_entries(const SparseBlockView& b, vid_t i, const gid_t* row_gid,
                                      const RandomStream& stream, float p, float* weights) {
  for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
    weights[e] = dropout_element(stream, row_gid[i], b.source(e), p, b.edge_weight[e]);
  }
}
// and those of column j (out-edge order) into `out_weights`.
NJ_HD inline void dropout_column_entries(const SparseBlockView& b, vid_t j, const gid_t* row_gid,
                                         const RandomStream& stream, float p, float* out_weights) {
  for (eid_t k = b.src_offsets[j]; k < b.src_offsets[j + 1]; ++k) {
    out_weights[k] = dropout_element(stream, row_gid[b.out_dst[k]], j, p, b.out_weight[k]);
  }
}

template <typename Columns = AllColumns>
NJ_HD inline void zero_row(float* row, std::int64_t cols, Columns columns = {}) {
  zero_columns(row, cols, columns);
}

// to (+)= from, one row.
template <typename Columns = AllColumns>
NJ_HD inline void move_row(const float* __restrict__ from, float* __restrict__ to, std::int64_t cols, bool accumulate,
                           Columns columns = {}) {
  if (accumulate) {
    for (std::int64_t c = columns.first(); c < cols; c += Columns::kStep) to[c] += from[c];
  } else {
    for (std::int64_t c = columns.first(); c < cols; c += Columns::kStep) to[c] = from[c];
  }
}

// Column sums are formed per block of this many rows and the block partials added in block order, so the
// result is the same for every thread count and on every backend.
inline constexpr std::int64_t kColumnSumBlockRows = 1024;
// Column c of rows [first, end), summed row after row.
NJ_HD inline float column_block_sum(const float* in, std::int64_t cols, std::int64_t first, std::int64_t end,
                                    std::int64_t c) {
  float sum = 0.0F;
  for (std::int64_t r = first; r < end; ++r) sum += in[r * cols + c];
  return sum;
}
// Column c of all rows: `initial` plus the block sums in order.
NJ_HD inline float column_sum(const float* in, std::int64_t rows, std::int64_t cols, std::int64_t c, float initial) {
  float total = initial;
  for (std::int64_t first = 0; first < rows; first += kColumnSumBlockRows) {
    total +=
        column_block_sum(in, cols, first, first + kColumnSumBlockRows < rows ? first + kColumnSumBlockRows : rows, c);
  }
  return total;
}

// Softmax cross-entropy of one row against its label: returns the loss and writes scale·(softmax − onehot).
NJ_HD inline float softmax_cross_entropy_row(const float* logits, std::int64_t classes, int label, float scale,
                                             float* grad) {
  float max_logit = logits[0];
  for (std::int64_t c = 1; c < classes; ++c) max_logit = fmaxf(max_logit, logits[c]);
  float sum_exp = 0.0F;
  for (std::int64_t c = 0; c < classes; ++c) sum_exp += expf(logits[c] - max_logit);
  const float log_sum = logf(sum_exp) + max_logit;
  for (std::int64_t c = 0; c < classes; ++c) {
    grad[c] = scale * (expf(logits[c] - log_sum) - (c == label ? 1.0F : 0.0F));
  }
  return log_sum - logits[label];
}

}  // namespace nj::rowmath
