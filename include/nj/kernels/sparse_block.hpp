#pragma once
// A sparse block's arrays, owned on the host; DeviceBlock (device_block.hpp) puts them where kernels read them.
#include <span>
#include <vector>

#include "nj/graph/csr.hpp"
#include "nj/kernels/sparse_block_view.hpp"

namespace nj {

// Owns the arrays behind a SparseBlockView.
struct SparseBlock {
  vid_t num_src = 0;
  std::vector<eid_t> dst_offsets{0};
  std::vector<vid_t> src_index;
  std::vector<float> edge_weight;
  CsrTranspose by_source;
  std::vector<float> out_weight;
  std::vector<gid_t> src_gid;

  vid_t num_dst() const { return static_cast<vid_t>(dst_offsets.size() - 1); }
  // Derives the out-edge arrays once dst_offsets, src_index, edge_weight and num_src are set.
  void index_by_source();
};

// One block over a local graph: the first num_dst vertices are the destinations (with all their in-edges),
// every vertex is a source, and global_id[v] is the global id of vertex v.
SparseBlock local_graph_block(const CsrGraph& graph, std::vector<float> edge_weight, vid_t num_dst,
                              std::span<const gid_t> global_id);

// PyG gcn_norm weights for a graph that already holds its self-loops: w_ji = d_j^-1/2 d_i^-1/2, where
// degree[v] is v's in-degree with its self-loop, counted in the whole graph.
std::vector<float> gcn_edge_weights(const CsrGraph& graph_with_self_loops, std::span<const std::int64_t> degree);

}  // namespace nj
