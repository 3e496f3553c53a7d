#pragma once
// OnDevice: backend kernels run on host data, for tests. It owns a backend's resources (the checked CPU
// emulation, or a GPU: support/backends.hpp), and moves data through Transfers, which orders every copy as the device
// contract (device.hpp) asks: an upload runs after the kernels issued so far and the kernels called next see it; a
// download runs after them and returns once the host holds the data. The host data may change right after
// either (a finite-difference step re-uploads its input). The device buffers it hands out must die before it
// does.
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nj/core/bytes.hpp"
#include "nj/core/matrix.hpp"
#include "nj/device/device.hpp"
#include "nj/device/transfers.hpp"
#include "nj/kernels/device_block.hpp"
#include "nj/runtime/resources.hpp"
#include "support/backends.hpp"

namespace nj::test {

class OnDevice {
 public:
  // `threads` <= 0 keeps the CPU backend's default thread count (a process-wide setting). `piece_bytes`: the most one
  // copy through staging moves (Transfers), small to copy in many pieces.
  explicit OnDevice(DeviceKind kind = DeviceKind::kCpu, int threads = 0,
                    std::int64_t piece_bytes = Transfers::kPieceBytes)
      : resources_(backend_resources(kind, kUnlimited, threads)), transfers_(*resources_.device, piece_bytes) {}

  Backend& backend() { return *resources_.backend; }
  Device& device() { return *resources_.device; }
  Transfers& transfers() { return transfers_; }

  // New device rows holding `host`.
  DeviceMatrix put(const Matrix& host, std::string_view what = "test rows") {
    DeviceMatrix rows(device(), host.rows(), host.cols(), what);
    set(rows, host);
    return rows;
  }
  // New device rows of zeros (kernel outputs).
  DeviceMatrix zeros(std::int64_t rows, std::int64_t cols, std::string_view what = "test output") {
    return put(Matrix(rows, cols), what);
  }
  // Overwrites device rows with `host` (of the same shape).
  void set(DeviceMatrix& dst, const Matrix& host) { transfers_.upload(host.view(), {}, dst.view()); }
  // A new device array holding `host`.
  template <typename T>
  DeviceArray<T> put_array(std::span<const T> host, std::string_view what = "test array") {
    return to_device<T>(transfers_, host, what);
  }
  // A sparse block's arrays on the device.
  DeviceBlock block(const SparseBlock& host, std::string_view what = "test block") {
    return {transfers_, host, what, Traffic::kStructure};
  }

  // Device rows back on the host.
  Matrix get(ConstDeviceRows src) {
    Matrix host(src.rows, src.cols);
    transfers_.download(src, host.view());
    return host;
  }
  // A device array back on the host.
  template <typename T>
  std::vector<std::remove_const_t<T>> get_array(DeviceSpan<T> src) {
    std::vector<std::remove_const_t<T>> host(static_cast<std::size_t>(src.size));
    transfers_.download_array(DeviceSpan<const std::remove_const_t<T>>{src.data, src.size}, host.data(),
                              Traffic::kIndex);
    return host;
  }

 private:
  Resources resources_;
  Transfers transfers_;  // after resources_: its staging goes first
};

}  // namespace nj::test
