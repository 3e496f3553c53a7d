#pragma once
// Rows the subgraph executor keeps on the host. They start as zeros without being written (calloc): a page no row
// has reached yet is not resident, so what a run holds grows only as its steps reach the rows, and a replay on the
// planning device (which moves no rows) holds none of them.
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "nj/core/error.hpp"
#include "nj/core/matrix.hpp"

namespace nj {

class HostRows {
 public:
  HostRows() = default;
  HostRows(std::int64_t rows, std::int64_t cols) : rows_(rows), cols_(cols) {
    NJ_EXPECTS(rows >= 0 && cols >= 0, "negative host rows {}x{}", rows, cols);
    if (rows * cols == 0) return;
    data_.reset(static_cast<float*>(std::calloc(static_cast<std::size_t>(rows * cols), sizeof(float))));
    if (!data_) throw std::bad_alloc();
  }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  // The buffer's first rows() * cols rows of `cols` floats each: a buffer shared by rows of several widths.
  Rows view(std::int64_t cols) const {
    NJ_EXPECTS(cols <= cols_, "rows of {} floats in a buffer of rows of {}", cols, cols_);
    return {data_.get(), rows_, cols};
  }
  Rows view() const { return view(cols_); }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
};

}  // namespace nj
