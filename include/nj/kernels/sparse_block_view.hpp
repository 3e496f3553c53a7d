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

// Sources of a block numbered below this fit a 16-bit index (a packed block's narrow sources).
constexpr std::int64_t kNarrowSourceLimit = std::int64_t{1} << 16;

// How a packed block holds its edges' weights.
enum class PackedWeights : std::uint8_t {
  kNone,
  kPerEdge,       // one weight per in-edge
  kBothFactors,   // w(j -> i) = factor[j] * factor[i], one factor per source: GCN's normalisation
  kTargetFactor,  // w(j -> i) = factor[i]: a mean over i's in-edges
};

// The weight of in-edge e from local source j into destination i, held as `kind` in `weight`: 1 without weights.
NJ_HD inline float packed_weight(PackedWeights kind, const float* weight, eid_t e, vid_t j, vid_t i) {
  switch (kind) {
    case PackedWeights::kPerEdge: return weight[e];
    case PackedWeights::kBothFactors: return weight[j] * weight[i];
    case PackedWeights::kTargetFactor: return weight[i];
    case PackedWeights::kNone: break;
  }
  return 1.0F;
}

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
  // Row of the gradient buffer that backward kernels add each local source's gradient into, where it differs from
  // its input row (rows and gradients in pools of their own); nullptr means row_of(j).
  const vid_t* grad_row = nullptr;
  // A packed block read as it lies (PackedBlock::direct_view, for a backend that reads packed blocks): its sources
  // in 16 bits where src_index is null, and its weights as vertex factors where edge_weight is null. Kernels read
  // in-edges through source() and weight() only.
  const std::uint16_t* narrow_src_index = nullptr;
  PackedWeights factors = PackedWeights::kNone;  // kBothFactors or kTargetFactor where src_factor is set
  const float* src_factor = nullptr;

  NJ_HD eid_t num_edges() const { return edges; }
  // Local source of in-edge e.
  NJ_HD vid_t source(eid_t e) const { return narrow_src_index != nullptr ? vid_t{narrow_src_index[e]} : src_index[e]; }
  NJ_HD bool weighted() const { return edge_weight != nullptr || src_factor != nullptr; }
  // Weight of in-edge e from local source j into destination i (1 without weights).
  NJ_HD float weight(eid_t e, vid_t j, vid_t i) const {
    return edge_weight != nullptr ? edge_weight[e] : packed_weight(factors, src_factor, e, j, i);
  }
  // Whether the out-edge arrays are there: a backend that reads packed blocks gathers a transpose over in-edges
  // without them.
  NJ_HD bool has_out_edges() const { return src_offsets != nullptr; }
  NJ_HD std::int64_t row_of(vid_t local_source) const {
    return src_row != nullptr ? src_row[local_source] : local_source;
  }
  NJ_HD std::int64_t gradient_row_of(vid_t local_source) const {
    return grad_row != nullptr ? grad_row[local_source] : row_of(local_source);
  }
};

// A block as a budgeted step moves it and the device keeps it: the in-edges alone, each source in 16 bits where
// the block has at most kNarrowSourceLimit of them, and the weights as one factor per source where they are
// products of vertex factors. A step expands it into the arrays a SparseBlockView points at
// (Backend::expand_block) where its backend does not read it as it lies (SparseBlockView's packed fields): about
// 2 bytes an edge travel instead of 24.
struct PackedBlockView {
  vid_t num_dst = 0;
  vid_t num_src = 0;
  eid_t edges = 0;
  const eid_t* dst_offsets = nullptr;             // num_dst + 1
  const std::uint16_t* narrow_sources = nullptr;  // per in-edge, where num_src <= kNarrowSourceLimit
  const vid_t* sources = nullptr;                 // per in-edge, otherwise
  PackedWeights weights = PackedWeights::kNone;
  const float* weight = nullptr;   // per in-edge (kPerEdge) or per source (factors)
  const gid_t* src_gid = nullptr;  // per source, where the block has them

  NJ_HD vid_t source(eid_t e) const { return narrow_sources != nullptr ? vid_t{narrow_sources[e]} : sources[e]; }
  NJ_HD float weight_of(eid_t e, vid_t source, vid_t destination) const {
    return packed_weight(weights, weight, e, source, destination);
  }
};

// What Backend::expand_block writes: the arrays of a packed block's view that it does not hold itself. Null where
// the step does not need them: the sources where the packed ones are 32-bit already, the weights where there are
// none or they travel per edge, the out-edge arrays where only the in-edges are read (forward steps).
struct ExpandedArrays {
  vid_t* src_index = nullptr;
  float* edge_weight = nullptr;
  eid_t* src_offsets = nullptr;  // num_src + 1
  vid_t* out_dst = nullptr;
  eid_t* out_edge = nullptr;
  float* out_weight = nullptr;  // where the block is weighted
};

}  // namespace nj
