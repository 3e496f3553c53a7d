#pragma once
// Per-row and per-element math shared by the CPU backend's loops and the CUDA backend's kernels. Each
// function computes one destination row (or one element) from raw pointers, so the CPU tests exercise the
// same arithmetic the device runs.
#include <cmath>

#include "nj/core/hd.hpp"
#include "nj/core/philox.hpp"
#include "nj/kernels/sparse_block_view.hpp"

namespace nj::rowmath {

enum class Activation { kNone, kRelu, kElu };

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

// out[i] = Σ_e w_e in[src_e] for one destination row (w_e = 1 without weights).
// out += w · x over a row; the rows never overlap, which lets the compiler vectorise.
NJ_HD inline void axpy_row(float w, const float* __restrict__ x, float* __restrict__ out, std::int64_t cols) {
  NJ_SIMD
  for (std::int64_t c = 0; c < cols; ++c) out[c] += w * x[c];
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

NJ_HD inline void spmm_row(const SparseBlockView& b, vid_t i, const float* in, std::int64_t cols, float* out) {
  for (std::int64_t c = 0; c < cols; ++c) out[c] = 0.0F;
  // Edges of the rows that follow are usually summed next by the same thread, so look past this row's end.
  const eid_t edges = b.num_edges();
  for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
    if (e + kPrefetchDistance < edges) prefetch_row(in + b.row_of(b.src_index[e + kPrefetchDistance]) * cols, cols);
    const float w = b.edge_weight != nullptr ? b.edge_weight[e] : 1.0F;
    axpy_row(w, in + b.row_of(b.src_index[e]) * cols, out, cols);
  }
}

// grad_in_row (+)= Σ_{out-edges e of j} w_e grad_out[dst_e] for local source j.
NJ_HD inline void spmm_transpose_row(const SparseBlockView& b, vid_t j, const float* grad_out, std::int64_t cols,
                                     float* grad_in_row, bool accumulate) {
  if (!accumulate) {
    for (std::int64_t c = 0; c < cols; ++c) grad_in_row[c] = 0.0F;
  }
  const eid_t edges = b.src_offsets[b.num_src];
  for (eid_t k = b.src_offsets[j]; k < b.src_offsets[j + 1]; ++k) {
    if (k + kPrefetchDistance < edges) {
      prefetch_row(grad_out + static_cast<std::int64_t>(b.out_dst[k + kPrefetchDistance]) * cols, cols);
    }
    const float w = b.out_weight != nullptr ? b.out_weight[k] : 1.0F;
    axpy_row(w, grad_out + static_cast<std::int64_t>(b.out_dst[k]) * cols, grad_in_row, cols);
  }
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

// Attention of edge e (into destination i) for head h, before dropout: softmax over i's in-edges of
// LeakyReLU(s_src[j] + s_dst[i]). max and sum are the row's softmax statistics.
// z holds the block's source rows (row b.row_of(j) for local source j); z_dst_row is destination i's row.
NJ_HD inline const float* gat_source_row(const SparseBlockView& b, const GatShape& s, const float* z, vid_t j) {
  return z + b.row_of(j) * s.row_width();
}

NJ_HD inline float gat_pre_activation(const SparseBlockView& b, const GatShape& s, const float* z,
                                      const float* z_dst_row, vid_t j, int h) {
  return gat_source_row(b, s, z, j)[s.src_score(h)] + z_dst_row[s.dst_score(h)];
}

NJ_HD inline float gat_logit(const SparseBlockView& b, const GatShape& s, const float* z, const float* z_dst_row,
                             vid_t j, int h) {
  return leaky_relu(gat_pre_activation(b, s, z, z_dst_row, j, h), s.negative_slope);
}

// Softmax statistics (max, sum of exp) of destination i's logits for head h.
NJ_HD inline void gat_softmax_stats(const SparseBlockView& b, const GatShape& s, vid_t i, const float* z_src,
                                    const float* z_dst_row, int h, float& max_logit, float& sum_exp) {
  max_logit = -INFINITY;
  for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
    max_logit = fmaxf(max_logit, gat_logit(b, s, z_src, z_dst_row, b.src_index[e], h));
  }
  sum_exp = 0.0F;
  for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
    sum_exp += expf(gat_logit(b, s, z_src, z_dst_row, b.src_index[e], h) - max_logit);
  }
}

// The dropout factor of edge e for head h: 1 without attention dropout.
NJ_HD inline float gat_edge_dropout(const SparseBlockView& b, const GatShape& s, const RandomStream& stream, vid_t i,
                                    eid_t e, int h) {
  if (s.attention_dropout <= 0.0F) return 1.0F;
  return dropout_scale(stream.edge_uniform(b.src_gid[b.src_index[e]], b.src_gid[i], h), s.attention_dropout);
}

// One destination row of GAT aggregation: out[i] = Σ_e dropout(α_e) x'_src (heads concatenated or averaged).
NJ_HD inline void gat_forward_row(const SparseBlockView& b, const GatShape& s, const RandomStream& stream, vid_t i,
                                  const float* z_src, float* out) {
  const float* z_dst_row = gat_source_row(b, s, z_src, i);
  const std::int64_t width = s.output_width();
  for (std::int64_t c = 0; c < width; ++c) out[c] = 0.0F;
  const float head_scale = s.concat ? 1.0F : 1.0F / static_cast<float>(s.heads);
  for (int h = 0; h < s.heads; ++h) {
    float max_logit = 0.0F;
    float sum_exp = 0.0F;
    gat_softmax_stats(b, s, i, z_src, z_dst_row, h, max_logit, sum_exp);
    float* out_h = out + (s.concat ? static_cast<std::int64_t>(h) * s.channels : 0);
    for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
      const vid_t j = b.src_index[e];
      const float alpha = expf(gat_logit(b, s, z_src, z_dst_row, j, h) - max_logit) / sum_exp;
      const float coefficient = alpha * gat_edge_dropout(b, s, stream, i, e, h) * head_scale;
      const float* x = gat_source_row(b, s, z_src, j) + static_cast<std::int64_t>(h) * s.channels;
      for (int c = 0; c < s.channels; ++c) out_h[c] += coefficient * x[c];
    }
  }
}

// Backward of one destination row, first half: for each in-edge e and head h, the coefficient that carries
// grad_out into x'_src (dropped-out, head-scaled attention) and the gradient of the pre-LeakyReLU score
// (which flows to s_src[j] and s_dst[i]). Softmax backward: ∂e = α (g − Σ_k α_k g_k).
// edge_coefficient and edge_score_grad are [num_edges, heads]; dst_score_grad receives Σ_e ∂score for i.
NJ_HD inline void gat_backward_row(const SparseBlockView& b, const GatShape& s, const RandomStream& stream, vid_t i,
                                   const float* z_src, const float* grad_out_row, float* edge_coefficient,
                                   float* edge_score_grad, float* dst_score_grad) {
  const float* z_dst_row = gat_source_row(b, s, z_src, i);
  const float head_scale = s.concat ? 1.0F : 1.0F / static_cast<float>(s.heads);
  for (int h = 0; h < s.heads; ++h) {
    float max_logit = 0.0F;
    float sum_exp = 0.0F;
    gat_softmax_stats(b, s, i, z_src, z_dst_row, h, max_logit, sum_exp);
    const float* g_h = grad_out_row + (s.concat ? static_cast<std::int64_t>(h) * s.channels : 0);
    // grad of α_e (before dropout): dropout · head_scale · <g_h, x'_j,h>; accumulate Σ α g for the softmax.
    float weighted_sum = 0.0F;
    for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
      const vid_t j = b.src_index[e];
      const float alpha = expf(gat_logit(b, s, z_src, z_dst_row, j, h) - max_logit) / sum_exp;
      const float keep = gat_edge_dropout(b, s, stream, i, e, h) * head_scale;
      const float* x = gat_source_row(b, s, z_src, j) + static_cast<std::int64_t>(h) * s.channels;
      float dot = 0.0F;
      for (int c = 0; c < s.channels; ++c) dot += g_h[c] * x[c];
      const float grad_alpha = keep * dot;
      edge_coefficient[e * s.heads + h] = alpha * keep;
      edge_score_grad[e * s.heads + h] = grad_alpha;  // holds ∂α until the softmax pass below
      weighted_sum += alpha * grad_alpha;
    }
    float dst_sum = 0.0F;
    for (eid_t e = b.dst_offsets[i]; e < b.dst_offsets[i + 1]; ++e) {
      const vid_t j = b.src_index[e];
      const float pre = gat_pre_activation(b, s, z_src, z_dst_row, j, h);
      const float alpha = expf(leaky_relu(pre, s.negative_slope) - max_logit) / sum_exp;
      const float grad_logit = alpha * (edge_score_grad[e * s.heads + h] - weighted_sum);
      const float grad_pre = grad_logit * (pre > 0.0F ? 1.0F : s.negative_slope);
      edge_score_grad[e * s.heads + h] = grad_pre;
      dst_sum += grad_pre;
    }
    dst_score_grad[h] = dst_sum;
  }
}

// Floats of GAT backward's workspace: per edge and head, the coefficient and the score gradient; per destination
// and head, its score gradient (in that order).
NJ_HD inline std::int64_t gat_backward_workspace_floats(std::int64_t num_dst, std::int64_t num_edges, int heads) {
  return (2 * num_edges + num_dst) * heads;
}

// Backward, second half, for local source j: grad x'_j (+)= Σ coefficient · grad_out[dst], and
// grad s_src[j] (+)= Σ ∂score, gathered over j's out-edges in a fixed order.
NJ_HD inline void gat_backward_source_row(const SparseBlockView& b, const GatShape& s, vid_t j,
                                          const float* edge_coefficient, const float* edge_score_grad,
                                          const float* grad_out, float* grad_z_row, bool accumulate) {
  if (!accumulate) {
    for (std::int64_t c = 0; c < s.row_width(); ++c) grad_z_row[c] = 0.0F;
  }
  const std::int64_t out_width = s.output_width();
  for (eid_t k = b.src_offsets[j]; k < b.src_offsets[j + 1]; ++k) {
    const eid_t e = b.out_edge[k];
    const float* g = grad_out + static_cast<std::int64_t>(b.out_dst[k]) * out_width;
    for (int h = 0; h < s.heads; ++h) {
      const float coefficient = edge_coefficient[e * s.heads + h];
      const float* g_h = g + (s.concat ? static_cast<std::int64_t>(h) * s.channels : 0);
      float* gz = grad_z_row + static_cast<std::int64_t>(h) * s.channels;
      for (int c = 0; c < s.channels; ++c) gz[c] += coefficient * g_h[c];
      grad_z_row[s.src_score(h)] += edge_score_grad[e * s.heads + h];
    }
  }
}

// After the source pass of GAT's backward, which may have reset the row: destination i (local source i) adds
// the score gradients its in-edges gathered.
NJ_HD inline void gat_add_dst_score_grad(const GatShape& s, const float* dst_score_grad, float* grad_z_row) {
  for (int h = 0; h < s.heads; ++h) grad_z_row[s.dst_score(h)] += dst_score_grad[h];
}

// Inverted dropout of one element, its mask addressed by (row global id, column).
NJ_HD inline float dropout_element(const RandomStream& stream, std::int64_t gid, std::int64_t column, float p,
                                   float x) {
  return x == 0.0F ? 0.0F : x * dropout_scale(stream.vertex_uniform(gid, column), p);
}

NJ_HD inline void zero_row(float* row, std::int64_t cols) {
  for (std::int64_t c = 0; c < cols; ++c) row[c] = 0.0F;
}

// to (+)= from, one row.
NJ_HD inline void move_row(const float* __restrict__ from, float* __restrict__ to, std::int64_t cols, bool accumulate) {
  if (accumulate) {
    for (std::int64_t c = 0; c < cols; ++c) to[c] += from[c];
  } else {
    for (std::int64_t c = 0; c < cols; ++c) to[c] = from[c];
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
