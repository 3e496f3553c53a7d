#pragma once
// Views of device memory. They are distinct types from the host views (nj/core/matrix.hpp's RowsView), with no
// conversion either way, so passing device memory where host memory is wanted, or the reverse, does not
// compile. Kernels take only these; the host reaches device memory only through the Device's copies.
//
// C++17 and free of the host library, so that CUDA translation units include it.
#include <cstdint>

#include "nj/core/hd.hpp"

namespace nj {

// `size` elements of T in device memory.
template <typename T>
struct DeviceSpan {
  T* data = nullptr;
  std::int64_t size = 0;

  NJ_HD bool empty() const { return size == 0; }
  NJ_HD std::int64_t bytes() const { return size * static_cast<std::int64_t>(sizeof(T)); }
  NJ_HD DeviceSpan subspan(std::int64_t first, std::int64_t count) const { return {data + first, count}; }
  NJ_HD operator DeviceSpan<const T>() const { return {data, size}; }  // NOLINT(google-explicit-constructor)
};

// Row-major rows × cols of T in device memory, without padding.
template <typename T>
struct DeviceRowsView {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  NJ_HD T* row(std::int64_t r) const { return data + r * cols; }
  NJ_HD std::int64_t size() const { return rows * cols; }
  NJ_HD std::int64_t bytes() const { return size() * static_cast<std::int64_t>(sizeof(T)); }
  NJ_HD bool empty() const { return data == nullptr; }
  NJ_HD DeviceRowsView slice(std::int64_t first, std::int64_t count) const {
    return {data + first * cols, count, cols};
  }
  NJ_HD DeviceSpan<T> span() const { return {data, size()}; }
  NJ_HD operator DeviceRowsView<const T>() const { return {data, rows, cols}; }  // NOLINT(google-explicit-constructor)
};

using DeviceRows = DeviceRowsView<float>;
using ConstDeviceRows = DeviceRowsView<const float>;

}  // namespace nj
