#pragma once
// Views of device memory. They are distinct types from the host views (nj/core/matrix.hpp's RowsView), with no
// conversion either way, so passing device memory where host memory is wanted, or the reverse, does not
// compile. Kernels take only these; the host reaches device memory only through the Device's copies.
//
// C++17 and free of the host library, so that CUDA translation units include it.
#include <cstdint>
#include <type_traits>

#include "nj/core/hd.hpp"

namespace nj {

// `size` elements of T in device memory.
template <typename T>
struct DeviceSpan {
  T* data = nullptr;
  std::int64_t size = 0;

  DeviceSpan() = default;
  NJ_HD constexpr DeviceSpan(T* values, std::int64_t count) : data(values), size(count) {}
  // Read-only from writable (a constructor: nvcc warns of a conversion operator that would also convert a
  // read-only span to itself).
  template <typename U, typename = std::enable_if_t<std::is_same_v<const U, T> && !std::is_const_v<U>>>
  NJ_HD constexpr DeviceSpan(DeviceSpan<U> other)  // NOLINT(google-explicit-constructor)
      : data(other.data), size(other.size) {}

  NJ_HD bool empty() const { return size == 0; }
  NJ_HD std::int64_t bytes() const { return size * static_cast<std::int64_t>(sizeof(T)); }
  NJ_HD DeviceSpan subspan(std::int64_t first, std::int64_t count) const { return {data + first, count}; }
};

// Row-major rows × cols of T in device memory, without padding.
template <typename T>
struct DeviceRowsView {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  DeviceRowsView() = default;
  NJ_HD constexpr DeviceRowsView(T* values, std::int64_t num_rows, std::int64_t num_cols)
      : data(values), rows(num_rows), cols(num_cols) {}
  // Read-only from writable.
  template <typename U, typename = std::enable_if_t<std::is_same_v<const U, T> && !std::is_const_v<U>>>
  NJ_HD constexpr DeviceRowsView(DeviceRowsView<U> other)  // NOLINT(google-explicit-constructor)
      : data(other.data), rows(other.rows), cols(other.cols) {}

  NJ_HD T* row(std::int64_t r) const { return data + r * cols; }
  NJ_HD std::int64_t size() const { return rows * cols; }
  NJ_HD std::int64_t bytes() const { return size() * static_cast<std::int64_t>(sizeof(T)); }
  NJ_HD bool empty() const { return data == nullptr; }
  NJ_HD DeviceRowsView slice(std::int64_t first, std::int64_t count) const {
    return {data + first * cols, count, cols};
  }
  NJ_HD DeviceSpan<T> span() const { return {data, size()}; }
};

using DeviceRows = DeviceRowsView<float>;
using ConstDeviceRows = DeviceRowsView<const float>;

}  // namespace nj
