#pragma once
// A sparse block's arrays in device memory: what the kernels' SparseBlockView points at. One allocation holds
// every array, filled by one copy through Transfers' staging.
#include <cstdint>
#include <string_view>

#include "nj/device/device.hpp"
#include "nj/device/transfers.hpp"
#include "nj/kernels/sparse_block.hpp"

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

}  // namespace nj
