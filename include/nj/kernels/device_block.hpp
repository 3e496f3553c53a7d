#pragma once
// A sparse block's arrays in device memory: what the kernels' SparseBlockView points at. One allocation holds
// every array, filled by one copy through Transfers' staging.
#include <cstdint>
#include <string_view>

#include "nj/device/device.hpp"
#include "nj/device/transfers.hpp"
#include "nj/graph/sparse_block.hpp"
#include "nj/kernels/backend.hpp"

namespace nj {

class DeviceBlock {
 public:
  DeviceBlock() = default;
  // Copies `block`'s arrays to the device, counted as `kind` of traffic (a graph's structure, or sparse rows);
  // kernels issued afterwards see them.
  DeviceBlock(Transfers& transfers, const SparseBlock& block, std::string_view what, Traffic kind);

  // Device bytes of a block of this size (what the constructor allocates), with or without global ids of its sources
  // (a block of sparse rows has none).
  static std::int64_t bytes_for(std::int64_t num_dst, std::int64_t num_src, std::int64_t num_edges, bool weighted,
                                bool source_ids = true);

  // The kernels' view; its sources are read through `src_row` (empty: row j holds source j).
  SparseBlockView view(DeviceSpan<const vid_t> src_row = {}) const;
  std::int64_t bytes() const { return arrays_.size(); }

 private:
  DeviceArray<std::byte> arrays_;
  SparseBlockView view_;
};

// What sizes a block's arrays.
struct BlockShape {
  std::int64_t destinations = 0;
  std::int64_t sources = 0;
  std::int64_t edges = 0;
  PackedWeights weights = PackedWeights::kNone;
  bool source_ids = true;
  // Sources of a packed block travel in 16 bits where there are at most this many (kNarrowSourceLimit; tests lower
  // it to see the wide encoding at work).
  std::int64_t narrow_limit = kNarrowSourceLimit;

  bool narrow() const { return sources <= narrow_limit; }
};

// A block as a budgeted step uploads it and the device may keep it (PackedBlockView): its in-edges, its sources in
// 16 bits where the shape allows, its weights per source where they are vertex factors' products, its global ids.
class PackedBlock {
 public:
  PackedBlock() = default;
  // Packs and uploads `block` in `shape` (shape_of), counted as structure.
  PackedBlock(Transfers& transfers, const SparseBlock& block, const BlockShape& shape, std::string_view what);
  // The allocation alone, for a replay on a planning device, which moves nothing.
  PackedBlock(Device& device, const BlockShape& shape, std::string_view what);

  // The shape `block` is packed in: its weights from block.src_factor where it has them, its global ids only
  // `with_source_ids`.
  static BlockShape shape_of(const SparseBlock& block, std::int64_t narrow_limit, bool with_source_ids);
  static std::int64_t bytes_for(const BlockShape& shape);

  const BlockShape& shape() const { return shape_; }
  const PackedBlockView& view() const { return view_; }
  // The kernels' view of the block as it lies, without out-edges, for a backend that reads packed blocks
  // (LibraryMemory::reads_packed_blocks).
  SparseBlockView direct_view() const;
  std::int64_t bytes() const { return arrays_.size(); }

 private:
  void place(std::byte* base);

  BlockShape shape_;
  DeviceArray<std::byte> arrays_;
  PackedBlockView view_;
};

// A packed block's view for one step (SparseBlockView), what the packed arrays lack expanded on the device into
// arrays this holds: the in-edges only, or with `out_edges` the out-edge arrays too (backward steps read them).
class ExpandedBlock {
 public:
  ExpandedBlock() = default;
  ExpandedBlock(Backend& backend, Device& device, const PackedBlock& packed, bool out_edges);

  // Device bytes of the expansion, its cursor included.
  static std::int64_t bytes_for(const BlockShape& shape, bool out_edges);

  SparseBlockView view(DeviceSpan<const vid_t> src_row = {}) const;

 private:
  DeviceArray<std::byte> arrays_;
  SparseBlockView view_;
};

}  // namespace nj
