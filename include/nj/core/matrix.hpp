#pragma once
// Dense row-major float32 matrices on the host, and non-owning views of row blocks.
#include <cstdint>
#include <span>
#include <vector>

#include "nj/core/error.hpp"

namespace nj {

template <typename T>
struct RowsView {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  T* row(std::int64_t r) const { return data + r * cols; }
  std::int64_t size() const { return rows * cols; }
  RowsView slice(std::int64_t first, std::int64_t count) const { return {data + first * cols, count, cols}; }
  operator RowsView<const T>() const { return {data, rows, cols}; }  // NOLINT(google-explicit-constructor)
};
using Rows = RowsView<float>;
using ConstRows = RowsView<const float>;

class Matrix {
 public:
  Matrix() = default;
  Matrix(std::int64_t rows, std::int64_t cols, float fill = 0.0F)
      : rows_(rows), cols_(cols), data_(static_cast<std::size_t>(rows * cols), fill) {
    NJ_EXPECTS(rows >= 0 && cols >= 0, "negative matrix shape {}x{}", rows, cols);
  }

  // Takes ownership of row-major values (rows × cols of them).
  Matrix(std::int64_t rows, std::int64_t cols, std::vector<float>&& values)
      : rows_(rows), cols_(cols), data_(std::move(values)) {
    NJ_EXPECTS(rows >= 0 && cols >= 0 && static_cast<std::int64_t>(data_.size()) == rows * cols,
               "{} values for a {}x{} matrix", data_.size(), rows, cols);
  }

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t size() const { return rows_ * cols_; }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  float* row(std::int64_t r) { return data_.data() + r * cols_; }
  const float* row(std::int64_t r) const { return data_.data() + r * cols_; }
  float& operator()(std::int64_t r, std::int64_t c) { return data_[static_cast<std::size_t>(r * cols_ + c)]; }
  float operator()(std::int64_t r, std::int64_t c) const { return data_[static_cast<std::size_t>(r * cols_ + c)]; }
  std::span<float> span() { return data_; }
  std::span<const float> span() const { return data_; }

  Rows view() { return {data_.data(), rows_, cols_}; }
  ConstRows view() const { return {data_.data(), rows_, cols_}; }
  void fill(float value) { std::fill(data_.begin(), data_.end(), value); }

 private:
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
  std::vector<float> data_;
};

}  // namespace nj
