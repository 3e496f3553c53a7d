#pragma once
// A sparse block's arrays, owned on the host; DeviceBlock (device_block.hpp) puts them where kernels read them.
#include <span>
#include <vector>

#include "nj/core/matrix.hpp"
#include "nj/core/types.hpp"
#include "nj/graph/csr.hpp"

namespace nj {

// Which endpoints' vertex factors weigh an edge (EdgeWeights).
enum class FactorOf {
  kBothEndpoints,  // w(s -> d) = factor[s] * factor[d]: GCN's symmetric normalisation
  kTarget,         // w(s -> d) = factor[d]: a mean over d's in-edges (factor 1/deg(d))
};

// Owns the arrays behind a SparseBlockView.
struct SparseBlock {
  vid_t num_src = 0;
  std::vector<eid_t> dst_offsets{0};
  std::vector<vid_t> src_index;
  std::vector<float> edge_weight;
  // Where the weights are products of vertex factors (EdgeWeights): each source's factor, from which a packed block
  // derives them on the device (PackedBlock) instead of carrying one per edge.
  std::vector<float> src_factor;
  FactorOf factor_of = FactorOf::kBothEndpoints;
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

// A matrix's non-zero entries by rows (compressed sparse rows), on the host: the features the first layer multiplies
// as a sparse matrix.
struct SparseRows {
  std::int64_t cols = 0;
  std::vector<eid_t> offsets{0};  // rows + 1
  std::vector<vid_t> columns;     // ascending within a row
  std::vector<float> values;

  std::int64_t rows() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
  std::int64_t nonzeros() const { return offsets.back(); }
  std::int64_t max_row_nonzeros() const;
};
SparseRows sparse_rows_of(ConstRows dense);

// Rows `rows` of `matrix` (empty: all of them, in order) as a block: its destinations are the rows, its sources the
// columns, its edges the entries weighted by their values, indexed by source, with no global ids. SpMM over it
// multiplies the rows by a matrix (X·W), and its transpose gives the weight gradient (Xᵀ·G).
SparseBlock sparse_rows_block(const SparseRows& matrix, std::span<const vid_t> rows);

// How the edges of a graph are weighted in the blocks cut from it: not at all (both empty), one weight per edge, or
// from a factor per vertex (FactorOf), at 4 bytes per vertex instead of per edge: a 100M-edge graph's weights would
// take 400 MB.
struct EdgeWeights {
  std::span<const float> per_edge;
  std::span<const float> vertex_factor;
  FactorOf factor_of = FactorOf::kBothEndpoints;

  bool empty() const { return per_edge.empty() && vertex_factor.empty(); }
  // The weights of d's in-edges in `graph`, in their order, into out[0, in_degree(d)).
  void copy_in_edges(const CsrGraph& graph, vid_t d, float* out) const;
};

// Every edge's weight, in the order of graph.sources (empty where `weights` is).
std::vector<float> edge_weights(const CsrGraph& graph, EdgeWeights weights);

// PyG gcn_norm's factors for a graph that holds its self-loops: w_ji = d_j^-1/2 d_i^-1/2 is factor[j] * factor[i],
// where degree[v] is v's in-degree with its self-loop, counted in the whole graph.
std::vector<float> gcn_vertex_factors(std::span<const std::int64_t> degree);

}  // namespace nj
