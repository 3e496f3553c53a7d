#pragma once
// The executors' copies between host rows and device rows, through page-locked staging, ordered on the
// device's streams: a download first orders the device-to-host engine after the kernels issued so far, and an
// upload orders the compute stream after its copy. Rows travel packed: gathered on the host into staging
// (uploads), or into contiguous device rows before they leave (downloads).
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "nj/core/matrix.hpp"
#include "nj/core/types.hpp"
#include "nj/device/device.hpp"

namespace nj {

class Transfers {
 public:
  explicit Transfers(Device& device) : device_(device), staging_(device) {}
  Device& device() { return device_; }
  // Bytes of rows copied each way (not arrays) since the last take: what the executors' plans predict.
  std::pair<std::int64_t, std::int64_t> take_row_bytes() {
    return {std::exchange(h2d_row_bytes_, 0), std::exchange(d2h_row_bytes_, 0)};
  }

  // Host rows `rows` of `host` (empty: its first dst.rows rows) into dst, after the kernels issued so far
  // (as every copy to the device here); kernels issued afterwards see them.
  void upload(ConstRows host, std::span<const vid_t> rows, DeviceRows dst);
  // Issues that copy through `staging` without making the compute stream wait for it (a prefetch): the caller
  // waits for the event on the compute stream before a kernel reads dst, and keeps `staging` until the event
  // has completed.
  Event start_upload(ConstRows host, std::span<const vid_t> rows, DeviceRows dst, PinnedArray<float>& staging);
  // Device rows src into host rows `rows` of `host` (empty: its first src.rows rows), after the kernels issued
  // so far; returns once the host rows hold them.
  void download(ConstDeviceRows src, Rows host, std::span<const vid_t> rows = {});
  // An array the kernels read (ids, slots) into device memory; kernels issued afterwards see it.
  template <typename T>
  void upload_array(std::span<const T> host, DeviceSpan<T> dst) {
    NJ_EXPECTS(static_cast<std::int64_t>(host.size()) == dst.size, "{} values for a device array of {}", host.size(),
               dst.size);
    if (host.empty()) return;
    // The staging is shared with the row copies, as floats; bytes are what matter.
    const auto floats =
        (dst.bytes() + static_cast<std::int64_t>(sizeof(float)) - 1) / static_cast<std::int64_t>(sizeof(float));
    void* packed = reuse_staging(floats);
    std::memcpy(packed, host.data(), host.size_bytes());
    order_after_kernels();
    staged_ = device_.copy_to_device(dst.data, packed, dst.bytes());
    device_.wait(Stream::kCompute, staged_);
  }

  // Every copy to the device waits for the kernels issued before it: dst may be memory they used (rows that
  // mirrors arrive into, or arena memory freed and handed out again).
  void order_after_kernels() { device_.wait(Stream::kHostToDevice, device_.record(Stream::kCompute)); }

 private:
  // The staging, once the last copy from it is done (on a GPU the compute stream's wait does not block the
  // host, so the host must not refill it earlier).
  float* reuse_staging(std::int64_t floats) {
    device_.synchronize(staged_);
    return staging_.reserve(floats);
  }

  Device& device_;
  PinnedArray<float> staging_;  // for the synchronous copies
  Event staged_;                // the last upload from it
  std::int64_t h2d_row_bytes_ = 0;
  std::int64_t d2h_row_bytes_ = 0;
};

// Allocates a device array holding `host` (the compute stream waits for it).
template <typename T>
DeviceArray<T> to_device(Transfers& transfers, std::span<const T> host, std::string_view what) {
  DeviceArray<T> array(transfers.device(), static_cast<std::int64_t>(host.size()), what);
  transfers.upload_array<T>(host, array.view());
  return array;
}

}  // namespace nj
