#include "nj/kernels/sparse_block.hpp"

#include <cmath>
#include <numeric>

namespace nj {

SparseBlockView SparseBlock::view() const {
  SparseBlockView v;
  v.num_dst = num_dst();
  v.num_src = num_src;
  v.dst_offsets = dst_offsets.data();
  v.src_index = src_index.data();
  v.edge_weight = edge_weight.empty() ? nullptr : edge_weight.data();
  v.src_offsets = by_source.offsets.data();
  v.out_dst = by_source.destinations.data();
  v.out_edge = by_source.edge_position.data();
  v.src_gid = src_gid.data();
  return v;
}

SparseBlock whole_graph_block(const CsrGraph& graph, std::vector<float> edge_weight, gid_t first_gid) {
  SparseBlock block;
  block.num_src = graph.num_vertices();
  block.dst_offsets = graph.offsets;
  block.src_index = graph.sources;
  block.edge_weight = std::move(edge_weight);
  block.by_source = transpose(graph.offsets, graph.sources, graph.num_vertices());
  block.src_gid.resize(static_cast<std::size_t>(graph.num_vertices()));
  std::iota(block.src_gid.begin(), block.src_gid.end(), first_gid);
  return block;
}

std::vector<float> gcn_edge_weights(const CsrGraph& graph) {
  const vid_t n = graph.num_vertices();
  std::vector<float> inv_sqrt_degree(static_cast<std::size_t>(n));
  for (vid_t v = 0; v < n; ++v) {
    const auto degree = static_cast<double>(graph.in_degree(v));
    inv_sqrt_degree[static_cast<std::size_t>(v)] = degree > 0 ? static_cast<float>(1.0 / std::sqrt(degree)) : 0.0F;
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
