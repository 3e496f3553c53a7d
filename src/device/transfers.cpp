#include "nj/device/transfers.hpp"

#include <algorithm>

namespace nj {
namespace {

void check_rows(std::int64_t host_rows, std::int64_t listed, std::int64_t device_rows, std::int64_t host_cols,
                std::int64_t device_cols) {
  NJ_EXPECTS((listed > 0 ? listed : std::min(host_rows, device_rows)) == device_rows && host_cols == device_cols &&
                 (listed > 0 || host_rows >= device_rows),
             "{} rows of {} host rows of width {} for {} device rows of width {}", listed, host_rows, host_cols,
             device_rows, device_cols);
}

}  // namespace

void Transfers::upload(ConstRows host, std::span<const vid_t> rows, DeviceRows dst) {
  device_.synchronize(staged_);
  staged_ = start_upload(host, rows, dst, staging_);
  device_.wait(Stream::kCompute, staged_);
}

Event Transfers::start_upload(ConstRows host, std::span<const vid_t> rows, DeviceRows dst,
                              PinnedArray<std::byte>& staging) {
  check_rows(host.rows, static_cast<std::int64_t>(rows.size()), dst.rows, host.cols, dst.cols);
  h2d_row_bytes_ += dst.bytes();
  if (!device_.moves_data()) {
    order_after_kernels();
    return device_.record(Stream::kHostToDevice);
  }
  auto* packed = reinterpret_cast<float*>(staging.reserve(dst.bytes()));
  if (rows.empty()) {
    std::copy(host.data, host.data + dst.size(), packed);
  } else {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const float* row = host.row(rows[i]);
      std::copy(row, row + host.cols, packed + i * static_cast<std::size_t>(host.cols));
    }
  }
  order_after_kernels();
  return nj::upload(device_, dst, ConstRows{packed, dst.rows, dst.cols});
}

void Transfers::download(ConstDeviceRows src, Rows host, std::span<const vid_t> rows) {
  check_rows(host.rows, static_cast<std::int64_t>(rows.size()), src.rows, host.cols, src.cols);
  d2h_row_bytes_ += src.bytes();
  if (!device_.moves_data()) return;
  auto* packed = reinterpret_cast<float*>(reuse_staging(src.bytes()));
  device_.wait(Stream::kDeviceToHost, device_.record(Stream::kCompute));
  device_.synchronize(nj::download(device_, Rows{packed, src.rows, src.cols}, src));
  if (rows.empty()) {
    std::copy(packed, packed + src.size(), host.data);
  } else {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const float* row = packed + i * static_cast<std::size_t>(host.cols);
      std::copy(row, row + host.cols, host.row(rows[i]));
    }
  }
}

}  // namespace nj
