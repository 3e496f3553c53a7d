#pragma once
// OnDevice: backend kernels run on host data, for tests. It owns a checked CPU device emulation and backend
// (make_cpu_resources), and moves data to and from the device the way the device contract (device.hpp) asks:
//   - an upload is issued after every kernel and download issued so far (it may overwrite what they read);
//     the compute stream waits for it, so the kernels called next see the data; and it returns once the copy
//     is done, so the host data may change right after (a finite-difference step re-uploads its input);
//   - a download is issued after every kernel and upload issued so far (it reads what they wrote), and returns
//     once the copy is done, so the host data it returns is complete.
// The device buffers it hands out must die before it does.
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nj/core/bytes.hpp"
#include "nj/core/matrix.hpp"
#include "nj/device/device.hpp"
#include "nj/device/resources.hpp"
#include "nj/kernels/device_block.hpp"

namespace nj::test {

class OnDevice {
 public:
  // `threads` <= 0 keeps the CPU backend's default thread count (a process-wide setting).
  explicit OnDevice(int threads = 0) : resources_(make_cpu_resources(kUnlimited, threads)) {}

  Backend& backend() { return *resources_.backend; }
  Device& device() { return *resources_.device; }

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
  void set(DeviceMatrix& dst, const Matrix& host) {
    arrived(upload(after_other_streams(Stream::kHostToDevice), dst.view(), host.view()));
  }
  // A new device array holding `host`.
  template <typename T>
  DeviceArray<T> put_array(std::span<const T> host, std::string_view what = "test array") {
    DeviceArray<T> array(device(), static_cast<std::int64_t>(host.size()), what);
    arrived(upload(after_other_streams(Stream::kHostToDevice), array.view(), host.data()));
    return array;
  }
  // A sparse block's arrays on the device (the constructor returns once they are there).
  DeviceBlock block(const SparseBlock& host, std::string_view what = "test block") { return {device(), host, what}; }

  // Device rows back on the host.
  Matrix get(ConstDeviceRows src) {
    Matrix host(src.rows, src.cols);
    device().synchronize(download(after_other_streams(Stream::kDeviceToHost), host.view(), src));
    return host;
  }
  // A device array back on the host.
  template <typename T>
  std::vector<std::remove_const_t<T>> get_array(DeviceSpan<T> src) {
    std::vector<std::remove_const_t<T>> host(static_cast<std::size_t>(src.size));
    device().synchronize(download(after_other_streams(Stream::kDeviceToHost), host.data(),
                                  DeviceSpan<const std::remove_const_t<T>>{src.data, src.size}));
    return host;
  }

 private:
  // The device, with the `copies` stream ordered after everything issued so far on the other streams (the
  // kernels, and the copies the other way).
  Device& after_other_streams(Stream copies) {
    for (const Stream other : {Stream::kCompute, Stream::kHostToDevice, Stream::kDeviceToHost}) {
      if (other != copies) device().wait(copies, device().record(other));
    }
    return device();
  }
  // Kernels issued from now on run after the upload `copied`, and the host source is free again.
  void arrived(const Event& copied) {
    device().wait(Stream::kCompute, copied);
    device().synchronize(copied);
  }

  Resources resources_;
};

}  // namespace nj::test
