#include "nj/kernels/device_block.hpp"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace nj {
namespace {

// The arrays in the order they are packed: 8-byte elements first, so that every array is aligned without
// padding.
struct Layout {
  std::int64_t dst_offsets, src_offsets, out_edge, src_gid, src_index, out_dst, edge_weight, out_weight, end;
  Layout(std::int64_t num_dst, std::int64_t num_src, std::int64_t edges, bool weighted, bool source_ids) {
    dst_offsets = 0;
    src_offsets = dst_offsets + (num_dst + 1) * std::int64_t{sizeof(eid_t)};
    out_edge = src_offsets + (num_src + 1) * std::int64_t{sizeof(eid_t)};
    src_gid = out_edge + edges * std::int64_t{sizeof(eid_t)};
    src_index = src_gid + (source_ids ? num_src : 0) * std::int64_t{sizeof(gid_t)};
    out_dst = src_index + edges * std::int64_t{sizeof(vid_t)};
    edge_weight = out_dst + edges * std::int64_t{sizeof(vid_t)};
    out_weight = edge_weight + (weighted ? edges : 0) * std::int64_t{sizeof(float)};
    end = out_weight + (weighted ? edges : 0) * std::int64_t{sizeof(float)};
  }
};

// A piece of a packed image: its bytes [first, first + count), to be written at `base` (Transfers::upload_with copies
// an image in pieces).
struct Piece {
  std::byte* base;
  std::int64_t first;
  std::int64_t count;

  // The bytes [begin, end) of the image that this piece holds of an array of `bytes` bytes at `offset`, relative to
  // the array's start; empty where they do not meet.
  std::pair<std::int64_t, std::int64_t> overlap(std::int64_t offset, std::int64_t bytes) const {
    return {std::max(first, offset) - offset, std::min(first + count, offset + bytes) - offset};
  }
  std::byte* at(std::int64_t offset) const { return base + (offset - first); }
};

// Writes what `piece` holds of `values`, packed at `offset`.
template <typename T>
void pack(const Piece& piece, std::int64_t offset, const std::vector<T>& values) {
  const auto [begin, end] = piece.overlap(offset, static_cast<std::int64_t>(values.size() * sizeof(T)));
  if (begin < end) {
    std::memcpy(piece.at(offset + begin), reinterpret_cast<const std::byte*>(values.data()) + begin,
                static_cast<std::size_t>(end - begin));
  }
}

// Writes what `piece` holds of `sources` in 16 bits, packed at `offset`. Pieces start at even bytes
// (Transfers::kPieceBytes is even), so each holds whole 16-bit sources.
void pack_narrow(const Piece& piece, std::int64_t offset, const std::vector<vid_t>& sources) {
  constexpr auto kNarrow = std::int64_t{sizeof(std::uint16_t)};
  const auto [begin, end] = piece.overlap(offset, static_cast<std::int64_t>(sources.size()) * kNarrow);
  if (begin >= end) return;
  auto* narrow = reinterpret_cast<std::uint16_t*>(piece.at(offset + begin));
  for (std::int64_t e = begin / kNarrow; e < end / kNarrow; ++e) {
    *narrow++ = static_cast<std::uint16_t>(sources[static_cast<std::size_t>(e)]);
  }
}

template <typename T>
const T* at_offset(std::byte* base, std::int64_t offset) {
  return reinterpret_cast<const T*>(base + offset);
}

}  // namespace

std::int64_t DeviceBlock::bytes_for(std::int64_t num_dst, std::int64_t num_src, std::int64_t num_edges, bool weighted,
                                    bool source_ids) {
  return Layout(num_dst, num_src, num_edges, weighted, source_ids).end;
}

DeviceBlock::DeviceBlock(Transfers& transfers, const SparseBlock& block, std::string_view what, Traffic kind) {
  const auto edges = static_cast<std::int64_t>(block.src_index.size());
  const bool weighted = !block.edge_weight.empty();
  const bool source_ids = !block.src_gid.empty();
  const Layout at(block.num_dst(), block.num_src, edges, weighted, source_ids);
  NJ_EXPECTS((!source_ids || static_cast<std::int64_t>(block.src_gid.size()) == block.num_src) &&
                 static_cast<std::int64_t>(block.by_source.offsets.size()) == std::int64_t{block.num_src} + 1,
             "block for {} is not indexed by source", what);
  arrays_ = DeviceArray<std::byte>(transfers.device(), at.end, what);
  transfers.upload_with(arrays_.view(), kind, [&](std::byte* staging, std::int64_t first, std::int64_t count) {
    const Piece piece{staging, first, count};
    pack(piece, at.dst_offsets, block.dst_offsets);
    pack(piece, at.src_offsets, block.by_source.offsets);
    pack(piece, at.out_edge, block.by_source.edge_position);
    pack(piece, at.src_gid, block.src_gid);
    pack(piece, at.src_index, block.src_index);
    pack(piece, at.out_dst, block.by_source.destinations);
    pack(piece, at.edge_weight, block.edge_weight);
    pack(piece, at.out_weight, block.out_weight);
  });

  std::byte* base = arrays_.view().data;
  view_.num_dst = block.num_dst();
  view_.num_src = block.num_src;
  view_.edges = edges;
  view_.dst_offsets = at_offset<eid_t>(base, at.dst_offsets);
  view_.src_offsets = at_offset<eid_t>(base, at.src_offsets);
  view_.out_edge = at_offset<eid_t>(base, at.out_edge);
  view_.src_gid = source_ids ? at_offset<gid_t>(base, at.src_gid) : nullptr;
  view_.src_index = at_offset<vid_t>(base, at.src_index);
  view_.out_dst = at_offset<vid_t>(base, at.out_dst);
  view_.edge_weight = weighted ? at_offset<float>(base, at.edge_weight) : nullptr;
  view_.out_weight = weighted ? at_offset<float>(base, at.out_weight) : nullptr;
}

SparseBlockView DeviceBlock::view(DeviceSpan<const vid_t> src_row) const {
  SparseBlockView v = view_;
  v.src_row = src_row.data;
  return v;
}

namespace {

// A packed block's arrays, 8-byte elements first.
struct PackedLayout {
  std::int64_t dst_offsets, src_gid, weight, sources, narrow_sources, end;
  explicit PackedLayout(const BlockShape& s) {
    const bool per_edge = s.weights == PackedWeights::kPerEdge;
    const std::int64_t weights = s.weights == PackedWeights::kNone ? 0 : (per_edge ? s.edges : s.sources);
    dst_offsets = 0;
    src_gid = dst_offsets + (s.destinations + 1) * std::int64_t{sizeof(eid_t)};
    weight = src_gid + (s.source_ids ? s.sources : 0) * std::int64_t{sizeof(gid_t)};
    sources = weight + weights * std::int64_t{sizeof(float)};
    narrow_sources = sources + (s.narrow() ? 0 : s.edges) * std::int64_t{sizeof(vid_t)};
    end = narrow_sources + (s.narrow() ? s.edges : 0) * std::int64_t{sizeof(std::uint16_t)};
  }
};

// What a step expands: the in-edges' widened sources and weights, and the out-edge arrays and their cursor.
struct ExpandedLayout {
  std::int64_t src_offsets, out_edge, cursor, src_index, edge_weight, out_dst, out_weight, end;
  ExpandedLayout(const BlockShape& s, bool out_edges) {
    const bool weighted = s.weights != PackedWeights::kNone;
    const bool factors = weighted && s.weights != PackedWeights::kPerEdge;
    const std::int64_t by_source = out_edges ? s.edges : 0;
    src_offsets = 0;
    out_edge = src_offsets + (out_edges ? s.sources + 1 : 0) * std::int64_t{sizeof(eid_t)};
    cursor = out_edge + by_source * std::int64_t{sizeof(eid_t)};
    src_index = cursor + (out_edges ? s.sources : 0) * std::int64_t{sizeof(eid_t)};
    edge_weight = src_index + (s.narrow() ? s.edges : 0) * std::int64_t{sizeof(vid_t)};
    out_dst = edge_weight + (factors ? s.edges : 0) * std::int64_t{sizeof(float)};
    out_weight = out_dst + by_source * std::int64_t{sizeof(vid_t)};
    end = out_weight + (weighted ? by_source : 0) * std::int64_t{sizeof(float)};
  }
};

template <typename T>
T* writable_at(std::byte* base, std::int64_t offset, bool present) {
  return present ? reinterpret_cast<T*>(base + offset) : nullptr;
}

PackedWeights packed_weights(const SparseBlock& block) {
  if (!block.src_factor.empty()) {
    return block.factor_of == FactorOf::kTarget ? PackedWeights::kTargetFactor : PackedWeights::kBothFactors;
  }
  return block.edge_weight.empty() ? PackedWeights::kNone : PackedWeights::kPerEdge;
}

}  // namespace

BlockShape PackedBlock::shape_of(const SparseBlock& block, std::int64_t narrow_limit, bool with_source_ids) {
  NJ_EXPECTS(narrow_limit <= kNarrowSourceLimit, "16-bit sources of a block of up to {}", narrow_limit);
  return {.destinations = block.num_dst(),
          .sources = block.num_src,
          .edges = static_cast<std::int64_t>(block.src_index.size()),
          .weights = packed_weights(block),
          .source_ids = with_source_ids && !block.src_gid.empty(),
          .narrow_limit = narrow_limit};
}

std::int64_t PackedBlock::bytes_for(const BlockShape& shape) { return PackedLayout(shape).end; }

PackedBlock::PackedBlock(Device& device, const BlockShape& shape, std::string_view what)
    : shape_(shape), arrays_(device, bytes_for(shape), what) {
  place(arrays_.view().data);
}

PackedBlock::PackedBlock(Transfers& transfers, const SparseBlock& block, const BlockShape& shape, std::string_view what)
    : PackedBlock(transfers.device(), shape, what) {
  const BlockShape expected = shape_of(block, shape.narrow_limit, shape.source_ids);
  NJ_EXPECTS(shape.destinations == expected.destinations && shape.sources == expected.sources &&
                 shape.edges == expected.edges && shape.weights == expected.weights &&
                 shape.source_ids == expected.source_ids,
             "a block of {} destinations, {} sources and {} edges packed as one of {}, {} and {}",
             expected.destinations, expected.sources, expected.edges, shape.destinations, shape.sources, shape.edges);
  NJ_EXPECTS(!shape_.source_ids || static_cast<std::int64_t>(block.src_gid.size()) == shape_.sources,
             "{} global ids for a block of {} sources", block.src_gid.size(), shape_.sources);
  NJ_EXPECTS(block.src_factor.empty() || static_cast<std::int64_t>(block.src_factor.size()) == shape_.sources,
             "{} vertex factors for a block of {} sources", block.src_factor.size(), shape_.sources);
  const PackedLayout at(shape_);
  const auto fill = [&](std::byte* staging, std::int64_t first, std::int64_t count) {
    const Piece piece{staging, first, count};
    pack(piece, at.dst_offsets, block.dst_offsets);
    if (shape_.source_ids) pack(piece, at.src_gid, block.src_gid);
    pack(piece, at.weight, block.src_factor.empty() ? block.edge_weight : block.src_factor);
    if (shape_.narrow()) {
      pack_narrow(piece, at.narrow_sources, block.src_index);
    } else {
      pack(piece, at.sources, block.src_index);
    }
  };
  transfers.upload_with(arrays_.view(), Traffic::kStructure, fill);
}

void PackedBlock::place(std::byte* base) {
  const PackedLayout at(shape_);
  view_.num_dst = static_cast<vid_t>(shape_.destinations);
  view_.num_src = static_cast<vid_t>(shape_.sources);
  view_.edges = shape_.edges;
  view_.dst_offsets = at_offset<eid_t>(base, at.dst_offsets);
  view_.src_gid = shape_.source_ids ? at_offset<gid_t>(base, at.src_gid) : nullptr;
  view_.weights = shape_.weights;
  view_.weight = shape_.weights != PackedWeights::kNone ? at_offset<float>(base, at.weight) : nullptr;
  view_.sources = shape_.narrow() ? nullptr : at_offset<vid_t>(base, at.sources);
  view_.narrow_sources = shape_.narrow() ? at_offset<std::uint16_t>(base, at.narrow_sources) : nullptr;
}

SparseBlockView PackedBlock::direct_view() const {
  SparseBlockView v;
  v.num_dst = view_.num_dst;
  v.num_src = view_.num_src;
  v.edges = view_.edges;
  v.dst_offsets = view_.dst_offsets;
  v.src_index = view_.sources;
  v.narrow_src_index = view_.narrow_sources;
  const bool factors = view_.weights != PackedWeights::kNone && view_.weights != PackedWeights::kPerEdge;
  v.edge_weight = view_.weights == PackedWeights::kPerEdge ? view_.weight : nullptr;
  v.factors = factors ? view_.weights : PackedWeights::kNone;
  v.src_factor = factors ? view_.weight : nullptr;
  v.src_gid = view_.src_gid;
  return v;
}

std::int64_t ExpandedBlock::bytes_for(const BlockShape& shape, bool out_edges) {
  return ExpandedLayout(shape, out_edges).end;
}

ExpandedBlock::ExpandedBlock(Backend& backend, Device& device, const PackedBlock& packed, bool out_edges) {
  const BlockShape& shape = packed.shape();
  const ExpandedLayout at(shape, out_edges);
  arrays_ = DeviceArray<std::byte>(device, at.end, "graph: expanded subgraph");
  std::byte* base = arrays_.view().data;
  const PackedBlockView& p = packed.view();
  const bool weighted = shape.weights != PackedWeights::kNone;
  const bool factors = weighted && shape.weights != PackedWeights::kPerEdge;
  ExpandedArrays out;
  out.src_index = writable_at<vid_t>(base, at.src_index, shape.narrow());
  out.edge_weight = writable_at<float>(base, at.edge_weight, factors);
  out.src_offsets = writable_at<eid_t>(base, at.src_offsets, out_edges);
  out.out_dst = writable_at<vid_t>(base, at.out_dst, out_edges);
  out.out_edge = writable_at<eid_t>(base, at.out_edge, out_edges);
  out.out_weight = writable_at<float>(base, at.out_weight, out_edges && weighted);
  const DeviceSpan<eid_t> cursor{writable_at<eid_t>(base, at.cursor, out_edges), out_edges ? shape.sources : 0};
  backend.expand_block(p, out, cursor);

  // The block as it lies, with what was expanded in place of what it packs.
  view_ = packed.direct_view();
  if (shape.narrow()) {
    view_.src_index = out.src_index;
    view_.narrow_src_index = nullptr;
  }
  if (factors) {
    view_.edge_weight = out.edge_weight;
    view_.factors = PackedWeights::kNone;
    view_.src_factor = nullptr;
  }
  view_.src_offsets = out.src_offsets;
  view_.out_dst = out.out_dst;
  view_.out_edge = out.out_edge;
  view_.out_weight = out.out_weight;
}

SparseBlockView ExpandedBlock::view(DeviceSpan<const vid_t> src_row) const {
  SparseBlockView v = view_;
  v.src_row = src_row.data;
  return v;
}

}  // namespace nj
