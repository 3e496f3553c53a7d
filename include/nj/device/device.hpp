#pragma once
// A compute device seen by the memory-managed executor: memory under a hard byte budget, and one in-order copy
// engine that moves bytes between host and device while the host computes. The CPU device emulates one in
// host memory (see docs/device.md); the CUDA device implements the same contract with a cudaMalloc'd arena,
// page-locked host memory and cudaMemcpyAsync on a copy stream, so code written against it runs on both.
//
// Device memory is only guaranteed to be reachable by copies and by the backend's kernels: the host must not
// dereference it (the CPU device would let it; the CUDA device would not).
// Every member is thread-safe.
#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>

#include "nj/core/bytes.hpp"
#include "nj/core/matrix.hpp"

namespace nj {

struct DeviceStats {
  // Counted when a copy is issued; zero-byte copies are not counted.
  std::int64_t h2d_bytes = 0;
  std::int64_t d2h_bytes = 0;
  std::int64_t h2d_copies = 0;
  std::int64_t d2h_copies = 0;
  // Sum of the live allocations' requested sizes, and its high-water mark.
  std::int64_t in_use_bytes = 0;
  std::int64_t peak_bytes = 0;
  double copy_seconds = 0;  // time spent copying (by the copy engine, or by a caller waiting for the copy)
  double wait_seconds = 0;  // time callers spent blocked in wait(), synchronize() or deallocate()
};

// Identifies an issued copy. Tickets increase by one per copy, starting at 1, and complete in issue order, so
// waiting for one waits for every copy issued before it; ticket 0 (nothing issued) is always complete.
using CopyTicket = std::uint64_t;

class Device {
 public:
  // Completes every issued copy, then frees the allocations still live.
  virtual ~Device() = default;
  virtual std::string_view name() const = 0;
  // kUnlimited when the device has no budget.
  virtual std::int64_t budget_bytes() const = 0;

  // Device memory, charged against the budget at exactly `bytes`. A request that would take the bytes in use
  // past the budget throws nj::OutOfBudget naming `what`, the request, the bytes in use and the budget.
  // Zero bytes yield nullptr.
  virtual void* allocate(std::int64_t bytes, std::string_view what) = 0;
  // First waits for the issued copies that touch `ptr`, so buffers can be freed without waiting on them
  // explicitly. nullptr is ignored.
  virtual void deallocate(void* ptr) noexcept = 0;

  // Asynchronous copies on the device's single in-order copy engine. The range on the device side must lie
  // inside one live allocation. The host buffer must stay valid (and, as a source, unchanged) until the ticket
  // completes, and a destination must not be read before then. A zero-byte copy issues nothing and returns
  // the latest ticket.
  virtual CopyTicket copy_to_device(void* device_dst, const void* host_src, std::int64_t bytes) = 0;
  virtual CopyTicket copy_to_host(void* host_dst, const void* device_src, std::int64_t bytes) = 0;
  // Non-blocking: whether that copy (and so every one before it) has completed.
  virtual bool is_complete(CopyTicket ticket) const = 0;
  // Blocks until that copy (and every one before it) has completed. A copy that failed on the engine makes
  // the next wait() or synchronize() throw its error, once.
  virtual void wait(CopyTicket ticket) = 0;
  // Blocks until every issued copy has completed; rethrows like wait().
  virtual void synchronize() = 0;

  virtual DeviceStats stats() const = 0;
  // Zeroes the byte, copy and time counters; in_use_bytes stays and peak_bytes restarts from it.
  virtual void reset_transfer_stats() = 0;
};

// Float rows (rows × cols, row-major, no padding) in device memory, freed with the object.
class DeviceRows {
 public:
  DeviceRows() = default;
  // Throws nj::OutOfBudget, naming `what`, when the rows do not fit the device's budget.
  DeviceRows(Device& device, std::int64_t rows, std::int64_t cols, std::string_view what);
  DeviceRows(const DeviceRows&) = delete;
  DeviceRows& operator=(const DeviceRows&) = delete;
  DeviceRows(DeviceRows&& other) noexcept;
  DeviceRows& operator=(DeviceRows&& other) noexcept;
  ~DeviceRows();

  // Views of device memory: for copies and kernels, not for the host to dereference.
  Rows view() { return {data_, rows_, cols_}; }
  ConstRows view() const { return {data_, rows_, cols_}; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t bytes() const { return rows_ * cols_ * static_cast<std::int64_t>(sizeof(float)); }

  // Issues the copy of `host` into rows [first_row, first_row + host.rows), or of those rows into `host`.
  CopyTicket upload(ConstRows host, std::int64_t first_row = 0);
  CopyTicket download(Rows host, std::int64_t first_row = 0) const;

 private:
  void check_rows(std::int64_t first_row, std::int64_t count, std::int64_t cols) const;

  Device* device_ = nullptr;
  float* data_ = nullptr;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
};

// A device emulated in host memory, with a copy-engine thread; budget_bytes <= 0 or kUnlimited: no budget.
std::unique_ptr<Device> make_cpu_device(std::int64_t budget_bytes);

}  // namespace nj
