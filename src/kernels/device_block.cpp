#include "nj/kernels/device_block.hpp"

#include <cstring>
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

template <typename T>
void pack(std::byte* base, std::int64_t offset, const std::vector<T>& values) {
  if (!values.empty()) std::memcpy(base + offset, values.data(), values.size() * sizeof(T));
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
  transfers.upload_with(arrays_.view(), kind, [&](std::byte* host) {
    pack(host, at.dst_offsets, block.dst_offsets);
    pack(host, at.src_offsets, block.by_source.offsets);
    pack(host, at.out_edge, block.by_source.edge_position);
    pack(host, at.src_gid, block.src_gid);
    pack(host, at.src_index, block.src_index);
    pack(host, at.out_dst, block.by_source.destinations);
    pack(host, at.edge_weight, block.edge_weight);
    pack(host, at.out_weight, block.out_weight);
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

}  // namespace nj
