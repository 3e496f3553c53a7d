#include "nj/device/transfers.hpp"

#include <omp.h>

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

// Row from_rows[i] of `from` (row i where the list is empty) to row to_rows[i] of `to`, for each of to.rows rows:
// packing rows into staging or unpacking them, on the host's threads where there are enough bytes.
void copy_listed_rows(ConstRows from, std::span<const vid_t> from_rows, std::span<const vid_t> to_rows, Rows to) {
  const auto cols = static_cast<std::size_t>(to.cols);
#pragma omp parallel for schedule(static) if (to.rows * to.cols > (std::int64_t{1} << 18) && !omp_in_parallel())
  for (std::int64_t i = 0; i < to.rows; ++i) {
    const float* row = from.data + static_cast<std::size_t>(from_rows.empty() ? i : from_rows[i]) * cols;
    std::copy(row, row + cols, to.data + static_cast<std::size_t>(to_rows.empty() ? i : to_rows[i]) * cols);
  }
}

// Rows of `cols` floats that one piece of `piece_bytes` holds, at least one.
std::int64_t rows_per_piece(std::int64_t cols, std::int64_t piece_bytes) {
  return std::max<std::int64_t>(1, piece_bytes / std::max<std::int64_t>(1, cols * std::int64_t{sizeof(float)}));
}

// Runs copy(host_piece, rows_piece, device_first, count) over the pieces of a copy of `count` device rows, where
// host rows `rows` (empty: the first ones of `host`) go with device rows device_first onwards.
template <typename Host, typename Copy>
void in_pieces(Host host, std::span<const vid_t> rows, std::int64_t count, std::int64_t piece_bytes, Copy&& copy) {
  const std::int64_t piece = rows_per_piece(host.cols, piece_bytes);
  for (std::int64_t first = 0; first < count; first += piece) {
    const std::int64_t n = std::min(piece, count - first);
    if (rows.empty()) {
      copy(Host{host.row(first), host.rows - first, host.cols}, rows, first, n);
    } else {
      copy(host, rows.subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(n)), first, n);
    }
  }
}

}  // namespace

void Transfers::upload(ConstRows host, std::span<const vid_t> rows, DeviceRows dst) {
  check_rows(host.rows, static_cast<std::int64_t>(rows.size()), dst.rows, host.cols, dst.cols);
  if (dst.rows > rows_per_piece(dst.cols, piece_bytes_)) {
    in_pieces(host, rows, dst.rows, piece_bytes_,
              [&](ConstRows h, std::span<const vid_t> r, std::int64_t first, std::int64_t n) {
                upload(h, r, DeviceRows{dst.data + first * dst.cols, n, dst.cols});
              });
    return;
  }
  if (const std::optional<std::int64_t> first = direct_first_row(host.rows, rows, dst.rows)) {
    tally(h2d_, Traffic::kRows, dst.bytes());
    if (!device_.moves_data()) return;
    order_after_kernels();
    const Event copied = nj::upload(device_, dst, ConstRows{host.row(*first), dst.rows, dst.cols});
    device_.synchronize(copied);  // the host rows may change once this returns
    device_.wait(Stream::kCompute, copied);
    return;
  }
  device_.synchronize(staged_);
  staged_ = start_upload(host, rows, dst, staging_);
  device_.wait(Stream::kCompute, staged_);
}

std::optional<std::int64_t> Transfers::direct_first_row(std::int64_t host_rows, std::span<const vid_t> rows,
                                                        std::int64_t count) const {
  if (!device_.copies_pageable_memory_directly() || count == 0) return std::nullopt;
  const std::optional<vid_t> first = rows.empty() ? std::optional<vid_t>(0) : consecutive_from(rows);
  if (!first || *first < 0 || *first + count > host_rows) return std::nullopt;
  return *first;
}

Event Transfers::start_upload(ConstRows host, std::span<const vid_t> rows, DeviceRows dst,
                              PinnedArray<std::byte>& staging) {
  check_rows(host.rows, static_cast<std::int64_t>(rows.size()), dst.rows, host.cols, dst.cols);
  tally(h2d_, Traffic::kRows, dst.bytes());
  note_staged(dst.bytes());
  if (!device_.moves_data()) {
    order_after_kernels();
    return device_.record(Stream::kHostToDevice);
  }
  auto* packed = reinterpret_cast<float*>(staging.reserve(dst.bytes()));
  copy_listed_rows(ConstRows{host.data, dst.rows, host.cols}, rows, {}, Rows{packed, dst.rows, dst.cols});
  order_after_kernels();
  return nj::upload(device_, dst, ConstRows{packed, dst.rows, dst.cols});
}

void Transfers::download(ConstDeviceRows src, Rows host, std::span<const vid_t> rows) {
  check_rows(host.rows, static_cast<std::int64_t>(rows.size()), src.rows, host.cols, src.cols);
  if (src.rows > rows_per_piece(src.cols, piece_bytes_)) {
    in_pieces(host, rows, src.rows, piece_bytes_,
              [&](Rows h, std::span<const vid_t> r, std::int64_t first, std::int64_t n) {
                download(ConstDeviceRows{src.data + first * src.cols, n, src.cols}, h, r);
              });
    return;
  }
  tally(d2h_, Traffic::kRows, src.bytes());
  const std::optional<std::int64_t> first = direct_first_row(host.rows, rows, src.rows);
  if (!first) note_staged(src.bytes());
  if (!device_.moves_data()) return;
  device_.wait(Stream::kDeviceToHost, device_.record(Stream::kCompute));
  if (first) {
    device_.synchronize(nj::download(device_, Rows{host.row(*first), src.rows, src.cols}, src));
    return;
  }
  auto* packed = reinterpret_cast<float*>(reuse_staging(src.bytes()));
  device_.synchronize(nj::download(device_, Rows{packed, src.rows, src.cols}, src));
  copy_listed_rows(ConstRows{packed, src.rows, src.cols}, {}, rows, Rows{host.data, src.rows, host.cols});
}

}  // namespace nj
