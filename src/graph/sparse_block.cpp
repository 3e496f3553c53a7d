#include "nj/graph/sparse_block.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "nj/core/error.hpp"

namespace nj {

void SparseBlock::index_by_source() {
  by_source = transpose(dst_offsets, src_index, num_src);
  out_weight.clear();
  if (edge_weight.empty()) return;
  // Backward passes walk out-edges; their weights in that order keep the walk sequential in memory.
  out_weight.reserve(edge_weight.size());
  for (const eid_t e : by_source.edge_position) out_weight.push_back(edge_weight[static_cast<std::size_t>(e)]);
}

SparseBlock local_graph_block(const CsrGraph& graph, std::vector<float> edge_weight, vid_t num_dst,
                              std::span<const gid_t> global_id) {
  NJ_EXPECTS(static_cast<vid_t>(global_id.size()) == graph.num_vertices(), "{} global ids for {} vertices",
             global_id.size(), graph.num_vertices());
  SparseBlock block;
  block.num_src = graph.num_vertices();
  block.dst_offsets.assign(graph.offsets.begin(), graph.offsets.begin() + num_dst + 1);
  block.src_index.assign(graph.sources.begin(), graph.sources.begin() + block.dst_offsets.back());
  NJ_EXPECTS(edge_weight.empty() || edge_weight.size() == block.src_index.size(), "{} weights for {} edges",
             edge_weight.size(), block.src_index.size());
  block.edge_weight = std::move(edge_weight);
  block.index_by_source();
  block.src_gid.assign(global_id.begin(), global_id.end());
  return block;
}

std::int64_t SparseRows::max_row_nonzeros() const {
  eid_t most = 0;
  for (std::size_t r = 1; r < offsets.size(); ++r) most = std::max(most, offsets[r] - offsets[r - 1]);
  return most;
}

SparseRows sparse_rows_of(ConstRows dense) {
  NJ_EXPECTS(dense.cols <= std::numeric_limits<vid_t>::max(), "{} columns for 32-bit column ids", dense.cols);
  SparseRows m;
  m.cols = dense.cols;
  m.offsets.reserve(static_cast<std::size_t>(dense.rows) + 1);
  for (std::int64_t r = 0; r < dense.rows; ++r) {
    const float* row = dense.row(r);
    for (std::int64_t c = 0; c < dense.cols; ++c) {
      if (row[c] == 0.0F) continue;
      m.columns.push_back(static_cast<vid_t>(c));
      m.values.push_back(row[c]);
    }
    m.offsets.push_back(static_cast<eid_t>(m.columns.size()));
  }
  return m;
}

SparseBlock sparse_rows_block(const SparseRows& matrix, std::span<const vid_t> rows) {
  const std::int64_t count = rows.empty() ? matrix.rows() : static_cast<std::int64_t>(rows.size());
  NJ_EXPECTS(matrix.cols <= std::numeric_limits<vid_t>::max() && count <= std::numeric_limits<vid_t>::max(),
             "a sparse block of {} rows and {} columns", count, matrix.cols);
  SparseBlock block;
  block.num_src = static_cast<vid_t>(matrix.cols);
  block.dst_offsets.reserve(static_cast<std::size_t>(count) + 1);
  for (std::int64_t i = 0; i < count; ++i) {
    const auto r = static_cast<std::size_t>(rows.empty() ? i : rows[static_cast<std::size_t>(i)]);
    NJ_EXPECTS(r + 1 < matrix.offsets.size(), "row {} of a sparse matrix of {}", r, matrix.rows());
    const auto first = static_cast<std::ptrdiff_t>(matrix.offsets[r]);
    const auto last = static_cast<std::ptrdiff_t>(matrix.offsets[r + 1]);
    block.src_index.insert(block.src_index.end(), matrix.columns.begin() + first, matrix.columns.begin() + last);
    block.edge_weight.insert(block.edge_weight.end(), matrix.values.begin() + first, matrix.values.begin() + last);
    block.dst_offsets.push_back(static_cast<eid_t>(block.src_index.size()));
  }
  block.index_by_source();
  return block;
}

void EdgeWeights::copy_in_edges(const CsrGraph& graph, vid_t d, float* out) const {
  const auto first = static_cast<std::size_t>(graph.offsets[static_cast<std::size_t>(d)]);
  const auto last = static_cast<std::size_t>(graph.offsets[static_cast<std::size_t>(d) + 1]);
  if (!per_edge.empty()) {
    std::copy(per_edge.begin() + static_cast<std::ptrdiff_t>(first),
              per_edge.begin() + static_cast<std::ptrdiff_t>(last), out);
  } else if (!vertex_factor.empty()) {
    const float own = vertex_factor[static_cast<std::size_t>(d)];
    if (factor_of == FactorOf::kTarget) {
      std::fill(out, out + (last - first), own);
      return;
    }
    for (std::size_t e = first; e < last; ++e) {
      *out++ = vertex_factor[static_cast<std::size_t>(graph.sources[e])] * own;
    }
  }
}

std::vector<float> edge_weights(const CsrGraph& graph, EdgeWeights weights) {
  if (weights.empty()) return {};
  NJ_EXPECTS(weights.per_edge.empty() ? weights.vertex_factor.size() == static_cast<std::size_t>(graph.num_vertices())
                                      : weights.per_edge.size() == graph.sources.size(),
             "edge weights ({} per edge, {} per vertex) for a graph of {} vertices and {} edges",
             weights.per_edge.size(), weights.vertex_factor.size(), graph.num_vertices(), graph.num_edges());
  std::vector<float> all(graph.sources.size());
  for (vid_t v = 0; v < graph.num_vertices(); ++v) {
    weights.copy_in_edges(graph, v, all.data() + graph.offsets[static_cast<std::size_t>(v)]);
  }
  return all;
}

std::vector<float> gcn_vertex_factors(std::span<const std::int64_t> degree) {
  std::vector<float> inv_sqrt_degree(degree.size());
  for (std::size_t v = 0; v < degree.size(); ++v) {
    const auto d = static_cast<double>(degree[v]);
    inv_sqrt_degree[v] = d > 0 ? static_cast<float>(1.0 / std::sqrt(d)) : 0.0F;
  }
  return inv_sqrt_degree;
}

}  // namespace nj
