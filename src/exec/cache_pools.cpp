#include "cache_pools.hpp"

#include <algorithm>
#include <chrono>

#include "nj/core/stopwatch.hpp"

namespace nj {
namespace {

std::vector<vid_t> slots_of(std::span<const SlotAssignment> assignments) {
  std::vector<vid_t> slots;
  slots.reserve(assignments.size());
  for (const auto& a : assignments) slots.push_back(a.slot);
  return slots;
}

std::vector<vid_t> rows_of(std::span<const SlotAssignment> assignments) {
  std::vector<vid_t> rows;
  rows.reserve(assignments.size());
  for (const auto& a : assignments) rows.push_back(a.row.row);
  return rows;
}

// Calls fn(tensor, group) for each run of consecutive assignments of one tensor (plans list them by tensor).
template <typename Fn>
void for_each_tensor(std::span<const SlotAssignment> rows, Fn&& fn) {
  std::size_t first = 0;
  while (first < rows.size()) {
    std::size_t last = first;
    while (last < rows.size() && rows[last].row.tensor == rows[first].row.tensor) ++last;
    fn(rows[first].row.tensor, rows.subspan(first, last - first));
    first = last;
  }
}

}  // namespace

DeviceArray<vid_t> slots_on_device(Transfers& transfers, std::span<const vid_t> slots) {
  return to_device<vid_t>(transfers, slots, "index: cache slots");
}

CachePools::CachePools(Backend& backend, Transfers& transfers, std::size_t tensors, std::int64_t staging_limit_bytes,
                       std::function<Rows(std::uint32_t)> home, double& wait_seconds)
    : backend_(backend),
      transfers_(transfers),
      staging_limit_bytes_(staging_limit_bytes),
      home_(std::move(home)),
      wait_seconds_(wait_seconds),
      pools_(tensors) {}

void CachePools::begin_phase(const AccessTrace& trace, std::uint32_t phase) {
  for (std::size_t t = 0; t < pools_.size(); ++t) {
    const std::int64_t slots = trace.capacity_rows[phase][t];
    if (slots > 0) {
      pools_[t] = DeviceMatrix(transfers_.device(), slots,
                               trace.tensors[t].row_bytes / static_cast<std::int64_t>(sizeof(float)),
                               "rows: " + trace.tensors[t].name + " cache");
    }
  }
}

void CachePools::end_phase(std::span<const SlotAssignment> writeback) {
  write_back(writeback);
  release();
}

void CachePools::release() {
  for (auto& pool : pools_) pool = DeviceMatrix();
}

// A phase's end writes back up to a whole pool: in pieces that fit a step's staging.
void CachePools::write_back(std::span<const SlotAssignment> rows) {
  for_each_tensor(rows, [&](std::uint32_t tensor, std::span<const SlotAssignment> group) {
    const std::int64_t row_bytes = pools_[tensor].cols() * static_cast<std::int64_t>(sizeof(float));
    const auto piece = static_cast<std::size_t>(
        std::max<std::int64_t>(1, staging_limit_bytes_ / (row_bytes + static_cast<std::int64_t>(sizeof(vid_t)))));
    for (std::size_t first = 0; first < group.size(); first += piece) {
      const auto part = group.subspan(first, std::min(piece, group.size() - first));
      copy_to_home(tensor, slots_of(part), rows_of(part));
    }
  });
}

void CachePools::copy_to_home(std::uint32_t tensor, std::span<const vid_t> slots, std::span<const vid_t> rows) {
  const DeviceArray<vid_t> on_device = slots_on_device(transfers_, slots);
  DeviceMatrix packed(transfers_.device(), static_cast<std::int64_t>(slots.size()), pools_[tensor].cols(),
                      "rows: staging to host");
  backend_.copy_rows(pools_[tensor].view(), on_device.view(), packed.view(), {}, packed.rows());
  const auto start = std::chrono::steady_clock::now();
  transfers_.download(packed.view(), home_(tensor), rows);
  wait_seconds_ += seconds_since(start);
}

CachePools::PendingLoads CachePools::issue_loads(std::span<const SlotAssignment> rows) {
  PendingLoads pending;
  for_each_tensor(rows, [&](std::uint32_t tensor, std::span<const SlotAssignment> group) {
    auto& g = pending.groups.emplace_back(
        PendingLoads::Group{tensor, slots_of(group), PinnedArray<std::byte>(transfers_.device()), DeviceMatrix()});
    const ConstRows host = home_(tensor);
    g.packed =
        DeviceMatrix(transfers_.device(), static_cast<std::int64_t>(group.size()), host.cols, "rows: load staging");
    pending.copied = transfers_.start_upload(host, rows_of(group), g.packed.view(), g.host);
  });
  return pending;
}

void CachePools::finish_loads(PendingLoads& pending) {
  const auto start = std::chrono::steady_clock::now();
  transfers_.device().wait(Stream::kCompute, pending.copied);
  wait_seconds_ += seconds_since(start);
  for (auto& g : pending.groups) {
    const DeviceArray<vid_t> slots = slots_on_device(transfers_, g.slots);
    backend_.copy_rows(g.packed.view(), {}, pools_[g.tensor].view(), slots.view(), g.packed.rows());
  }
  // The page-locked staging goes with `pending`: its copies must be done (the compute stream's wait does not
  // block the host on a GPU).
  transfers_.device().synchronize(pending.copied);
  pending = {};
}

void CachePools::zero(std::span<const SlotAssignment> rows) {
  for_each_tensor(rows, [&](std::uint32_t tensor, std::span<const SlotAssignment> group) {
    const DeviceArray<vid_t> slots = slots_on_device(transfers_, slots_of(group));
    backend_.zero_rows(pools_[tensor].view(), slots.view(), slots.size());
  });
}

}  // namespace nj
