#include "nj/kernels/sparse_block.hpp"

#include <cmath>
#include <numeric>

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

std::vector<float> gcn_edge_weights(const CsrGraph& graph, std::span<const std::int64_t> degree) {
  const vid_t n = graph.num_vertices();
  NJ_EXPECTS(static_cast<vid_t>(degree.size()) == n, "{} degrees for {} vertices", degree.size(), n);
  std::vector<float> inv_sqrt_degree(static_cast<std::size_t>(n));
  for (vid_t v = 0; v < n; ++v) {
    const auto d = static_cast<double>(degree[static_cast<std::size_t>(v)]);
    inv_sqrt_degree[static_cast<std::size_t>(v)] = d > 0 ? static_cast<float>(1.0 / std::sqrt(d)) : 0.0F;
  }
  std::vector<float> weights(graph.sources.size());
  for (vid_t v = 0; v < n; ++v) {
    for (eid_t e = graph.offsets[static_cast<std::size_t>(v)]; e < graph.offsets[static_cast<std::size_t>(v) + 1];
         ++e) {
      const auto s = static_cast<std::size_t>(graph.sources[static_cast<std::size_t>(e)]);
      weights[static_cast<std::size_t>(e)] = inv_sqrt_degree[s] * inv_sqrt_degree[static_cast<std::size_t>(v)];
    }
  }
  return weights;
}

}  // namespace nj
