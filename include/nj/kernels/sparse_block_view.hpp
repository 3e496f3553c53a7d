#pragma once
// A sparse block: a set of destination rows with all of their in-edges, the unit a layer's aggregation runs
// on. The whole graph is one block; the subgraph executor cuts a layer into many.
//
// Sources are numbered locally 0..num_src-1, and the first num_dst of them are the destinations themselves
// (GAT reads a destination's own row for its score). Local source j lives in row src_row[j] of the input
// buffer (row j where src_row is null), so a block can read rows that sit anywhere: a whole host matrix,
// device cache slots, mirrors received from another rank.
//
// Kernels read only this view. It is C++17 and includes nothing of the host-side library, so that CUDA
// translation units compile it (src/kernels/cuda/kernels.cu does).
#include <cstdint>

#include "nj/core/hd.hpp"
#include "nj/core/types.hpp"

namespace nj {

struct SparseBlockView {
  vid_t num_dst = 0;
  vid_t num_src = 0;
  // dst_offsets[num_dst], kept on the host side too: a GPU's host code cannot read the device arrays.
  eid_t edges = 0;
  const eid_t* dst_offsets = nullptr;  // num_dst + 1, starting at 0
  const vid_t* src_index = nullptr;    // per in-edge: local source id
  const float* edge_weight = nullptr;  // per in-edge (GCN normalisation); nullptr where unused
  // The same edges grouped by source, so that backward passes gather instead of scattering.
  const eid_t* src_offsets = nullptr;  // num_src + 1
  const vid_t* out_dst = nullptr;      // per out-edge: destination row
  const eid_t* out_edge = nullptr;     // per out-edge: position of the edge in the in-edge arrays
  const float* out_weight = nullptr;   // per out-edge: its weight (edge_weight in out-edge order), or nullptr
  // Global id of each local source (destinations first): the address of anything random.
  const gid_t* src_gid = nullptr;
  // Row of the input buffer holding each local source; nullptr means row j holds source j.
  const vid_t* src_row = nullptr;

  NJ_HD eid_t num_edges() const { return edges; }
  NJ_HD std::int64_t row_of(vid_t local_source) const {
    return src_row != nullptr ? src_row[local_source] : local_source;
  }
};

}  // namespace nj
