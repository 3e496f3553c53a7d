#pragma once
// Copies between host memory and device memory through page-locked staging (or, on a device that copies
// pageable memory as fast, straight from and into a block of host rows), ordered on the device's streams:
// an upload waits for the kernels issued so far and the compute stream waits for it; a download waits for the
// kernels issued so far and returns once the host holds the data. Rows travel packed: gathered on the host
// into staging (uploads), or into contiguous device rows before they leave (downloads). The executors, the
// device parameters and the graph blocks all copy through here.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "nj/core/matrix.hpp"
#include "nj/core/types.hpp"
#include "nj/device/device.hpp"

namespace nj {

// The first id of `ids` where they are consecutive ascending ids (first, first + 1, ...): rows that can be read
// or written as one block. std::nullopt where they are not, or are none.
inline std::optional<vid_t> consecutive_from(std::span<const vid_t> ids) {
  if (ids.empty()) return std::nullopt;
  for (std::size_t i = 1; i < ids.size(); ++i) {
    if (ids[i] != ids[0] + static_cast<vid_t>(i)) return std::nullopt;
  }
  return ids[0];
}

// What a copy carries, so that a user sees what moves (ExecutionMetrics).
enum class Traffic {
  kRows,        // vertex rows: features, activations and their gradients (what the executors' plans predict)
  kStructure,   // the graph: subgraph blocks
  kIndex,       // cache slots and vertex ids
  kParameters,  // weights to the device, their gradients back
};

// Bytes copied one way, by what they carried.
class TrafficBytes {
 public:
  std::int64_t& operator[](Traffic kind) { return bytes_[static_cast<std::size_t>(kind)]; }
  std::int64_t operator[](Traffic kind) const { return bytes_[static_cast<std::size_t>(kind)]; }
  std::int64_t total() const { return bytes_[0] + bytes_[1] + bytes_[2] + bytes_[3]; }
  friend bool operator==(const TrafficBytes&, const TrafficBytes&) = default;

 private:
  std::array<std::int64_t, 4> bytes_{};
};

class Transfers {
 public:
  // The most one copy through staging moves: larger copies go in pieces, one after another through the same buffer, so
  // that the page-locked staging kept for a run stays within this (a whole graph's block is 26 bytes an edge). A
  // multiple of every element's size.
  static constexpr std::int64_t kPieceBytes = std::int64_t{64} << 20;
  // `piece_bytes`: the most one copy through staging moves (kPieceBytes; tests make it small), a multiple of 8.
  explicit Transfers(Device& device, std::int64_t piece_bytes = kPieceBytes)
      : device_(device), staging_(device), piece_bytes_(piece_bytes) {
    NJ_EXPECTS(piece_bytes > 0 && piece_bytes % 8 == 0, "copies in pieces of {} bytes, not a multiple of 8",
               piece_bytes);
  }
  Device& device() { return device_; }
  // Bytes copied each way since the last take, by what they carried.
  std::pair<TrafficBytes, TrafficBytes> take_traffic() { return {std::exchange(h2d_, {}), std::exchange(d2h_, {})}; }
  // The most bytes one copy has moved through page-locked staging so far: what staging holds at most (a replay that
  // stages nothing counts it too). A copy straight from or into host rows stages nothing.
  std::int64_t largest_copy_bytes() const { return largest_copy_; }
  // Frees the staging, with the page-locked blocks the device keeps, and counts the largest copy afresh: after the
  // one-time uploads of a run whose epochs copy less (the in-memory executor's graph goes through a staging of up to
  // kPieceBytes; its epochs copy the parameters, the logits and, exchanging through the host, boundary rows).
  void release_staging() {
    device_.synchronize(staged_);
    staging_.release();
    device_.free_kept_pinned();
    largest_copy_ = 0;
  }

  // Host rows `rows` of `host` (empty: its first dst.rows rows) into dst, after the kernels issued so far
  // (as every copy to the device here); kernels issued afterwards see them.
  void upload(ConstRows host, std::span<const vid_t> rows, DeviceRows dst);
  // Issues that copy through `staging` without making the compute stream wait for it (a prefetch): the caller
  // waits for the event on the compute stream before a kernel reads dst, and keeps `staging` until the event
  // has completed.
  Event start_upload(ConstRows host, std::span<const vid_t> rows, DeviceRows dst, PinnedArray<std::byte>& staging);
  // Device rows src into host rows `rows` of `host` (empty: its first src.rows rows), after the kernels issued
  // so far; returns once the host rows hold them.
  void download(ConstDeviceRows src, Rows host, std::span<const vid_t> rows = {});
  // dst.size elements that fill(staging, first, count) writes into page-locked staging, elements [first, first +
  // count) at a time, copied into dst piece by piece; kernels issued afterwards see them.
  template <typename T, typename Fill>
  void upload_with(DeviceSpan<T> dst, Traffic kind, Fill&& fill) {
    for_each_piece<T>(dst.size, [&](std::int64_t first, std::int64_t count, std::int64_t bytes) {
      tally(h2d_, kind, bytes);
      note_staged(bytes);
      if (!device_.moves_data()) return;
      T* packed = reinterpret_cast<T*>(reuse_staging(bytes));
      fill(packed, first, count);
      order_after_kernels();
      staged_ = device_.copy_to_device(dst.data + first, packed, bytes);
      device_.wait(Stream::kCompute, staged_);
    });
  }
  // An array the kernels read (ids, slots, parameters) into device memory; kernels issued afterwards see it.
  template <typename T>
  void upload_array(std::span<const T> host, DeviceSpan<T> dst, Traffic kind) {
    NJ_EXPECTS(static_cast<std::int64_t>(host.size()) == dst.size, "{} values for a device array of {}", host.size(),
               dst.size);
    upload_with(dst, kind, [&](T* staging, std::int64_t first, std::int64_t count) {
      std::copy_n(host.data() + first, count, staging);
    });
  }
  // A device array into `host`, piece by piece as upload_with, after the kernels issued so far; returns once `host`
  // holds it.
  template <typename T>
  void download_array(DeviceSpan<const T> src, T* host, Traffic kind) {
    for_each_piece<T>(src.size, [&](std::int64_t first, std::int64_t, std::int64_t bytes) {
      tally(d2h_, kind, bytes);
      note_staged(bytes);
      std::byte* packed = reuse_staging(bytes);
      device_.wait(Stream::kDeviceToHost, device_.record(Stream::kCompute));
      device_.synchronize(device_.copy_to_host(packed, src.data + first, bytes));
      std::memcpy(host + first, packed, static_cast<std::size_t>(bytes));
    });
  }

  // Every copy to the device waits for the kernels issued before it: dst may be memory they used (rows that
  // mirrors arrive into, or arena memory freed and handed out again).
  void order_after_kernels() { device_.wait(Stream::kHostToDevice, device_.record(Stream::kCompute)); }

 private:
  // Runs copy(first, count, bytes) over the pieces of `size` elements of T, in order.
  template <typename T, typename Copy>
  void for_each_piece(std::int64_t size, Copy&& copy) const {
    static_assert(sizeof(T) <= 8, "pieces hold whole elements of at most 8 bytes");
    const std::int64_t piece = piece_bytes_ / std::int64_t{sizeof(T)};
    for (std::int64_t first = 0; first < size; first += piece) {
      const std::int64_t count = std::min(piece, size - first);
      copy(first, count, count * std::int64_t{sizeof(T)});
    }
  }
  void tally(TrafficBytes& way, Traffic kind, std::int64_t bytes) { way[kind] += bytes; }
  void note_staged(std::int64_t bytes) { largest_copy_ = std::max(largest_copy_, bytes); }
  // The first of `count` host rows (of host_rows) listed in `rows` (empty: the first ones) where they form one
  // block that this device copies straight, without staging; std::nullopt otherwise.
  std::optional<std::int64_t> direct_first_row(std::int64_t host_rows, std::span<const vid_t> rows,
                                               std::int64_t count) const;
  // The staging, once the last copy from it is done (on a GPU the compute stream's wait does not block the
  // host, so the host must not refill it earlier).
  std::byte* reuse_staging(std::int64_t bytes) {
    device_.synchronize(staged_);
    return staging_.reserve(bytes);
  }

  Device& device_;
  PinnedArray<std::byte> staging_;  // for the synchronous copies
  Event staged_;                    // the last upload from it
  TrafficBytes h2d_, d2h_;
  std::int64_t largest_copy_ = 0;
  std::int64_t piece_bytes_;
};

// Allocates a device array of ids holding `host` (the compute stream waits for it).
template <typename T>
DeviceArray<T> to_device(Transfers& transfers, std::span<const T> host, std::string_view what) {
  DeviceArray<T> array(transfers.device(), static_cast<std::int64_t>(host.size()), what);
  transfers.upload_array<T>(host, array.view(), Traffic::kIndex);
  return array;
}

}  // namespace nj
