#include <utility>

#include "nj/device/device.hpp"

namespace nj {

namespace {
constexpr auto kFloatBytes = static_cast<std::int64_t>(sizeof(float));
}  // namespace

DeviceRows::DeviceRows(Device& device, std::int64_t rows, std::int64_t cols, std::string_view what)
    : device_(&device), rows_(rows), cols_(cols) {
  NJ_EXPECTS(rows >= 0 && cols >= 0, "negative device rows shape {}x{} for {}", rows, cols, what);
  NJ_EXPECTS(cols == 0 || rows <= kUnlimited / kFloatBytes / cols, "device rows {}x{} for {} overflow", rows, cols,
             what);
  data_ = static_cast<float*>(device.allocate(bytes(), what));
}

DeviceRows::DeviceRows(DeviceRows&& other) noexcept
    : device_(std::exchange(other.device_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      rows_(std::exchange(other.rows_, 0)),
      cols_(std::exchange(other.cols_, 0)) {}

DeviceRows& DeviceRows::operator=(DeviceRows&& other) noexcept {
  if (this != &other) {
    if (device_ != nullptr) device_->deallocate(data_);
    device_ = std::exchange(other.device_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    rows_ = std::exchange(other.rows_, 0);
    cols_ = std::exchange(other.cols_, 0);
  }
  return *this;
}

DeviceRows::~DeviceRows() {
  if (device_ != nullptr) device_->deallocate(data_);
}

CopyTicket DeviceRows::upload(ConstRows host, std::int64_t first_row) {
  check_rows(first_row, host.rows, host.cols);
  return device_->copy_to_device(data_ + first_row * cols_, host.data, host.size() * kFloatBytes);
}

CopyTicket DeviceRows::download(Rows host, std::int64_t first_row) const {
  check_rows(first_row, host.rows, host.cols);
  return device_->copy_to_host(host.data, data_ + first_row * cols_, host.size() * kFloatBytes);
}

void DeviceRows::check_rows(std::int64_t first_row, std::int64_t count, std::int64_t cols) const {
  NJ_EXPECTS(device_ != nullptr, "copy of rows to or from an empty DeviceRows");
  NJ_EXPECTS(cols == cols_, "copying rows of {} columns to or from device rows of {} columns", cols, cols_);
  NJ_EXPECTS(first_row >= 0 && count >= 0 && first_row + count <= rows_,
             "rows [{}, {}) are outside the device's {} rows", first_row, first_row + count, rows_);
}

}  // namespace nj
