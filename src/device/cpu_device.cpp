// The CPU device: "device memory" is 64-byte aligned host memory whose live total is held to the budget, and
// the copy engine is one thread draining a FIFO of memcpy's, so copies overlap the caller's compute the way a
// CUDA copy stream does. A caller that waits for a copy the engine has not started runs the queue's copies
// itself, in order, instead of handing each one to the engine and sleeping until it is done: a synchronous
// copy then costs no thread handoff, while copies issued ahead (prefetches) still overlap compute. The checks on every
// copy (device range inside one live allocation, host range outside device memory) catch on the CPU the mistakes that
// would be illegal-address faults on a GPU.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include "nj/device/device.hpp"

namespace nj {
namespace {

// A cache line, and what vectorized kernels want; cudaMalloc gives at least this too.
constexpr std::align_val_t kAlignment{64};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::uintptr_t address(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(std::int64_t budget_bytes)
      : budget_(budget_bytes <= 0 ? kUnlimited : budget_bytes), engine_([this] { run_engine(); }) {}

  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  ~CpuDevice() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    work_.notify_one();
    engine_.join();
    if (failure_) {
      try {
        std::rethrow_exception(failure_);
      } catch (const std::exception& e) {
        spdlog::warn("device '{}' destroyed with an unobserved copy failure: {}", name(), e.what());
      }
    }
    if (!allocations_.empty()) {
      spdlog::warn("device '{}' destroyed with {} live allocations ({} bytes); freeing them", name(),
                   allocations_.size(), in_use_);
      for (const auto& [start, allocation] : allocations_) {
        ::operator delete(reinterpret_cast<void*>(start), kAlignment);
      }
    }
  }

  std::string_view name() const override { return "cpu"; }
  std::int64_t budget_bytes() const override { return budget_; }

  void* allocate(std::int64_t bytes, std::string_view what) override {
    NJ_EXPECTS(bytes >= 0, "negative device allocation of {} bytes for {}", bytes, what);
    if (bytes == 0) return nullptr;
    std::lock_guard lock(mutex_);
    if (bytes > budget_ - in_use_) {
      throw OutOfBudget(
          fmt::format("device memory budget exceeded: {} needs {} bytes, but {} of the {} budgeted "
                      "bytes are in use ({} free)",
                      what, bytes, in_use_, budget_, budget_ - in_use_));
    }
    void* ptr = ::operator new(static_cast<std::size_t>(bytes), kAlignment);
    allocations_.emplace(address(ptr), Allocation{bytes, 0});
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return ptr;
  }

  void deallocate(void* ptr) noexcept override {
    if (ptr == nullptr) return;
    std::unique_lock lock(mutex_);
    // A pointer this device did not hand out is a bug that would corrupt the accounting; in a noexcept
    // function the check terminates, with its message.
    auto it = allocations_.find(address(ptr));
    NJ_EXPECTS(it != allocations_.end(), "deallocate of {}, which is not a live allocation of this device",
               fmt::ptr(ptr));
    if (it->second.last_use > completed_) {
      block_until(lock, it->second.last_use);
      it = allocations_.find(address(ptr));
      NJ_EXPECTS(it != allocations_.end(), "{} deallocated twice at once", fmt::ptr(ptr));
    }
    in_use_ -= it->second.bytes;
    allocations_.erase(it);
    lock.unlock();
    ::operator delete(ptr, kAlignment);
  }

  CopyTicket copy_to_device(void* device_dst, const void* host_src, std::int64_t bytes) override {
    return issue(true, device_dst, host_src, bytes);
  }
  CopyTicket copy_to_host(void* host_dst, const void* device_src, std::int64_t bytes) override {
    return issue(false, host_dst, device_src, bytes);
  }

  bool is_complete(CopyTicket ticket) const override {
    std::lock_guard lock(mutex_);
    NJ_EXPECTS(ticket <= issued_, "copy ticket {} was never issued (last: {})", ticket, issued_);
    return completed_ >= ticket;
  }

  void wait(CopyTicket ticket) override {
    std::unique_lock lock(mutex_);
    NJ_EXPECTS(ticket <= issued_, "wait for copy ticket {}, which was never issued (last: {})", ticket, issued_);
    block_until(lock, ticket);
    rethrow_failure();
  }

  void synchronize() override {
    std::unique_lock lock(mutex_);
    block_until(lock, issued_);
    rethrow_failure();
  }

  DeviceStats stats() const override {
    std::lock_guard lock(mutex_);
    DeviceStats s = transfers_;
    s.in_use_bytes = in_use_;
    s.peak_bytes = peak_;
    return s;
  }

  void reset_transfer_stats() override {
    std::lock_guard lock(mutex_);
    transfers_ = DeviceStats{};
    peak_ = in_use_;
  }

 private:
  struct Allocation {
    std::int64_t bytes = 0;
    CopyTicket last_use = 0;  // the latest copy touching it, which deallocate waits for
  };
  struct PendingCopy {
    CopyTicket ticket = 0;
    void* dst = nullptr;
    const void* src = nullptr;
    std::int64_t bytes = 0;
  };

  CopyTicket issue(bool to_device, void* dst, const void* src, std::int64_t bytes) {
    const char* direction = to_device ? "to device" : "to host";
    NJ_EXPECTS(bytes >= 0, "copy {} of a negative size ({} bytes)", direction, bytes);
    const void* device_ptr = to_device ? static_cast<const void*>(dst) : src;
    const void* host_ptr = to_device ? src : static_cast<const void*>(dst);
    std::unique_lock lock(mutex_);
    if (bytes == 0) return issued_;
    Allocation* allocation = containing_allocation(device_ptr, bytes);
    NJ_EXPECTS(allocation != nullptr, "copy {}: the device range of {} bytes at {} is not inside one live allocation",
               direction, bytes, fmt::ptr(device_ptr));
    NJ_EXPECTS(host_ptr != nullptr && !overlaps_device_memory(host_ptr, bytes),
               "copy {}: the host range of {} bytes at {} is null or in device memory", direction, bytes,
               fmt::ptr(host_ptr));
    const CopyTicket ticket = ++issued_;
    allocation->last_use = ticket;
    queue_.push_back({ticket, dst, src, bytes});
    if (to_device) {
      transfers_.h2d_bytes += bytes;
      ++transfers_.h2d_copies;
    } else {
      transfers_.d2h_bytes += bytes;
      ++transfers_.d2h_copies;
    }
    lock.unlock();
    work_.notify_one();
    return ticket;
  }

  // The allocation holding all of [ptr, ptr + bytes), or nullptr.
  Allocation* containing_allocation(const void* ptr, std::int64_t bytes) {
    auto it = allocations_.upper_bound(address(ptr));
    if (it == allocations_.begin()) return nullptr;
    --it;
    const bool inside =
        address(ptr) + static_cast<std::uintptr_t>(bytes) <= it->first + static_cast<std::uintptr_t>(it->second.bytes);
    return inside ? &it->second : nullptr;
  }

  // Allocations are disjoint, so only the last one starting before the range's end can reach into it.
  bool overlaps_device_memory(const void* ptr, std::int64_t bytes) const {
    auto it = allocations_.lower_bound(address(ptr) + static_cast<std::uintptr_t>(bytes));
    if (it == allocations_.begin()) return false;
    --it;
    return it->first + static_cast<std::uintptr_t>(it->second.bytes) > address(ptr);
  }

  void block_until(std::unique_lock<std::mutex>& lock, CopyTicket ticket) {
    if (completed_ >= ticket) return;
    const auto start = Clock::now();
    while (completed_ < ticket) {
      if (!copying_ && !queue_.empty()) {
        run_oldest(lock);
      } else {
        done_.wait(lock);
      }
    }
    transfers_.wait_seconds += seconds_since(start);
    if (!copying_ && !queue_.empty()) work_.notify_one();  // the engine may have slept while this caller copied
  }

  void rethrow_failure() {
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

  // Runs the oldest queued copy on the calling thread (the engine or a waiting caller), outside the lock so
  // that callers can allocate, issue and query meanwhile; one copy runs at a time, in ticket order. A failed
  // copy still completes its ticket (later tickets must not hang); its error waits in failure_.
  void run_oldest(std::unique_lock<std::mutex>& lock) {
    const PendingCopy copy = queue_.front();
    queue_.pop_front();
    copying_ = true;
    lock.unlock();
    const auto start = Clock::now();
    std::exception_ptr error;
    try {
      std::memcpy(copy.dst, copy.src, static_cast<std::size_t>(copy.bytes));
    } catch (...) {
      error = std::current_exception();
    }
    const double seconds = seconds_since(start);
    lock.lock();
    copying_ = false;
    transfers_.copy_seconds += seconds;
    if (error && !failure_) failure_ = error;
    completed_ = copy.ticket;
    done_.notify_all();
  }

  void run_engine() {
    std::unique_lock lock(mutex_);
    for (;;) {
      work_.wait(lock, [this] { return !copying_ && (stopping_ || !queue_.empty()); });
      if (queue_.empty()) return;
      run_oldest(lock);
    }
  }

  const std::int64_t budget_;
  mutable std::mutex mutex_;
  std::condition_variable work_;                      // the engine waits here for copies or shutdown
  std::condition_variable done_;                      // callers wait here for completions
  std::map<std::uintptr_t, Allocation> allocations_;  // by start address, for range lookups
  std::int64_t in_use_ = 0;
  std::int64_t peak_ = 0;
  DeviceStats transfers_;  // its allocation fields are unused: in_use_ and peak_ hold them
  std::deque<PendingCopy> queue_;
  CopyTicket issued_ = 0;
  CopyTicket completed_ = 0;
  std::exception_ptr failure_;
  bool copying_ = false;  // a copy is running (on the engine or a waiting caller)
  bool stopping_ = false;
  std::thread engine_;  // last: it starts running in the constructor and needs everything above
};

}  // namespace

std::unique_ptr<Device> make_cpu_device(std::int64_t budget_bytes) { return std::make_unique<CpuDevice>(budget_bytes); }

}  // namespace nj
