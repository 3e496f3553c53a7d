// The CUDA device: Device's contract on a GPU. One cudaMalloc'd region holds every allocation, placed by the
// same SizeLimitedArena as the CPU emulation, so a plan's forecast holds here byte for byte. Each of the three
// streams is a CUDA stream; every operation issued to one (a copy, a wait, a record) is followed by a CUDA event,
// so an Event's position on its stream names a CUDA event to wait for or synchronise with.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "nj/core/stopwatch.hpp"
#include "nj/device/arena.hpp"
#include "nj/device/cuda.hpp"
#include "nj/device/cuda_check.hpp"
#include "nj/device/cuda_handle.hpp"
#include "nj/device/cuda_native.hpp"

namespace nj {
namespace {

using Positions = std::array<std::uint64_t, kStreams>;

std::uintptr_t address(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr); }
std::size_t index(Stream s) { return static_cast<std::size_t>(s); }

// Page-locked blocks are kept for reuse: cudaFreeHost waits for the whole device, which would end every overlap
// of copies and kernels at each step's staging. Sizes are rounded to classes that reuse well: powers of two up to
// 64 MiB, whole 64 MiB beyond (a whole feature matrix's staging must not double). Freed blocks are kept up to
// kPinnedCacheBytes in all; beyond, they are given back.
constexpr std::int64_t kSmallestPinnedBlock = std::int64_t{4} << 10;
constexpr std::int64_t kLargePinnedUnit = std::int64_t{64} << 20;
constexpr std::int64_t kPinnedCacheBytes = std::int64_t{1} << 30;
std::int64_t pinned_block_bytes(std::int64_t bytes) {
  if (bytes > kLargePinnedUnit) return (bytes + kLargePinnedUnit - 1) / kLargePinnedUnit * kLargePinnedUnit;
  std::int64_t size = kSmallestPinnedBlock;
  while (size < bytes) size *= 2;
  return size;
}

// A query that finds work still running leaves cudaErrorNotReady as the thread's last error, which the next
// kernel launch's check (cudaPeekAtLastError) would take for its own failure.
void clear_not_ready() { (void)cudaGetLastError(); }

// The budget, and beside it in the arena `library_bytes` for the libraries' workspaces: both must fit what is free.
std::int64_t resolve_budget(int ordinal, std::int64_t requested, int sharing, std::int64_t library_bytes) {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  NJ_CUDA_TRY(cudaSetDevice(ordinal));
  NJ_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  const auto usable = static_cast<std::int64_t>(free_bytes) - kCudaReservedBytes;
  const std::int64_t budget = requested > 0 && requested != kUnlimited
                                  ? requested
                                  : cuda_default_budget(static_cast<std::int64_t>(total_bytes),
                                                        static_cast<std::int64_t>(free_bytes), sharing) -
                                        library_bytes;
  NJ_REQUIRE(
      budget > 0 && budget + library_bytes <= usable,
      "device memory budget {} is more than GPU {} can give: {} free, less {} kept in reserve for CUDA's "
      "context and NCCL and {} for the libraries' workspaces ({} ranks share it); use --device-memory {} or less",
      format_bytes(budget), ordinal, format_bytes(static_cast<std::int64_t>(free_bytes)),
      format_bytes(kCudaReservedBytes), format_bytes(library_bytes), sharing,
      format_bytes(std::max<std::int64_t>(usable - library_bytes, 0)));
  return budget;
}

class CudaDevice final : public Device {
 public:
  // What was made before a failure is released by the members' destructors (a constructor that throws runs no
  // destructor body).
  // The libraries' workspace lies after the arena in the same cudaMalloc, outside the budget and its counts.
  CudaDevice(int ordinal, std::int64_t budget_bytes, int sharing, std::int64_t library_bytes)
      : ordinal_(ordinal),
        library_bytes_(library_bytes),
        arena_(resolve_budget(ordinal, budget_bytes, sharing, library_bytes)) {
    void* base = nullptr;
    NJ_CUDA_TRY(cudaMalloc(&base, static_cast<std::size_t>(workspace_offset() + library_bytes_)));
    base_.reset(base);
    for (StreamState& s : streams_) s.stream = make_stream();
  }

  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  ~CudaDevice() override {
    bind_no_throw();
    for (StreamState& s : streams_) NJ_CUDA_TRY_NO_THROW(cudaStreamSynchronize(s.stream.get()));
    if (!live_.empty()) {
      spdlog::warn("device '{}' destroyed with {} live allocations ({} bytes); freeing them", name(), live_.size(),
                   arena_.requested_in_use());
    }
    for (StreamState& s : streams_) {
      for (const Recorded& r : s.recorded) release_event_no_throw(r);
    }
    for (cudaEvent_t e : free_events_) NJ_CUDA_TRY_NO_THROW(cudaEventDestroy(e));
    for (const auto& [start, block] : pinned_) NJ_CUDA_TRY_NO_THROW(cudaFreeHost(reinterpret_cast<void*>(start)));
    for (const auto& [size, ptr] : pinned_free_) NJ_CUDA_TRY_NO_THROW(cudaFreeHost(ptr));
    // The streams, then the arena, go with the members.
  }

  std::string_view name() const override { return "cuda"; }
  std::int64_t budget_bytes() const override { return arena_.budget(); }
  DeviceSpan<std::byte> library_workspace() const {
    return {static_cast<std::byte*>(base_.get()) + workspace_offset(), library_bytes_};
  }
  int ordinal() const { return ordinal_; }
  cudaStream_t stream(Stream s) const { return streams_[index(s)].stream.get(); }

  void* allocate(std::int64_t bytes, std::string_view what) override {
    NJ_EXPECTS(bytes >= 0, "negative device allocation of {} bytes for {}", bytes, what);
    if (bytes == 0) return nullptr;
    std::lock_guard lock(mutex_);
    const SizeLimitedArena::Block block = arena_.allocate(bytes, what);
    void* ptr = static_cast<std::byte*>(base_.get()) + block.offset;
    live_.emplace(address(ptr), Allocation{bytes, block.offset, {}, {}});
    return ptr;
  }

  void deallocate(void* ptr) noexcept override {
    if (ptr == nullptr) return;
    std::lock_guard lock(mutex_);
    const auto it = live_.find(address(ptr));
    if (it == live_.end()) {
      spdlog::error("device '{}': deallocate of {} which it did not allocate", name(), ptr);
      std::terminate();
    }
    // Kernels that reuse the memory run on the compute stream: order it after the copies still touching it.
    bind_no_throw();
    for (const Event& copy : {it->second.last_upload, it->second.last_download}) {
      const Recorded* r = recorded_or_null(copy);
      if (r != nullptr) NJ_CUDA_TRY_NO_THROW(cudaStreamWaitEvent(stream(Stream::kCompute), r->done, 0));
    }
    try {
      arena_.deallocate(it->second.offset);
    } catch (const std::exception& e) {  // bookkeeping out of step with live_: nothing to unwind to
      spdlog::error("device '{}': {}", name(), e.what());
      std::terminate();
    }
    live_.erase(it);
  }

  void* allocate_pinned(std::int64_t bytes) override {
    NJ_EXPECTS(bytes >= 0, "negative page-locked allocation of {} bytes", bytes);
    if (bytes == 0) return nullptr;
    const std::int64_t size = pinned_block_bytes(bytes);
    std::lock_guard lock(mutex_);
    void* ptr = nullptr;
    if (const auto reuse = pinned_free_.find(size); reuse != pinned_free_.end()) {
      ptr = reuse->second;
      pinned_cached_bytes_ -= size;
      pinned_free_.erase(reuse);
    } else {
      bind();
      NJ_CUDA_TRY(cudaHostAlloc(&ptr, static_cast<std::size_t>(size), cudaHostAllocDefault));
    }
    pinned_.emplace(address(ptr), size);
    stats_.pinned_bytes += size;
    return ptr;
  }

  void deallocate_pinned(void* ptr) noexcept override {
    if (ptr == nullptr) return;
    std::lock_guard lock(mutex_);
    const auto it = pinned_.find(address(ptr));
    if (it == pinned_.end()) {
      spdlog::error("device '{}': deallocate_pinned of {} which it did not allocate", name(), ptr);
      std::terminate();
    }
    stats_.pinned_bytes -= it->second;
    if (pinned_cached_bytes_ + it->second <= kPinnedCacheBytes) {
      pinned_free_.emplace(it->second, ptr);
      pinned_cached_bytes_ += it->second;
    } else {
      NJ_CUDA_TRY_NO_THROW(cudaFreeHost(ptr));
    }
    pinned_.erase(it);
  }

  void free_kept_pinned() override {
    std::lock_guard lock(mutex_);
    bind();
    // Taken out of the cache first: a failed free must not leave a freed block there for the destructor to free again.
    std::multimap<std::int64_t, void*> kept;
    kept.swap(pinned_free_);
    pinned_cached_bytes_ = 0;
    for (const auto& [size, ptr] : kept) NJ_CUDA_TRY(cudaFreeHost(ptr));
  }

  Event copy_to_device(void* device_dst, const void* host_src, std::int64_t bytes) override {
    return copy(Stream::kHostToDevice, device_dst, host_src, bytes);
  }
  Event copy_to_host(void* host_dst, const void* device_src, std::int64_t bytes) override {
    return copy(Stream::kDeviceToHost, host_dst, device_src, bytes);
  }

  Event record(Stream s) override {
    std::lock_guard lock(mutex_);
    bind();
    return issued(s, nullptr);
  }

  void wait(Stream waiter, const Event& event) override {
    std::lock_guard lock(mutex_);
    bind();
    StreamState& w = streams_[index(waiter)];
    if (waiter != event.stream) {
      if (const Recorded* r = find_recorded(event); r != nullptr) {
        NJ_CUDA_TRY(cudaStreamWaitEvent(w.stream.get(), r->done, 0));
      }
    }
    for (std::size_t i = 0; i < kStreams; ++i) w.clock[i] = std::max(w.clock[i], event.position[i]);
    // A stream that waits on this stream's later events must inherit the wait: the wait is an operation.
    issued(waiter, nullptr);
  }

  bool is_complete(const Event& event) override {
    std::lock_guard lock(mutex_);
    retire_completed();
    return find_recorded(event) == nullptr;
  }

  void synchronize(const Event& event) override {
    const auto start = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mutex_);
      bind();
      if (const Recorded* r = find_recorded(event); r != nullptr) NJ_CUDA_TRY(cudaEventSynchronize(r->done));
      retire_completed();
    }
    add_wait(start);
  }

  void synchronize() override {
    const auto start = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mutex_);
      bind();
      for (const StreamState& s : streams_) NJ_CUDA_TRY(cudaStreamSynchronize(s.stream.get()));
      retire_completed();
    }
    add_wait(start);
  }

  void use(const void* /*ptr*/, std::int64_t /*bytes*/, Access /*access*/, std::string_view /*what*/) override {}

  void check_host_access(const void* ptr, std::int64_t bytes, std::string_view what) const override {
    const std::uintptr_t begin = address(base_.get());
    const std::uintptr_t end = begin + static_cast<std::uintptr_t>(workspace_offset() + library_bytes_);
    if (bytes > 0 && address(ptr) < end && address(ptr) + static_cast<std::uintptr_t>(bytes) > begin) {
      throw Error(fmt::format("{} reads or writes device memory from the host", what));
    }
  }

  DeviceStats stats() const override {
    std::lock_guard lock(mutex_);
    DeviceStats s = stats_;
    s.in_use_bytes = arena_.requested_in_use();
    s.peak_bytes = arena_.requested_peak();
    s.peak_footprint_bytes = arena_.arena().stats().peak_footprint_bytes;
    return s;
  }

  void reset_transfer_stats() override {
    std::lock_guard lock(mutex_);
    const std::int64_t pinned = stats_.pinned_bytes;
    stats_ = DeviceStats{};
    stats_.pinned_bytes = pinned;
    arena_.reset_peaks();
  }

 private:
  struct Allocation {
    std::int64_t bytes = 0;
    std::int64_t offset = 0;
    Event last_upload;  // the last copy into it, and out of it
    Event last_download;
  };
  // The CUDA event after operation `position` of a stream; `started` (copies only) before it, for timing.
  struct Recorded {
    std::uint64_t position = 0;
    cudaEvent_t done = nullptr;
    cudaEvent_t started = nullptr;
  };
  struct StreamState {
    CudaStreamHandle stream;
    Positions clock{};              // [own] = operations issued; the others: what it was ordered after
    std::deque<Recorded> recorded;  // not yet known to be complete, ascending
    std::uint64_t completed = 0;    // every operation up to here has completed
  };

  // Where the workspace starts: after the arena, on the arena's alignment (cuBLAS wants 256 bytes).
  std::int64_t workspace_offset() const { return arena_block_bytes(arena_.budget()); }
  void bind() const { NJ_CUDA_TRY(cudaSetDevice(ordinal_)); }
  void bind_no_throw() const noexcept { NJ_CUDA_TRY_NO_THROW(cudaSetDevice(ordinal_)); }

  Event copy(Stream direction, void* dst, const void* src, std::int64_t bytes) {
    NJ_EXPECTS(bytes >= 0, "negative copy of {} bytes", bytes);
    std::lock_guard lock(mutex_);
    StreamState& s = streams_[index(direction)];
    if (bytes == 0) return Event{direction, s.clock};
    const bool upload = direction == Stream::kHostToDevice;
    void* device_side = upload ? dst : const_cast<void*>(src);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    const void* host_side = upload ? src : dst;
    Allocation& a = containing(device_side, bytes, upload ? "copy to the device" : "copy to the host");
    if (!is_pinned(host_side, bytes)) ++stats_.pageable_copies;
    bind();
    cudaEvent_t started = take_event();
    NJ_CUDA_TRY(cudaEventRecord(started, s.stream.get()));
    NJ_CUDA_TRY(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(bytes),
                                upload ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s.stream.get()));
    const Event event = issued(direction, started);
    (upload ? a.last_upload : a.last_download) = event;
    (upload ? stats_.h2d_bytes : stats_.d2h_bytes) += bytes;
    ++(upload ? stats_.h2d_copies : stats_.d2h_copies);
    return event;
  }

  // Records the CUDA event that ends the operation just issued to `s` and returns its Event.
  Event issued(Stream s, cudaEvent_t started) {
    StreamState& state = streams_[index(s)];
    cudaEvent_t done = take_event();
    NJ_CUDA_TRY(cudaEventRecord(done, state.stream.get()));
    const std::uint64_t position = ++state.clock[index(s)];
    state.recorded.push_back({position, done, started});
    retire_completed();
    return Event{s, state.clock};
  }

  // The CUDA event to wait for to see `event` complete; nullptr once it has.
  const Recorded* find_recorded(const Event& event) const {
    const Recorded* r = recorded_or_null(event);
    NJ_EXPECTS(r != nullptr || event.position[index(event.stream)] <= streams_[index(event.stream)].completed,
               "an event at {} of stream {} which has issued {}", event.position[index(event.stream)],
               to_string(event.stream), streams_[index(event.stream)].clock[index(event.stream)]);
    return r;
  }
  // The same without the check, for the paths that must not throw: nullptr also for an event never issued.
  const Recorded* recorded_or_null(const Event& event) const noexcept {
    const StreamState& s = streams_[index(event.stream)];
    const std::uint64_t position = event.position[index(event.stream)];
    if (position <= s.completed) return nullptr;
    const auto it = std::lower_bound(s.recorded.begin(), s.recorded.end(), position,
                                     [](const Recorded& r, std::uint64_t p) { return r.position < p; });
    return it != s.recorded.end() ? &*it : nullptr;
  }

  // Returns the events of completed operations to the pool, adding up the copies' times.
  void retire_completed() {
    for (StreamState& s : streams_) {
      while (!s.recorded.empty()) {
        const Recorded& r = s.recorded.front();
        const cudaError_t state = cudaEventQuery(r.done);
        if (state == cudaErrorNotReady) {
          clear_not_ready();
          break;
        }
        NJ_CUDA_TRY(state);
        if (r.started != nullptr) {
          float milliseconds = 0;
          NJ_CUDA_TRY(cudaEventElapsedTime(&milliseconds, r.started, r.done));
          stats_.copy_seconds += milliseconds / 1e3;
          free_events_.push_back(r.started);
        }
        free_events_.push_back(r.done);
        s.completed = r.position;
        s.recorded.pop_front();
      }
    }
  }

  void release_event_no_throw(const Recorded& r) noexcept {
    NJ_CUDA_TRY_NO_THROW(cudaEventDestroy(r.done));
    if (r.started != nullptr) NJ_CUDA_TRY_NO_THROW(cudaEventDestroy(r.started));
  }

  cudaEvent_t take_event() {
    if (free_events_.empty()) {
      cudaEvent_t e = nullptr;
      NJ_CUDA_TRY(cudaEventCreate(&e));  // with timing: copies are timed by pairs of them
      return e;
    }
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }

  Allocation& containing(const void* ptr, std::int64_t bytes, std::string_view what) {
    auto it = live_.upper_bound(address(ptr));
    NJ_EXPECTS(it != live_.begin(), "{} at {} outside any device allocation", what, ptr);
    --it;
    NJ_EXPECTS(
        address(ptr) + static_cast<std::uintptr_t>(bytes) <= it->first + static_cast<std::uintptr_t>(it->second.bytes),
        "{} of {} bytes at {} runs past its device allocation", what, bytes, ptr);
    return it->second;
  }

  bool is_pinned(const void* ptr, std::int64_t bytes) const {
    auto it = pinned_.upper_bound(address(ptr));
    if (it == pinned_.begin()) return false;
    --it;
    return address(ptr) + static_cast<std::uintptr_t>(bytes) <= it->first + static_cast<std::uintptr_t>(it->second);
  }

  void add_wait(std::chrono::steady_clock::time_point start) {
    const double seconds = seconds_since(start);
    std::lock_guard lock(mutex_);
    stats_.wait_seconds += seconds;
  }

  int ordinal_;
  std::int64_t library_bytes_;  // the libraries' workspace, beyond the arena
  mutable std::mutex mutex_;
  SizeLimitedArena arena_;
  CudaHandle<void*, cudaFree> base_;  // the arena's memory; the streams go first
  std::array<StreamState, kStreams> streams_{};
  std::map<std::uintptr_t, Allocation> live_;
  std::map<std::uintptr_t, std::int64_t> pinned_;   // live page-locked blocks: start -> size
  std::multimap<std::int64_t, void*> pinned_free_;  // freed ones kept for reuse: size -> start
  std::int64_t pinned_cached_bytes_ = 0;            // their total
  std::vector<cudaEvent_t> free_events_;
  DeviceStats stats_;
};

CudaDevice& as_cuda(Device& device) {
  auto* cuda = dynamic_cast<CudaDevice*>(&device);
  NJ_EXPECTS(cuda != nullptr, "device '{}' is not a CUDA device", device.name());
  return *cuda;
}

}  // namespace

bool cuda_built() { return true; }

int cuda_device_count() {
  int count = 0;
  // No driver, or no GPU, is not an error here: it is the answer 0.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clears the sticky error the failed query left
    return 0;
  }
  return count;
}

std::string cuda_device_uuid(int ordinal) {
  cudaDeviceProp properties{};
  NJ_CUDA_TRY(cudaGetDeviceProperties(&properties, ordinal));
  std::string hex;
  for (const char byte : properties.uuid.bytes) hex += fmt::format("{:02x}", static_cast<unsigned char>(byte));
  return hex;
}

std::string cuda_device_description(int ordinal) {
  cudaDeviceProp properties{};
  NJ_CUDA_TRY(cudaGetDeviceProperties(&properties, ordinal));
  return fmt::format("{}, {}, sm_{}{}", properties.name,
                     format_bytes(static_cast<std::int64_t>(properties.totalGlobalMem)), properties.major,
                     properties.minor);
}

std::unique_ptr<Device> make_cuda_device(int ordinal, std::int64_t budget_bytes, int sharing,
                                         std::int64_t library_bytes) {
  const int count = cuda_device_count();
  NJ_REQUIRE(count > 0, "--device cuda: {}", kNoCudaDevice);
  NJ_REQUIRE(ordinal >= 0 && ordinal < count, "GPU {} does not exist: this node has {}", ordinal, count);
  return std::make_unique<CudaDevice>(ordinal, budget_bytes, sharing, library_bytes);
}

cudaStream_t native_stream(Device& device, Stream stream) { return as_cuda(device).stream(stream); }
int native_ordinal(const Device& device) { return as_cuda(const_cast<Device&>(device)).ordinal(); }  // NOLINT
DeviceSpan<std::byte> native_library_workspace(Device& device) { return as_cuda(device).library_workspace(); }

}  // namespace nj
