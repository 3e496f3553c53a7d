#pragma once
// A compute device as the executors see a GPU: memory under a byte budget, and three streams of work that run
// concurrently and are ordered only by events, as CUDA streams are:
//   - compute, where the backend's kernels run;
//   - host-to-device and device-to-host, one copy engine each, so loads and write-backs overlap each other
//     and the kernels.
// The CPU device (make_cpu_device) emulates this in host memory and checks the contract as a GPU would fail
// it (docs/device.md); the CUDA device implements the same contract with one cudaMalloc'd arena, page-locked
// host memory and cudaMemcpyAsync on two copy streams, so code written against it runs on both.
//
// Every member of the CPU and CUDA devices is thread-safe (the planning device is for one thread).
#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include "nj/core/bytes.hpp"
#include "nj/core/matrix.hpp"
#include "nj/device/device_view.hpp"

namespace nj {

enum class Stream : std::uint8_t { kCompute = 0, kHostToDevice = 1, kDeviceToHost = 2 };
inline constexpr std::size_t kStreams = 3;
const char* to_string(Stream stream);

// A point in one stream's work: everything issued to `stream` before it, and everything on the other streams
// that this work was ordered after. position[s] counts operations issued to stream s; an event has completed
// when its stream has completed position[stream] operations.
struct Event {
  Stream stream = Stream::kCompute;
  std::array<std::uint64_t, kStreams> position{};
};

// How a kernel touches device memory (what the emulation orders it against).
enum class Access : std::uint8_t { kRead, kWrite };

struct DeviceStats {
  // Counted when a copy is issued; zero-byte copies are not counted.
  std::int64_t h2d_bytes = 0;
  std::int64_t d2h_bytes = 0;
  std::int64_t h2d_copies = 0;
  std::int64_t d2h_copies = 0;
  std::int64_t pageable_copies = 0;  // copies whose host side is not page-locked (synchronous on a GPU)
  // Requested bytes of the live allocations, and their high-water mark: what the budget caps.
  std::int64_t in_use_bytes = 0;
  std::int64_t peak_bytes = 0;
  // What the arena held at its highest (peak_bytes plus alignment and fragmentation).
  std::int64_t peak_footprint_bytes = 0;
  std::int64_t pinned_bytes = 0;  // live page-locked host memory
  double copy_seconds = 0;        // time the copy engines spent copying
  double wait_seconds = 0;        // time the host spent blocked in synchronize(), a compute-stream wait or deallocate()
};

class Device {
 public:
  // Completes all issued work, then frees the allocations still live.
  virtual ~Device() = default;
  virtual std::string_view name() const = 0;
  // kUnlimited when the device has no budget.
  virtual std::int64_t budget_bytes() const = 0;
  // Whether copies move data. The planning device only forecasts memory: Transfers then neither gathers rows
  // into staging nor scatters them into host rows, which a replay on it leaves as they were.
  virtual bool moves_data() const { return true; }
  // Whether a copy from or into pageable host memory costs what one through page-locked staging does (the CPU
  // device, where each is one memcpy): Transfers then copies a block of host rows straight, rather than add a
  // copy into staging. On a GPU a pageable copy is synchronous and slower.
  virtual bool copies_pageable_memory_directly() const { return false; }

  // ---- memory ----
  // Device memory, charged against the budget at exactly `bytes` and placed in the device's arena. A request
  // past the budget, or one the fragmented arena cannot place, throws nj::OutOfBudget naming `what`. Zero
  // bytes yield nullptr.
  virtual void* allocate(std::int64_t bytes, std::string_view what) = 0;
  // Ordered on the compute stream, as CUDA's stream-ordered allocator: copies still touching the buffer are
  // waited for, and the memory may be handed out again at once, to kernels ordered after the ones issued so
  // far; a copy into a new buffer must first wait for the compute stream (record, then wait). nullptr is
  // ignored.
  virtual void deallocate(void* ptr) noexcept = 0;
  // Page-locked host memory, what asynchronous copies need on the host side. Not charged to the budget.
  virtual void* allocate_pinned(std::int64_t bytes) = 0;
  virtual void deallocate_pinned(void* ptr) noexcept = 0;
  // Frees the page-locked blocks kept for reuse once freed: where the copies that used them will not come again (a
  // run's one-time uploads), so that the host does not hold them through the run. On CUDA, cudaFreeHost waits for
  // the whole device: call it where nothing is in flight (no exchange, no prefetch).
  virtual void free_kept_pinned() {}

  // ---- work on streams ----
  // Asynchronous copies, each on its direction's stream, after everything issued there before. The device
  // range must lie inside one live allocation; the host range must not be device memory and must stay valid
  // (and, as a source, unchanged) until the returned event completes. A zero-byte copy issues nothing.
  virtual Event copy_to_device(void* device_dst, const void* host_src, std::int64_t bytes) = 0;
  virtual Event copy_to_host(void* host_dst, const void* device_src, std::int64_t bytes) = 0;
  // An event after everything issued to `stream` so far.
  virtual Event record(Stream stream) = 0;
  // Work issued to `waiter` from now on runs after `event`. Waiting on the compute stream blocks the host
  // until the event completes where the compute stream is the host itself (the CPU device).
  virtual void wait(Stream waiter, const Event& event) = 0;
  virtual bool is_complete(const Event& event) = 0;
  // Blocks the host until the event has completed. An asynchronous error of the device (on CUDA, a failed
  // copy or kernel) is thrown here.
  virtual void synchronize(const Event& event) = 0;
  // Blocks until everything issued on every stream has completed; throws like the other form.
  virtual void synchronize() = 0;

  // ---- what the backend reports ----
  // A kernel on the compute stream touches `bytes` at `ptr` (nullptr with 0 bytes is nothing). The CPU device
  // checks that the range lies in one live allocation and that the kernel is ordered after every copy that
  // writes it or reads what the kernel writes; the CUDA device does nothing.
  virtual void use(const void* ptr, std::int64_t bytes, Access access, std::string_view what) = 0;
  // The host is about to read or write `bytes` at `ptr` as host memory (an exchange buffer, a loss): throws
  // when any of it is device memory.
  virtual void check_host_access(const void* ptr, std::int64_t bytes, std::string_view what) const = 0;

  virtual DeviceStats stats() const = 0;
  // Zeroes the byte, copy and time counters; the peaks restart from the memory in use.
  virtual void reset_transfer_stats() = 0;
};

// A device emulated in host memory; budget_bytes <= 0 or kUnlimited: no budget.
std::unique_ptr<Device> make_cpu_device(std::int64_t budget_bytes);

// ---- owning buffers ----

// `size` elements of T in device memory, freed (stream-ordered) with the object.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Device& device, std::int64_t size, std::string_view what)
      : device_(&device), data_(static_cast<T*>(device.allocate(checked_bytes(size, what), what))), size_(size) {}
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& other) noexcept { *this = std::move(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
      release();
      device_ = std::exchange(other.device_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~DeviceArray() { release(); }

  DeviceSpan<T> view() { return {data_, size_}; }
  DeviceSpan<const T> view() const { return {data_, size_}; }
  std::int64_t size() const { return size_; }
  std::int64_t bytes() const { return size_ * static_cast<std::int64_t>(sizeof(T)); }

 private:
  static std::int64_t checked_bytes(std::int64_t size, std::string_view what) {
    NJ_EXPECTS(size >= 0 && size <= kUnlimited / static_cast<std::int64_t>(sizeof(T)),
               "device array of {} elements for {}", size, what);
    return size * static_cast<std::int64_t>(sizeof(T));
  }
  void release() noexcept {
    if (device_ != nullptr) device_->deallocate(data_);
  }

  Device* device_ = nullptr;
  T* data_ = nullptr;
  std::int64_t size_ = 0;
};

// Float rows (rows × cols, row-major) in device memory, freed with the object.
class DeviceMatrix {
 public:
  DeviceMatrix() = default;
  // Throws nj::OutOfBudget, naming `what`, when the rows do not fit the device's budget.
  DeviceMatrix(Device& device, std::int64_t rows, std::int64_t cols, std::string_view what);
  DeviceMatrix(DeviceMatrix&& other) noexcept { *this = std::move(other); }
  DeviceMatrix& operator=(DeviceMatrix&& other) noexcept {
    if (this != &other) {
      values_ = std::move(other.values_);
      rows_ = std::exchange(other.rows_, 0);
      cols_ = std::exchange(other.cols_, 0);
    }
    return *this;
  }
  ~DeviceMatrix() = default;

  DeviceRows view() { return {values_.view().data, rows_, cols_}; }
  ConstDeviceRows view() const { return {values_.view().data, rows_, cols_}; }
  // The first rows · cols values as rows of `cols`: a buffer that tensors of different widths take turns in.
  DeviceRows view(std::int64_t rows, std::int64_t cols) {
    NJ_EXPECTS(rows >= 0 && cols >= 0 && rows * cols <= rows_ * cols_, "{} rows of {} in a buffer of {} rows of {}",
               rows, cols, rows_, cols_);
    return {values_.view().data, rows, cols};
  }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t bytes() const { return values_.bytes(); }

 private:
  DeviceArray<float> values_;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
};

// Page-locked host memory for `size` elements of T, freed with the object; grows on demand (staging).
template <typename T>
class PinnedArray {
 public:
  explicit PinnedArray(Device& device) : device_(&device) {}
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  PinnedArray(PinnedArray&& other) noexcept
      : device_(other.device_),
        data_(std::exchange(other.data_, nullptr)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  PinnedArray& operator=(PinnedArray&&) = delete;
  ~PinnedArray() { device_->deallocate_pinned(data_); }

  // At least `size` elements; the contents are not kept when it grows. Any copy still using it must have
  // completed.
  T* reserve(std::int64_t size) {
    if (size > capacity_) {
      release();
      data_ = static_cast<T*>(device_->allocate_pinned(size * static_cast<std::int64_t>(sizeof(T))));
      capacity_ = size;
    }
    return data_;
  }
  T* data() const { return data_; }
  // Gives the memory back to the device. Any copy still using it must have completed.
  void release() {
    device_->deallocate_pinned(std::exchange(data_, nullptr));
    capacity_ = 0;
  }

 private:
  Device* device_;
  T* data_ = nullptr;
  std::int64_t capacity_ = 0;
};

// ---- typed copies: host views on one side, device views on the other ----

template <typename T>
Event upload(Device& device, DeviceSpan<T> dst, const T* host_src) {
  return device.copy_to_device(dst.data, host_src, dst.bytes());
}
template <typename T>
Event download(Device& device, std::remove_const_t<T>* host_dst, DeviceSpan<T> src) {
  return device.copy_to_host(host_dst, src.data, src.bytes());
}
inline Event upload(Device& device, DeviceRows dst, ConstRows host_src) {
  NJ_EXPECTS(dst.rows == host_src.rows && dst.cols == host_src.cols, "upload of {}x{} host rows into {}x{} device rows",
             host_src.rows, host_src.cols, dst.rows, dst.cols);
  return device.copy_to_device(dst.data, host_src.data, dst.bytes());
}
inline Event download(Device& device, Rows host_dst, ConstDeviceRows src) {
  NJ_EXPECTS(src.rows == host_dst.rows && src.cols == host_dst.cols,
             "download of {}x{} device rows into {}x{} host rows", src.rows, src.cols, host_dst.rows, host_dst.cols);
  return device.copy_to_host(host_dst.data, src.data, src.bytes());
}

}  // namespace nj
