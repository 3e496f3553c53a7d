// The CPU device: a GPU emulated in host memory, strict where a GPU would be wrong but lucky.
//   - Memory: a size-limited arena (arena.hpp) places every allocation, so the budget and fragmentation are the
//     ones a CUDA device with the same arena would see. Its offsets index one reserved host range, as a CUDA
//     device's index its one cudaMalloc (under AddressSanitizer each allocation is a host block of its own).
//   - Streams: the compute stream is the calling thread (kernels run when the backend is called); each copy
//     direction is a FIFO of copies and event waits, run in order by the host thread that waits for one of
//     them, with the OpenMP threads the kernels use (copies issued ahead are as done when the host needs them
//     as on a GPU, and on the CPU a thread of their own would only take cores from the kernels), or by the
//     direction's engine thread when someone polls for an event, as a GPU's copies progress unobserved.
//   - Ordering checks: every stream keeps a vector clock of what it is ordered after (record/wait merge them),
//     and every allocation the position of its last write and read on each stream. A kernel that touches a
//     buffer before it waited for the copy filling it, or a copy that reads a buffer before it waited for the
//     kernel writing it, throws, even when the copy happened to finish in time: on a GPU it would not always.
#include <omp.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nj/core/enum_names.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/device/arena.hpp"
#include "nj/device/device.hpp"

namespace nj {

const char* to_string(Stream stream) {
  static constexpr EnumNames<Stream, 3> kNames{"stream",
                                               {{{Stream::kCompute, "compute"},
                                                 {Stream::kHostToDevice, "host-to-device"},
                                                 {Stream::kDeviceToHost, "device-to-host"}}}};
  return kNames.name(stream);
}

namespace {

constexpr std::align_val_t kAlignment{kArenaAlignment};
constexpr auto kCompute = static_cast<std::size_t>(Stream::kCompute);
// A host thread splits a copy into pieces this large across its OpenMP threads.
constexpr std::int64_t kCopyPieceBytes = std::int64_t{1} << 20U;

using Clock = std::chrono::steady_clock;
using Positions = std::array<std::uint64_t, kStreams>;

std::uintptr_t address(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }

std::size_t index(Stream s) { return static_cast<std::size_t>(s); }

// Byte ranges by start address (allocations, or pinned blocks).
template <typename Value>
using RangeMap = std::map<std::uintptr_t, Value>;

// The entry whose range holds `ptr`, or end().
template <typename Map>
auto find_containing(Map& ranges, const void* ptr) {
  auto it = ranges.upper_bound(address(ptr));
  if (it == ranges.begin()) return ranges.end();
  --it;
  return address(ptr) < it->first + static_cast<std::uintptr_t>(it->second.bytes) ? it : ranges.end();
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// Host blocks of their own (page-locked staging, and device allocations where there is no HostRegion), kept for
// reuse once freed: handing a freed block out again instead of returning it to the operating system saves a page
// fault and a zeroed page per 4 KiB on every use. What is kept plus what is live never exceeds the most that was
// live at once since the kept blocks were last freed (free_kept). Under AddressSanitizer nothing is kept, so that a use
// after free is still reported.
class HostBlocks {
 public:
  HostBlocks() = default;
  HostBlocks(const HostBlocks&) = delete;
  HostBlocks& operator=(const HostBlocks&) = delete;
  ~HostBlocks() { free_kept(); }

  void* take(std::int64_t bytes) {
    std::vector<void*> evicted;
    {
      std::lock_guard lock(mutex_);
      if (const auto it = kept_.find(bytes); it != kept_.end()) {
        void* block = it->second;
        kept_.erase(it);
        kept_bytes_ -= bytes;
        live_bytes_ += bytes;
        return block;
      }
      // Room for a new block within the most ever live, the largest kept blocks going first.
      while (!kept_.empty() && live_bytes_ + kept_bytes_ + bytes > std::max(peak_live_bytes_, live_bytes_ + bytes)) {
        const auto largest = std::prev(kept_.end());
        kept_bytes_ -= largest->first;
        evicted.push_back(largest->second);
        kept_.erase(largest);
      }
      live_bytes_ += bytes;
      peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
    }
    for (void* block : evicted) ::operator delete(block, kAlignment);
    try {
      return ::operator new(static_cast<std::size_t>(bytes), kAlignment);
    } catch (...) {
      std::lock_guard lock(mutex_);
      live_bytes_ -= bytes;
      throw;
    }
  }

  // Frees the kept blocks; from now on, no more is kept than is live at once from here.
  void free_kept() {
    std::multimap<std::int64_t, void*> kept;
    {
      std::lock_guard lock(mutex_);
      kept.swap(kept_);
      kept_bytes_ = 0;
      peak_live_bytes_ = live_bytes_;
    }
    for (const auto& [bytes, block] : kept) ::operator delete(block, kAlignment);
  }

  void give_back(void* block, std::int64_t bytes) noexcept {
    {
      std::lock_guard lock(mutex_);
      live_bytes_ -= bytes;
      if (!kAddressSanitizer && live_bytes_ + kept_bytes_ + bytes <= peak_live_bytes_) {
        kept_.emplace(bytes, block);
        kept_bytes_ += bytes;
        return;
      }
    }
    ::operator delete(block, kAlignment);
  }

 private:
  std::mutex mutex_;
  std::multimap<std::int64_t, void*> kept_;  // by size
  std::int64_t kept_bytes_ = 0;
  std::int64_t live_bytes_ = 0;
  std::int64_t peak_live_bytes_ = 0;
};

// The host memory behind the arena's offsets: one range of address space, reserved without committing memory,
// whose pages the kernel provides as they are first touched. Since an epoch allocates the same sizes in the same
// order, the arena places them at the same offsets every epoch, so after the first one no copy or kernel meets a
// fresh page, whatever sizes follow each other (kept blocks of one's own serve only a request of their exact
// size). What stays resident is the arena's peak footprint, which is what the
// host-memory prediction counts for the emulated device. Under AddressSanitizer there is no region: separate
// blocks let it report a use after free.
class HostRegion {
 public:
  // A region of `bytes`, or none where the system refuses the reservation (strict overcommit).
  static std::optional<HostRegion> reserve(std::int64_t bytes) {
    if (kAddressSanitizer || bytes <= 0) return std::nullopt;
    void* base = ::mmap(nullptr, static_cast<std::size_t>(bytes), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return std::nullopt;
    return HostRegion(static_cast<std::byte*>(base), bytes);
  }
  HostRegion(HostRegion&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  HostRegion(const HostRegion&) = delete;
  HostRegion& operator=(const HostRegion&) = delete;
  HostRegion& operator=(HostRegion&&) = delete;
  ~HostRegion() {
    if (base_ != nullptr) ::munmap(base_, static_cast<std::size_t>(bytes_));
  }

  std::int64_t bytes() const { return bytes_; }
  void* at(std::int64_t offset) const { return base_ + offset; }

 private:
  HostRegion(std::byte* base, std::int64_t bytes) : base_(base), bytes_(bytes) {}
  std::byte* base_;
  std::int64_t bytes_;
};

// The size of the region behind an arena of `budget` bytes: an unlimited device can hold no more than the host.
std::int64_t region_bytes(std::int64_t budget) {
  const std::int64_t page = ::sysconf(_SC_PAGESIZE);
  if (budget > 0 && budget != kUnlimited) return (budget + page - 1) / page * page;
  return static_cast<std::int64_t>(::sysconf(_SC_PHYS_PAGES)) * page;
}

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(std::int64_t budget_bytes)
      : arena_(budget_bytes),
        region_(HostRegion::reserve(region_bytes(budget_bytes))),
        engines_{Engine{Stream::kHostToDevice}, Engine{Stream::kDeviceToHost}},
        threads_{std::thread([this] { run_engine(engines_[0]); }), std::thread([this] { run_engine(engines_[1]); })} {}

  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  ~CpuDevice() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    for (Engine& e : engines_) e.work.notify_one();
    for (auto& t : threads_) t.join();
    if (!allocations_.empty()) {
      spdlog::warn("device '{}' destroyed with {} live allocations ({} bytes); freeing them", name(),
                   allocations_.size(), arena_.requested_in_use());
      for (const auto& [start, allocation] : allocations_) release(reinterpret_cast<void*>(start), allocation.bytes);
    }
    for (const auto& [start, block] : pinned_) pinned_blocks_.give_back(reinterpret_cast<void*>(start), block.bytes);
  }

  std::string_view name() const override { return "cpu"; }
  bool copies_pageable_memory_directly() const override { return true; }
  std::int64_t budget_bytes() const override { return arena_.budget(); }

  void* allocate(std::int64_t bytes, std::string_view what) override {
    NJ_EXPECTS(bytes >= 0, "negative device allocation of {} bytes for {}", bytes, what);
    if (bytes == 0) return nullptr;
    std::unique_lock lock(mutex_);
    const auto block = arena_.allocate(bytes, what);
    lock.unlock();
    void* ptr = nullptr;
    try {
      ptr = host_memory(block.offset, bytes, what);
    } catch (...) {
      lock.lock();
      arena_.deallocate(block.offset);  // the host is out of memory: the budget must not keep the bytes
      throw;
    }
    lock.lock();
    Allocation& a =
        allocations_.emplace(address(ptr), Allocation{bytes, block.offset, std::string(what), {}, {}}).first->second;
    // Memory is reused as soon as it is freed (the arena is ordered on the compute stream, as CUDA's stream-
    // ordered allocator is): in arena memory used before, any kernel issued so far may have touched these
    // bytes, so a copy into them must first wait for the compute stream.
    if (block.offset < ever_used_) a.last_read[kCompute] = a.last_write[kCompute] = clock_[kCompute][kCompute];
    ever_used_ = std::max(ever_used_, block.offset + bytes);
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
    // The last copy on each engine that touched it must be done; the host saw them complete, so whatever it
    // issues next (into memory the arena hands out again) is ordered after them.
    Positions last_use{};
    for (std::size_t st = 0; st < kStreams; ++st)
      last_use[st] = std::max(it->second.last_write[st], it->second.last_read[st]);
    for (Engine& e : engines_) block_until(lock, e, last_use[index(e.stream)]);
    last_use[kCompute] = 0;
    host_passed(last_use);
    it = allocations_.find(address(ptr));
    NJ_EXPECTS(it != allocations_.end(), "{} deallocated twice at once", fmt::ptr(ptr));
    const std::int64_t bytes = it->second.bytes;
    arena_.deallocate(it->second.offset);
    allocations_.erase(it);
    lock.unlock();
    release(ptr, bytes);
  }

  void* allocate_pinned(std::int64_t bytes) override {
    NJ_EXPECTS(bytes >= 0, "negative pinned allocation of {} bytes", bytes);
    if (bytes == 0) return nullptr;
    void* ptr = pinned_blocks_.take(bytes);
    std::lock_guard lock(mutex_);
    pinned_.emplace(address(ptr), PinnedBlock{bytes, {}});
    pinned_bytes_ += bytes;
    return ptr;
  }

  void deallocate_pinned(void* ptr) noexcept override {
    if (ptr == nullptr) return;
    std::int64_t bytes = 0;
    {
      std::lock_guard lock(mutex_);
      auto it = pinned_.find(address(ptr));
      NJ_EXPECTS(it != pinned_.end(), "deallocate_pinned of {}, which is not pinned memory of this device",
                 fmt::ptr(ptr));
      // A GPU's copy would read or write the freed block, which the CUDA device hands out again at once.
      for (const Engine& e : engines_) {
        NJ_EXPECTS(it->second.last_use[index(e.stream)] <= e.completed,
                   "page-locked memory at {} freed while a copy on the {} stream still uses it", fmt::ptr(ptr),
                   to_string(e.stream));
      }
      bytes = it->second.bytes;
      pinned_bytes_ -= bytes;
      pinned_.erase(it);
    }
    pinned_blocks_.give_back(ptr, bytes);
  }

  void free_kept_pinned() override { pinned_blocks_.free_kept(); }

  Event copy_to_device(void* device_dst, const void* host_src, std::int64_t bytes) override {
    return issue(engines_[0], device_dst, host_src, bytes);
  }
  Event copy_to_host(void* host_dst, const void* device_src, std::int64_t bytes) override {
    return issue(engines_[1], host_dst, device_src, bytes);
  }

  Event record(Stream stream) override {
    std::lock_guard lock(mutex_);
    return {stream, clock_[index(stream)]};
  }

  void wait(Stream waiter, const Event& event) override {
    std::unique_lock lock(mutex_);
    check_issued(event);
    Positions& clock = clock_[index(waiter)];
    for (std::size_t s = 0; s < kStreams; ++s) {
      if (s != index(waiter)) clock[s] = std::max(clock[s], event.position[s]);
    }
    if (waiter == Stream::kCompute) {
      // The compute stream is this thread: it runs on only once the event is done.
      block_until_event(lock, event);
      return;
    }
    Engine& engine = engine_of(waiter);
    if (completed(event)) return;
    engine.queue.push_back(Operation{++clock[index(waiter)], event, nullptr, nullptr, 0});
  }

  bool is_complete(const Event& event) override {
    std::unique_lock lock(mutex_);
    check_issued(event);
    if (completed(event)) return true;
    // Someone is polling for it: the engines run their queues now, small copies included, as a GPU would. Both,
    // since the event's engine may be waiting for the other one.
    for (Engine& e : engines_) e.woken = true;
    lock.unlock();
    for (Engine& e : engines_) e.work.notify_one();
    return false;
  }

  void synchronize(const Event& event) override {
    std::unique_lock lock(mutex_);
    check_issued(event);
    block_until_event(lock, event);
    host_passed(event.position);
  }

  void synchronize() override {
    std::unique_lock lock(mutex_);
    Positions all{};
    for (std::size_t s = 0; s < kStreams; ++s) all[s] = clock_[s][s];
    for (Engine& e : engines_) block_until(lock, e, all[index(e.stream)]);
    host_passed(all);
  }

  void use(const void* ptr, std::int64_t bytes, Access access, std::string_view what) override {
    NJ_EXPECTS(bytes >= 0, "{} touches a negative number of bytes ({})", what, bytes);
    if (bytes == 0) return;
    std::lock_guard lock(mutex_);
    Allocation& a = live_allocation(ptr, bytes, what);
    const Positions& knows = clock_[kCompute];
    const auto h2d = index(Stream::kHostToDevice);
    const auto d2h = index(Stream::kDeviceToHost);
    if (a.last_write[h2d] > knows[h2d]) {
      throw Error(fmt::format(
          "device buffer '{}' used by {} before the compute stream waited for the copy that fills it", a.what, what));
    }
    if (access == Access::kWrite && a.last_read[d2h] > knows[d2h]) {
      throw Error(
          fmt::format("device buffer '{}' overwritten by {} before the compute stream waited for the copy "
                      "that reads it",
                      a.what, what));
    }
    // Kernels run as they are issued: the compute stream has completed everything issued to it.
    const std::uint64_t position = ++clock_[kCompute][kCompute];
    a.last_read[kCompute] = position;
    if (access == Access::kWrite) a.last_write[kCompute] = position;
  }

  void check_host_access(const void* ptr, std::int64_t bytes, std::string_view what) const override {
    NJ_EXPECTS(bytes >= 0, "{} reaches a negative number of bytes ({})", what, bytes);
    if (bytes == 0) return;
    std::lock_guard lock(mutex_);
    check_host_range(ptr, bytes, what);
  }

  DeviceStats stats() const override {
    std::lock_guard lock(mutex_);
    DeviceStats s = transfers_;
    s.in_use_bytes = arena_.requested_in_use();
    s.peak_bytes = arena_.requested_peak();
    s.peak_footprint_bytes = arena_.arena().stats().peak_footprint_bytes;
    s.pinned_bytes = pinned_bytes_;
    return s;
  }

  void reset_transfer_stats() override {
    std::lock_guard lock(mutex_);
    transfers_ = DeviceStats{};
    arena_.reset_peaks();
  }

 private:
  struct Allocation {
    std::int64_t bytes = 0;
    std::int64_t offset = 0;  // in the arena
    std::string what;
    // Per stream, the position of the last operation there that wrote, and that read (or wrote), this memory.
    Positions last_write{};
    Positions last_read{};
  };
  struct PinnedBlock {
    std::int64_t bytes = 0;
    Positions last_use{};  // per copy stream, the last copy from or into it
  };
  // A copy, or (dst == nullptr) a wait for an event of another stream.
  struct Operation {
    std::uint64_t position = 0;
    Event after;
    void* dst = nullptr;
    const void* src = nullptr;
    std::int64_t bytes = 0;
  };
  struct Engine {
    explicit Engine(Stream s) : stream(s) {}
    Stream stream;
    std::deque<Operation> queue;
    std::uint64_t completed = 0;
    std::condition_variable work;  // its thread waits here for a poll, or shutdown
    bool woken = false;            // someone polled since the thread last emptied the queue
    bool busy = false;             // an operation is running (on the engine thread or a waiting host thread)
  };

  Engine& engine_of(Stream s) { return s == Stream::kHostToDevice ? engines_[0] : engines_[1]; }

  std::uint64_t completed_of(Stream s) const {
    if (s == Stream::kCompute) return clock_[kCompute][kCompute];
    return (s == Stream::kHostToDevice ? engines_[0] : engines_[1]).completed;
  }
  bool completed(const Event& event) const { return completed_of(event.stream) >= event.position[index(event.stream)]; }

  void check_issued(const Event& event) const {
    const std::size_t s = index(event.stream);
    NJ_EXPECTS(event.position[s] <= clock_[s][s], "an event of the {} stream at {} was never issued",
               to_string(event.stream), event.position[s]);
  }

  // The host saw `positions` complete: whatever it issues next, on any stream, is ordered after them.
  void host_passed(const Positions& positions) {
    for (std::size_t w = 0; w < kStreams; ++w) {
      for (std::size_t s = 0; s < kStreams; ++s) {
        if (s != w) clock_[w][s] = std::max(clock_[w][s], positions[s]);
      }
    }
  }

  // The host bytes behind arena block [offset, offset + bytes).
  void* host_memory(std::int64_t offset, std::int64_t bytes, std::string_view what) {
    if (!region_) return host_blocks_.take(bytes);
    if (offset > region_->bytes() - bytes) {
      throw Error(
          fmt::format("the host memory behind the emulated device ({} bytes) cannot hold {} bytes at offset {} "
                      "for {}",
                      region_->bytes(), bytes, offset, what));
    }
    return region_->at(offset);
  }
  void release(void* ptr, std::int64_t bytes) noexcept {
    if (!region_) host_blocks_.give_back(ptr, bytes);
  }

  // The live allocation holding all of [ptr, ptr + bytes): throws naming what the range is otherwise.
  Allocation& live_allocation(const void* ptr, std::int64_t bytes, std::string_view what) {
    auto it = find_containing(allocations_, ptr);
    if (it == allocations_.end()) {
      throw Error(
          fmt::format("{} touches {} bytes at {}, which is not live device memory (freed, or never "
                      "allocated)",
                      what, bytes, fmt::ptr(ptr)));
    }
    const std::uintptr_t end = it->first + static_cast<std::uintptr_t>(it->second.bytes);
    if (address(ptr) + static_cast<std::uintptr_t>(bytes) > end) {
      throw Error(fmt::format("{} overruns device buffer '{}' ({} bytes) by {} bytes", what, it->second.what,
                              it->second.bytes, address(ptr) + static_cast<std::uintptr_t>(bytes) - end));
    }
    return it->second;
  }

  // Allocations are disjoint, so only the last one starting before the range's end can reach into it.
  void check_host_range(const void* ptr, std::int64_t bytes, std::string_view what) const {
    NJ_EXPECTS(ptr != nullptr, "{}: a null host range of {} bytes", what, bytes);
    auto it = allocations_.lower_bound(address(ptr) + static_cast<std::uintptr_t>(bytes));
    if (it == allocations_.begin()) return;
    --it;
    if (it->first + static_cast<std::uintptr_t>(it->second.bytes) > address(ptr)) {
      throw Error(fmt::format("host access to device memory: {} reaches {} bytes at {}, inside device buffer '{}'",
                              what, bytes, fmt::ptr(ptr), it->second.what));
    }
  }

  // The page-locked block holding all of [ptr, ptr + bytes), or nullptr.
  PinnedBlock* pinned(const void* ptr, std::int64_t bytes) {
    auto it = find_containing(pinned_, ptr);
    const bool inside = it != pinned_.end() && address(ptr) + static_cast<std::uintptr_t>(bytes) <=
                                                   it->first + static_cast<std::uintptr_t>(it->second.bytes);
    return inside ? &it->second : nullptr;
  }

  Event issue(Engine& engine, void* dst, const void* src, std::int64_t bytes) {
    const bool to_device = engine.stream == Stream::kHostToDevice;
    const char* direction = to_device ? "copy to device" : "copy to host";
    NJ_EXPECTS(bytes >= 0, "{} of a negative size ({} bytes)", direction, bytes);
    const void* device_ptr = to_device ? static_cast<const void*>(dst) : src;
    const void* host_ptr = to_device ? src : static_cast<const void*>(dst);
    std::unique_lock lock(mutex_);
    const std::size_t s = index(engine.stream);
    if (bytes == 0) return {engine.stream, clock_[s]};
    Allocation& a = live_allocation(device_ptr, bytes, direction);
    check_host_range(host_ptr, bytes, direction);
    const Positions& knows = clock_[s];
    const auto other_copy = index(to_device ? Stream::kDeviceToHost : Stream::kHostToDevice);
    // A copy to the host reads what kernels and loads wrote; a copy to the device overwrites what kernels
    // and write-backs read.
    const bool ordered =
        to_device ? a.last_read[kCompute] <= knows[kCompute] && a.last_read[other_copy] <= knows[other_copy]
                  : a.last_write[kCompute] <= knows[kCompute] && a.last_write[other_copy] <= knows[other_copy];
    if (!ordered) {
      throw Error(fmt::format("{} of device buffer '{}' issued before its stream waited for the {} that {} it",
                              direction, a.what, to_device ? "work" : "kernel or copy", to_device ? "uses" : "writes"));
    }
    const std::uint64_t position = ++clock_[s][s];
    a.last_read[s] = position;
    if (to_device) a.last_write[s] = position;
    engine.queue.push_back(Operation{position, Event{}, dst, src, bytes});
    if (PinnedBlock* block = pinned(host_ptr, bytes)) {
      block->last_use[s] = position;
    } else {
      ++transfers_.pageable_copies;
    }
    (to_device ? transfers_.h2d_bytes : transfers_.d2h_bytes) += bytes;
    ++(to_device ? transfers_.h2d_copies : transfers_.d2h_copies);
    return {engine.stream, clock_[s]};
  }

  void block_until_event(std::unique_lock<std::mutex>& lock, const Event& event) {
    if (event.stream == Stream::kCompute) return;  // kernels are done when they return
    block_until(lock, engine_of(event.stream), event.position[index(event.stream)]);
  }

  // Blocks the host until `engine` has completed `position` operations, running its queue meanwhile, and the
  // other engine's where the next operation waits for it.
  void block_until(std::unique_lock<std::mutex>& lock, Engine& engine, std::uint64_t position) {
    if (engine.completed >= position) return;
    const auto start = Clock::now();
    while (engine.completed < position) {
      Engine& other = &engine == &engines_[0] ? engines_[1] : engines_[0];
      if (can_run(engine)) {
        run_oldest(lock, engine, true);
      } else if (!engine.busy && can_run(other)) {
        run_oldest(lock, other, true);
      } else {
        sleep_until_done(lock);
      }
    }
    transfers_.wait_seconds += seconds_since(start);
  }

  bool can_run(const Engine& engine) const {
    return !engine.busy && !engine.queue.empty() && runnable(engine.queue.front());
  }

  void sleep_until_done(std::unique_lock<std::mutex>& lock) {
    ++sleepers_;
    done_.wait(lock);
    --sleepers_;
  }

  bool runnable(const Operation& op) const { return op.dst != nullptr || completed(op.after); }

  // Runs the engine's oldest operation on the calling thread (a host thread: with its OpenMP threads), outside
  // the lock so that others can allocate, issue and query meanwhile; one runs at a time per engine, in order.
  // (A memcpy cannot fail: the checks at issue are what a GPU's copy errors would be.)
  void run_oldest(std::unique_lock<std::mutex>& lock, Engine& engine, bool on_host) {
    const Operation op = engine.queue.front();
    engine.queue.pop_front();
    engine.busy = true;
    lock.unlock();
    const auto start = Clock::now();
    if (op.dst != nullptr) copy(op, on_host && !omp_in_parallel());
    const double seconds = op.dst != nullptr ? seconds_since(start) : 0.0;
    lock.lock();
    engine.busy = false;
    transfers_.copy_seconds += seconds;
    engine.completed = op.position;
    if (sleepers_ > 0) done_.notify_all();
  }

  static void copy(const Operation& op, bool in_pieces) {
    auto* dst = static_cast<std::byte*>(op.dst);
    const auto* src = static_cast<const std::byte*>(op.src);
    const std::int64_t pieces = (op.bytes + kCopyPieceBytes - 1) / kCopyPieceBytes;
#pragma omp parallel for schedule(static) if (in_pieces && pieces > 1)
    for (std::int64_t i = 0; i < pieces; ++i) {
      const std::int64_t first = i * kCopyPieceBytes;
      std::memcpy(dst + first, src + first, static_cast<std::size_t>(std::min(kCopyPieceBytes, op.bytes - first)));
    }
  }

  // An engine thread sleeps until someone polls for an event (or the device shuts down), then drains its queue.
  // On shutdown it drains the queue first: the destructor completes all issued work.
  void run_engine(Engine& engine) {
    std::unique_lock lock(mutex_);
    for (;;) {
      engine.work.wait(lock, [&] { return stopping_ || engine.woken; });
      while (!engine.queue.empty()) {
        if (can_run(engine)) {
          run_oldest(lock, engine, false);
        } else {
          sleep_until_done(lock);
        }
      }
      engine.woken = false;
      if (stopping_) return;
    }
  }

  SizeLimitedArena arena_;
  std::optional<HostRegion> region_;  // behind device allocations, or
  HostBlocks host_blocks_;            // where there is no region
  HostBlocks pinned_blocks_;          // page-locked staging
  mutable std::mutex mutex_;
  std::condition_variable done_;  // threads wait here for completions
  int sleepers_ = 0;              // threads waiting on done_
  RangeMap<Allocation> allocations_;
  RangeMap<PinnedBlock> pinned_;
  std::int64_t ever_used_ = 0;  // the end of the arena memory ever handed out
  std::int64_t pinned_bytes_ = 0;
  // Per stream: what it is ordered after; clock_[s][s] counts the operations issued to s.
  std::array<Positions, kStreams> clock_{};
  std::array<Engine, 2> engines_;  // host-to-device, device-to-host
  DeviceStats transfers_;          // its memory fields are unused: the arena holds them
  bool stopping_ = false;
  std::array<std::thread, 2> threads_;  // last: they start running in the constructor and need everything above
};

}  // namespace

std::unique_ptr<Device> make_cpu_device(std::int64_t budget_bytes) { return std::make_unique<CpuDevice>(budget_bytes); }

DeviceMatrix::DeviceMatrix(Device& device, std::int64_t rows, std::int64_t cols, std::string_view what)
    : rows_(rows), cols_(cols) {
  NJ_EXPECTS(rows >= 0 && cols >= 0, "negative device rows shape {}x{} for {}", rows, cols, what);
  NJ_EXPECTS(cols == 0 || rows <= kUnlimited / static_cast<std::int64_t>(sizeof(float)) / cols,
             "device rows {}x{} for {} overflow", rows, cols, what);
  values_ = DeviceArray<float>(device, rows * cols, what);
}

}  // namespace nj
