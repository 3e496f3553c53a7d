// The device contract, on the CPU emulation and a GPU (DeviceContract): memory under an exact budget placed in a
// 256-byte arena, copies in stream order, counters that add up, freeing and shutdown. Then what only the
// emulation has (CpuDevice): two copy-engine threads ordered against each other only by events, and the checks
// that turn what a GPU gets wrong only sometimes (host access to device memory, unordered copies) into an error
// every time. Kernel checks need a backend and live in test_checked_backend.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "nj/device/arena.hpp"
#include "nj/device/device.hpp"
#include "nj/device/planning_device.hpp"
#include "nj/device/transfers.hpp"
#include "support/backends.hpp"
#include "support/device_checks.hpp"

namespace nj {
namespace {

using test::mentions;
using test::message_of;
using test::poll_until_complete;

// Device and host views must not convert either way, so that handing device memory to host code (or the
// reverse) is a compile error rather than a fault on a GPU...
static_assert(!std::is_convertible_v<DeviceRows, Rows> && !std::is_convertible_v<Rows, DeviceRows>);
static_assert(!std::is_convertible_v<ConstDeviceRows, ConstRows> && !std::is_convertible_v<ConstRows, ConstDeviceRows>);
static_assert(!std::is_convertible_v<DeviceRows, ConstRows> && !std::is_convertible_v<Rows, ConstDeviceRows>);
static_assert(!std::is_convertible_v<DeviceSpan<float>, float*> && !std::is_convertible_v<float*, DeviceSpan<float>>);
static_assert(!std::is_convertible_v<DeviceSpan<const float>, const float*>);
// ...while adding const still converts on each side (without it the asserts above could pass vacuously).
static_assert(std::is_convertible_v<DeviceRows, ConstDeviceRows> && std::is_convertible_v<Rows, ConstRows>);
static_assert(std::is_convertible_v<DeviceSpan<float>, DeviceSpan<const float>>);

constexpr std::int64_t kMiB = 1 << 20;

std::vector<float> iota_floats(std::size_t count, float first) {
  std::vector<float> v(count);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::uint64_t loads_issued(const Event& e) { return e.position[static_cast<std::size_t>(Stream::kHostToDevice)]; }

// The contract, on each device: the CPU emulation and a GPU (skipped with "no CUDA device" where there is none).
class DeviceContract : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override { NJ_SKIP_WITHOUT_BACKEND(GetParam()); }
  // A device of this kind; budget 0 is none on the CPU and a test-sized arena on a GPU.
  std::unique_ptr<Device> make_device(std::int64_t budget) const { return test::backend_device(GetParam(), budget); }
};

// ---- memory ----

TEST_P(DeviceContract, BudgetIsExactAndRefusalsNameTheRequest) {
  auto device = make_device(1024);
  EXPECT_EQ(device->name(), to_string(GetParam()));
  EXPECT_EQ(device->budget_bytes(), 1024);
  void* a = device->allocate(512, "a");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % kArenaAlignment, 0U);

  const std::string message = message_of<OutOfBudget>([&] { device->allocate(513, "layer 2 activations"); });
  for (const char* part : {"device memory budget exceeded", "layer 2 activations", "513", "512", "1024"}) {
    EXPECT_TRUE(mentions(message, part));
  }
  EXPECT_EQ(device->stats().in_use_bytes, 512) << "a refused allocation must not be charged";

  void* b = device->allocate(512, "b");
  EXPECT_THROW(device->allocate(1, "one more byte"), OutOfBudget);
  device->deallocate(a);
  void* c = device->allocate(512, "c");
  device->deallocate(b);
  device->deallocate(c);
  EXPECT_EQ(device->stats().in_use_bytes, 0);
  EXPECT_EQ(device->stats().peak_bytes, 1024);
}

TEST_P(DeviceContract, FragmentationRefusesWithinTheBudget) {
  auto device = make_device(4096);
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(device->allocate(1024, "block"));
  device->deallocate(blocks[0]);
  device->deallocate(blocks[2]);
  // 2048 bytes are free, but in two separate 1024-byte holes.
  const std::string message = message_of<OutOfBudget>([&] { device->allocate(2048, "wide rows"); });
  for (const char* part : {"fragmented", "wide rows", "largest free range is 1024 bytes"}) {
    EXPECT_TRUE(mentions(message, part));
  }
  // Freeing the block between the holes coalesces them.
  device->deallocate(blocks[1]);
  void* wide = device->allocate(2048, "wide rows");
  device->deallocate(wide);
  device->deallocate(blocks[3]);

  // 1000 bytes hold three 256-byte units: the last 232 bytes are within the cap, but no block fits there.
  auto tail = make_device(1000);
  void* most = tail->allocate(768, "most");
  EXPECT_TRUE(mentions(message_of<OutOfBudget>([&] { tail->allocate(1, "tail"); }), "fragmented"));
  tail->deallocate(most);
}

TEST_P(DeviceContract, PeaksCountRequestedAndRoundedBytes) {
  auto device = make_device(0);
  void* a = device->allocate(100, "a");  // [0, 256)
  void* b = device->allocate(300, "b");  // [256, 768)
  device->deallocate(a);
  void* c = device->allocate(200, "c");   // into a's hole
  void* d = device->allocate(1000, "d");  // [768, 1792)
  DeviceStats stats = device->stats();
  EXPECT_EQ(stats.in_use_bytes, 1500);
  EXPECT_EQ(stats.peak_bytes, 1500);
  EXPECT_EQ(stats.peak_footprint_bytes, 1792);

  // Peaks restart from what is live: b and c, 500 requested bytes in the first 768.
  device->deallocate(d);
  device->reset_transfer_stats();
  stats = device->stats();
  EXPECT_EQ(stats.peak_bytes, 500);
  EXPECT_EQ(stats.peak_footprint_bytes, 768);
  device->deallocate(b);
  device->deallocate(c);
}

TEST(CpuDevice, UnlimitedWithoutABudget) {
  for (const std::int64_t budget : {std::int64_t{0}, std::int64_t{-5}, kUnlimited}) {
    auto device = make_cpu_device(budget);
    EXPECT_EQ(device->budget_bytes(), kUnlimited);
    std::vector<void*> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(device->allocate(64 * kMiB, "block"));
    EXPECT_EQ(device->stats().in_use_bytes, 256 * kMiB);
    for (void* p : blocks) device->deallocate(p);
    EXPECT_EQ(device->stats().in_use_bytes, 0);
  }
}

// The arena's offsets index one host range, as a CUDA device's index its one cudaMalloc: memory freed and
// allocated again is the same memory (no fresh pages every epoch). Under AddressSanitizer each allocation is a
// block of its own, so that a use after free is reported.
TEST(CpuDevice, AllocationsLieWhereTheArenaPlacesThem) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "each allocation is a host block of its own under AddressSanitizer";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "each allocation is a host block of its own under AddressSanitizer";
#endif
#endif
  for (const std::int64_t budget : {kUnlimited, 4 * kMiB}) {
    auto device = make_cpu_device(budget);
    auto* a = static_cast<std::byte*>(device->allocate(100, "a"));   // [0, 256)
    auto* b = static_cast<std::byte*>(device->allocate(300, "b"));   // [256, 768)
    auto* c = static_cast<std::byte*>(device->allocate(5000, "c"));  // [768, 5888)
    EXPECT_EQ(b - a, 256);
    EXPECT_EQ(c - a, 768);
    device->deallocate(b);
    EXPECT_EQ(device->allocate(200, "b again"), b) << "the freed range is handed out again";
    device->deallocate(b);
    device->deallocate(c);
    device->deallocate(a);
  }
}

TEST_P(DeviceContract, OwningBuffersFreeTheirBytes) {
  auto device = make_device(1536);  // two 640-byte matrices, 768 arena bytes each
  {
    DeviceMatrix a(*device, 10, 16, "a");
    EXPECT_EQ(a.bytes(), 640);
    DeviceMatrix b(std::move(a));
    EXPECT_EQ(a.bytes(), 0);  // NOLINT(bugprone-use-after-move): moved-from buffers own nothing
    EXPECT_EQ(device->stats().in_use_bytes, 640);
    DeviceMatrix c(*device, 5, 16, "c");
    EXPECT_EQ(device->stats().in_use_bytes, 960);
    c = std::move(b);  // frees c's own rows
    EXPECT_EQ(device->stats().in_use_bytes, 640);
    EXPECT_EQ(c.rows(), 10);
    EXPECT_TRUE(
        mentions(message_of<OutOfBudget>([&] { DeviceMatrix too_big(*device, 15, 16, "too big"); }), "too big"));

    DeviceArray<std::int32_t> ids(*device, 100, "ids");
    DeviceArray<std::int32_t> none(*device, 0, "none");
    EXPECT_EQ(none.view().data, nullptr);
    EXPECT_EQ(device->stats().in_use_bytes, 1040);
  }
  EXPECT_EQ(device->stats().in_use_bytes, 0);
}

// ---- copies ----

TEST_P(DeviceContract, CopiesMoveTheBytesAndCountEachDirection) {
  auto device = make_device(kMiB);
  // Zero bytes: no memory, and copies that issue nothing, are complete at once and are not counted.
  EXPECT_EQ(device->allocate(0, "nothing"), nullptr);
  device->deallocate(nullptr);
  const Event none = device->copy_to_device(nullptr, nullptr, 0);
  EXPECT_EQ(loads_issued(none), 0U);
  EXPECT_TRUE(device->is_complete(none));

  const std::vector<float> src = iota_floats(1000, 1.0F);
  void* d = device->allocate(4000, "d");
  const Event up = device->copy_to_device(d, src.data(), 4000);
  EXPECT_EQ(loads_issued(up), 1U);
  EXPECT_TRUE(device->is_complete(device->copy_to_host(nullptr, d, 0)));
  device->wait(Stream::kDeviceToHost, up);
  // Back in two halves, the second from an offset inside the allocation.
  std::vector<float> back(1000, 0.0F);
  device->copy_to_host(back.data(), d, 2000);
  device->synchronize(device->copy_to_host(back.data() + 500, static_cast<char*>(d) + 2000, 2000));
  EXPECT_EQ(back, src);

  const DeviceStats stats = device->stats();
  EXPECT_EQ(stats.h2d_bytes, 4000);
  EXPECT_EQ(stats.h2d_copies, 1);
  EXPECT_EQ(stats.d2h_bytes, 4000);
  EXPECT_EQ(stats.d2h_copies, 2);
  EXPECT_EQ(stats.pageable_copies, 3);
  device->deallocate(d);
}

TEST_P(DeviceContract, CopiesOnOneEngineCompleteInIssueOrder) {
  auto device = make_device(0);
  constexpr std::size_t kFloats = 256 * 1024;
  constexpr int kCopies = 32;
  DeviceArray<float> d(*device, kFloats, "d");
  // A long copy first, so that the ones below queue behind it instead of each running as it is issued.
  const std::vector<float> big(8 * kFloats, 1.0F);
  DeviceArray<float> busy(*device, 8 * kFloats, "busy");
  upload(*device, busy.view(), big.data());

  // Every upload overwrites the whole buffer: only the last may be visible to the download ordered after it.
  std::vector<std::vector<float>> sources;
  for (int i = 0; i < kCopies; ++i) sources.emplace_back(kFloats, static_cast<float>(i));
  std::vector<Event> loads;
  for (const auto& s : sources) loads.push_back(upload(*device, d.view(), s.data()));
  device->wait(Stream::kDeviceToHost, loads.back());
  std::vector<float> back(kFloats, -1.0F);
  device->synchronize(download(*device, back.data(), std::as_const(d).view()));
  for (const Event& e : loads) EXPECT_TRUE(device->is_complete(e));
  EXPECT_EQ(back, std::vector<float>(kFloats, static_cast<float>(kCopies - 1)));
}

TEST(CpuDevice, RejectsCopiesOutsideDeviceMemory) {
  auto device = make_cpu_device(kMiB);
  void* d = device->allocate(256, "d");
  void* other = device->allocate(256, "other");
  std::vector<float> host(128, 0.0F);

  EXPECT_TRUE(mentions(message_of([&] { device->copy_to_device(d, host.data(), 257); }), "overruns device buffer 'd'"));
  EXPECT_THROW(device->copy_to_host(host.data(), static_cast<char*>(d) + 128, 129), Error);
  EXPECT_TRUE(
      mentions(message_of([&] { device->copy_to_device(host.data(), host.data(), 64); }), "not live device memory"));
  // The host side of a copy must be host memory.
  const std::string message = message_of([&] { device->copy_to_device(d, other, 64); });
  EXPECT_TRUE(mentions(message, "host access to device memory"));
  EXPECT_TRUE(mentions(message, "'other'"));
  EXPECT_THROW(device->copy_to_host(other, d, 64), Error);
  EXPECT_THROW(device->copy_to_device(d, host.data(), -1), Error);
  EXPECT_THROW(device->wait(Stream::kCompute, Event{Stream::kHostToDevice, {0, 1, 0}}), Error) << "never issued";

  EXPECT_EQ(device->stats().h2d_copies + device->stats().d2h_copies, 0) << "rejected copies are not counted";
  const Event first = device->copy_to_device(d, host.data(), 256);
  EXPECT_EQ(loads_issued(first), 1U) << "nor do they take positions";
  device->synchronize();
  device->deallocate(d);
  device->deallocate(other);
}

TEST(CpuDevice, HostAccessToDeviceMemoryThrows) {
  auto device = make_cpu_device(kMiB);
  void* d = device->allocate(512, "gradients");
  const std::string message = message_of([&] { device->check_host_access(static_cast<char*>(d) + 16, 8, "loss"); });
  for (const char* part : {"host access to device memory", "loss", "'gradients'"}) EXPECT_TRUE(mentions(message, part));
  // Only the allocation itself is device memory: host memory, and the byte after its end, are not.
  const std::vector<float> host(16, 0.0F);
  EXPECT_NO_THROW(device->check_host_access(host.data(), 64, "host"));
  EXPECT_NO_THROW(device->check_host_access(static_cast<char*>(d) + 512, 1, "past the end"));
  EXPECT_THROW(device->check_host_access(static_cast<char*>(d) + 511, 1, "last byte"), Error);
  device->deallocate(d);
}

// ---- the two copy engines ----

TEST(CpuDevice, CopyEnginesAreOrderedOnlyByEvents) {
  auto device = make_cpu_device(0);
  const std::vector<float> big(16 * kMiB, 1.0F);  // 64 MiB
  const std::vector<float> first(1024, -1.0F);
  const std::vector<float> second = iota_floats(1024, 5.0F);
  DeviceArray<float> busy(*device, static_cast<std::int64_t>(big.size()), "busy");
  DeviceArray<float> d(*device, 1024, "d");
  device->synchronize(upload(*device, d.view(), first.data()));

  // Long loads queue ahead of the one the download needs: without the wait the download would see `first`.
  for (int i = 0; i < 4; ++i) upload(*device, busy.view(), big.data());
  const Event loaded = upload(*device, d.view(), second.data());
  std::vector<float> back(1024, 0.0F);
  EXPECT_TRUE(mentions(message_of([&] { download(*device, back.data(), std::as_const(d).view()); }),
                       "copy to host of device buffer 'd' issued before its stream waited"));
  device->wait(Stream::kDeviceToHost, loaded);
  const Event read = download(*device, back.data(), std::as_const(d).view());
  // A load over a buffer the download still reads is refused the same way until it waits for the download.
  EXPECT_TRUE(mentions(message_of([&] { upload(*device, d.view(), first.data()); }),
                       "copy to device of device buffer 'd' issued before its stream waited"));
  device->wait(Stream::kHostToDevice, read);
  const Event reloaded = upload(*device, d.view(), first.data());
  device->synchronize(read);
  EXPECT_TRUE(device->is_complete(loaded));
  EXPECT_EQ(back, second);
  device->synchronize(reloaded);
}

TEST(CpuDevice, EachDirectionHasItsOwnEngine) {
  // A small download must not queue behind long loads, as it would with one engine for both directions (where
  // it could only ever complete after them). How far the loads got is timing, so a few tries are allowed; with
  // a shared engine none could succeed.
  auto device = make_cpu_device(0);
  const std::vector<float> big(16 * kMiB, 1.0F);  // 64 MiB
  const std::vector<float> small = iota_floats(1024, 3.0F);
  DeviceArray<float> busy(*device, static_cast<std::int64_t>(big.size()), "busy");
  DeviceArray<float> d(*device, 1024, "d");
  device->synchronize(upload(*device, d.view(), small.data()));
  bool overtook = false;
  for (int attempt = 0; attempt < 5 && !overtook; ++attempt) {
    Event loads;
    for (int i = 0; i < 4; ++i) loads = upload(*device, busy.view(), big.data());
    std::vector<float> back(1024, 0.0F);
    device->synchronize(download(*device, back.data(), std::as_const(d).view()));
    overtook = !device->is_complete(loads);
    EXPECT_EQ(back, small);
    device->synchronize(loads);
  }
  EXPECT_TRUE(overtook) << "the download never completed before 256 MiB of loads issued ahead of it";
}

TEST(CpuDevice, CopiesRunWhileTheHostComputes) {
  auto device = make_cpu_device(0);
  const std::vector<float> src(16 * kMiB, 1.0F);
  DeviceArray<float> d(*device, static_cast<std::int64_t>(src.size()), "d");
  const Event loaded = upload(*device, d.view(), src.data());
  // The host only polls, as it would between its own work: an engine thread must complete the copy meanwhile.
  ASSERT_TRUE(poll_until_complete(*device, loaded)) << "no engine ran the copy";
  device->wait(Stream::kCompute, loaded);
  EXPECT_GT(device->stats().copy_seconds, 0.0);
  EXPECT_EQ(device->stats().wait_seconds, 0.0) << "the host never blocked";
}

// ---- pinned memory and counters ----

TEST(CpuDevice, PinnedHostMemoryMakesCopiesAsynchronous) {
  auto device = make_cpu_device(kMiB);
  DeviceArray<float> d(*device, 256, "d");
  const std::vector<float> expected = iota_floats(256, 0.0F);
  {
    PinnedArray<float> staging(*device);
    EXPECT_EQ(device->stats().pinned_bytes, 0);
    float* pinned = staging.reserve(256);
    EXPECT_EQ(staging.reserve(100), pinned) << "enough capacity: no new block";
    EXPECT_EQ(device->stats().pinned_bytes, 1024);
    EXPECT_EQ(device->stats().in_use_bytes, 1024) << "pinned memory is not charged to the budget";
    EXPECT_NO_THROW(device->check_host_access(pinned, 1024, "staging")) << "pinned memory is host memory";

    std::copy(expected.begin(), expected.end(), pinned);
    device->wait(Stream::kDeviceToHost, upload(*device, d.view(), pinned));
    std::vector<float> back(256, 0.0F);
    device->synchronize(download(*device, pinned + 128, std::as_const(d).view().subspan(128, 128)));
    EXPECT_EQ(device->stats().pageable_copies, 0);
    device->synchronize(download(*device, back.data(), std::as_const(d).view()));
    EXPECT_EQ(device->stats().pageable_copies, 1);
    EXPECT_EQ(back, expected);

    staging.reserve(512);
    EXPECT_EQ(device->stats().pinned_bytes, 2048) << "growing replaces the block";
  }
  EXPECT_EQ(device->stats().pinned_bytes, 0);
}

TEST_P(DeviceContract, ResetTransferStatsKeepsTheMemoryInUse) {
  auto device = make_device(kMiB);
  void* kept = device->allocate(1024, "kept");
  const std::vector<float> host(256, 3.0F);
  std::vector<float> back(256, 0.0F);
  device->wait(Stream::kDeviceToHost, device->copy_to_device(kept, host.data(), 1024));
  device->synchronize(device->copy_to_host(back.data(), kept, 1024));

  device->reset_transfer_stats();
  DeviceStats stats = device->stats();
  EXPECT_EQ(stats.h2d_bytes + stats.d2h_bytes + stats.h2d_copies + stats.d2h_copies + stats.pageable_copies, 0);
  EXPECT_EQ(stats.copy_seconds + stats.wait_seconds, 0.0);
  EXPECT_EQ(stats.in_use_bytes, 1024);

  device->synchronize(device->copy_to_device(kept, host.data(), 512));
  stats = device->stats();
  EXPECT_EQ(stats.h2d_bytes, 512);
  EXPECT_EQ(stats.h2d_copies, 1);
  device->deallocate(kept);
}

TEST_P(DeviceContract, TypedCopiesMoveRowRangesAndCheckShapes) {
  auto device = make_device(kMiB);
  DeviceMatrix rows(*device, 8, 3, "rows");
  Matrix host(8, 3);
  for (std::int64_t i = 0; i < host.size(); ++i) host.data()[i] = static_cast<float>(i);
  upload(*device, rows.view().slice(0, 5), host.view().slice(0, 5));
  device->wait(Stream::kDeviceToHost, upload(*device, rows.view().slice(5, 3), host.view().slice(5, 3)));
  Matrix back(3, 3, -1.0F);
  device->synchronize(download(*device, back.view(), std::as_const(rows).view().slice(4, 3)));
  for (std::int64_t r = 0; r < 3; ++r) {
    for (std::int64_t c = 0; c < 3; ++c) EXPECT_EQ(back(r, c), host(4 + r, c));
  }
  Matrix wrong_cols(2, 4);
  EXPECT_THROW(upload(*device, rows.view().slice(0, 2), wrong_cols.view()), Error);
  EXPECT_THROW(download(*device, back.view(), rows.view().slice(6, 3)), Error) << "rows 6..9 of 8";
  EXPECT_EQ(device->stats().h2d_bytes, 8 * 3 * 4);
}

// ---- threads, freeing and shutdown ----

TEST_P(DeviceContract, AllocationAndCopiesFromTwoThreads) {
  constexpr std::int64_t kMaxBytes = 4096;
  constexpr std::size_t kLive = 4;
  // Less than one thread's worst case, so that refusals happen however the threads interleave.
  const std::int64_t budget = kMaxBytes * kLive * 3 / 4;
  auto device = make_device(budget);
  std::atomic<int> refused = 0;
  std::atomic<int> mismatches = 0;
  std::latch start(2);
  auto worker = [&](int id) {
    start.arrive_and_wait();
    std::mt19937 rng(static_cast<unsigned>(id));
    std::uniform_int_distribution<std::int64_t> size(1, kMaxBytes / 4);
    std::vector<std::pair<void*, std::int64_t>> live;
    for (int i = 0; i < 3000; ++i) {
      if (live.size() == kLive) {
        device->deallocate(live.front().first);
        live.erase(live.begin());
      }
      const std::int64_t floats = size(rng);
      try {
        live.emplace_back(device->allocate(floats * 4, "worker block"), floats);
      } catch (const OutOfBudget&) {
        ++refused;
        continue;
      }
      if (i % 8 == 0) {
        const std::vector<float> src(static_cast<std::size_t>(floats), static_cast<float>(id * 10000 + i));
        std::vector<float> back(src.size(), -1.0F);
        device->wait(Stream::kDeviceToHost, device->copy_to_device(live.back().first, src.data(), floats * 4));
        device->synchronize(device->copy_to_host(back.data(), live.back().first, floats * 4));
        if (back != src) ++mismatches;
      }
    }
    for (const auto& block : live) device->deallocate(block.first);
  };
  std::thread other(worker, 1);
  worker(0);
  other.join();

  const DeviceStats stats = device->stats();
  EXPECT_EQ(stats.in_use_bytes, 0);
  EXPECT_LE(stats.peak_bytes, budget);
  EXPECT_GT(stats.peak_bytes, budget / 2);
  EXPECT_GT(refused.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(stats.h2d_copies, stats.d2h_copies);
}

TEST_P(DeviceContract, DeallocateWaitsForPendingCopies) {
  auto device = make_device(0);
  const std::vector<float> src(16 * kMiB, 2.0F);
  const auto bytes = static_cast<std::int64_t>(src.size() * sizeof(float));
  void* d = device->allocate(bytes, "d");
  Event last;
  for (int i = 0; i < 4; ++i) last = device->copy_to_device(d, src.data(), bytes);
  device->deallocate(d);
  // Kernels that reuse the memory run on the compute stream: it must be ordered after the copies.
  device->synchronize(device->record(Stream::kCompute));
  EXPECT_TRUE(device->is_complete(last)) << "the memory was freed under a copy still writing it";
  EXPECT_EQ(device->stats().in_use_bytes, 0);
}

TEST_P(DeviceContract, DestructionCompletesPendingCopiesAndFreesLiveMemory) {
  const std::vector<float> src = iota_floats(kMiB, 7.0F);
  const auto bytes = static_cast<std::int64_t>(src.size() * sizeof(float));
  std::vector<float> back(src.size(), -1.0F);
  {
    auto device = make_device(8 * kMiB);
    // Left live on purpose: deallocate would wait for the copies, which must still be queued at destruction.
    // The destructor frees it (with a warning).
    void* d = device->allocate(bytes, "d");
    Event loaded;
    for (int i = 0; i < 16; ++i) loaded = device->copy_to_device(d, src.data(), bytes);
    device->wait(Stream::kDeviceToHost, loaded);
    device->copy_to_host(back.data(), d, bytes);
  }
  EXPECT_EQ(back, src) << "the destructor must drain both engines' queues, not drop them";
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceContract, test::all_backends(), test::BackendName());

}  // namespace
}  // namespace nj

namespace nj {
namespace {

// Rows that lie in one block of host memory travel straight on a device that copies pageable memory as fast as
// staged memory (the CPU device); other lists of rows are packed into staging, as on a GPU. Either way the
// device rows and the host rows end up the same.
TEST(CpuDevice, TransfersCopyABlockOfRowsStraightAndPackTheRest) {
  auto device = make_cpu_device(0);
  ASSERT_TRUE(device->copies_pageable_memory_directly());
  Transfers transfers(*device);
  Matrix host(8, 4);
  std::iota(host.span().begin(), host.span().end(), 0.0F);
  DeviceMatrix rows(*device, 3, 4, "rows: test");
  Matrix back(8, 4, -1.0F);
  const auto copied = [&](std::vector<vid_t> listed) {
    const std::int64_t before = device->stats().pageable_copies;
    transfers.upload(host.view(), listed, rows.view());
    transfers.download(rows.view(), back.view(), listed);
    for (std::size_t i = 0; i < listed.size(); ++i) {
      const auto r = static_cast<std::int64_t>(listed[i]);
      EXPECT_TRUE(std::equal(host.row(r), host.row(r) + 4, back.row(r))) << "row " << r;
    }
    return device->stats().pageable_copies - before;
  };
  EXPECT_EQ(copied({2, 3, 4}), 2) << "a block of rows goes straight, both ways";
  EXPECT_EQ(copied({5, 1, 3}), 0) << "scattered rows go through staging";
  EXPECT_EQ(copied({5, 6, 7}), 2);
}

// A replay on the planning device forecasts memory only: Transfers moves no row, so host rows keep what they held
// and a replay never makes them resident, while the allocations and the row counts are what a run makes.
TEST(PlanningDevice, TransfersMoveNoRowsButCountThem) {
  PlanningDevice device;
  Transfers transfers(device);
  Matrix host(8, 4, 7.0F);
  DeviceMatrix rows(device, 3, 4, "rows: test");
  const std::vector<vid_t> picked = {6, 1, 3};
  transfers.upload(host.view(), picked, rows.view());
  transfers.download(rows.view(), host.view(), picked);
  EXPECT_TRUE(std::all_of(host.span().begin(), host.span().end(), [](float v) { return v == 7.0F; }));
  const DeviceArray<vid_t> slots = to_device<vid_t>(transfers, picked, "index: test");
  const auto [h2d, d2h] = transfers.take_traffic();
  EXPECT_EQ(h2d[Traffic::kRows], 3 * 4 * 4);
  EXPECT_EQ(d2h[Traffic::kRows], 3 * 4 * 4);
  EXPECT_EQ(h2d[Traffic::kIndex], 3 * 4) << "ids are counted apart from rows";
  EXPECT_EQ(h2d.total(), 3 * 4 * 4 + 3 * 4);
  EXPECT_EQ(device.forecast().peak_bytes, 3 * 4 * 4 + 3 * 4);
}

// Each phase's peak is the arena's extent at its highest from the phase's mark to the next: what was live when it
// began counts; what it freed before a later phase began does not count there. A phase never marked reads 0.
TEST(PlanningDevice, EachMarkedPhaseHasThePeakOfItsOwnAllocations) {
  constexpr std::int64_t kUnit = kArenaAlignment;
  PlanningDevice device;
  void* lasting = device.allocate(2 * kUnit, "rows: lasting");
  device.begin_phase(0);
  void* first = device.allocate(5 * kUnit, "rows: pool");
  device.deallocate(first);
  device.begin_phase(1);  // allocates nothing
  device.begin_phase(3);
  void* second = device.allocate(kUnit, "rows: pool");
  void* third = device.allocate(kUnit, "rows: step");
  device.deallocate(third);
  device.deallocate(second);
  device.deallocate(lasting);
  const MemoryForecast forecast = device.forecast();
  EXPECT_EQ(forecast.phase_peak_footprint_bytes, (std::vector<std::int64_t>{7 * kUnit, 2 * kUnit, 0, 4 * kUnit}));
  EXPECT_EQ(forecast.peak_footprint_bytes, 7 * kUnit);
}

}  // namespace
}  // namespace nj
