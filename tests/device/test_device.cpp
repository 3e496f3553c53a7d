// The device contract on the CPU device: the budget is exact, copies move the right bytes in issue order on
// an engine that runs beside the caller, the counters add up, and buffers, threads and shutdown are safe.
#include <gtest/gtest.h>

#include <cstdint>
#include <latch>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nj/device/device.hpp"

namespace nj {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

std::int64_t byte_size(const std::vector<float>& v) { return static_cast<std::int64_t>(v.size() * sizeof(float)); }

std::vector<float> iota_floats(std::size_t count, float first) {
  std::vector<float> v(count);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::string out_of_budget_message(Device& device, std::int64_t bytes, std::string_view what) {
  try {
    device.allocate(bytes, what);
  } catch (const OutOfBudget& e) {
    return e.what();
  }
  ADD_FAILURE() << "allocating " << bytes << " bytes did not throw OutOfBudget";
  return {};
}

TEST(CpuDevice, AllocatesUpToExactlyTheBudget) {
  auto device = make_cpu_device(1000);
  EXPECT_EQ(device->name(), "cpu");
  EXPECT_EQ(device->budget_bytes(), 1000);

  void* a = device->allocate(600, "a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 64, 0U);

  const std::string message = out_of_budget_message(*device, 401, "layer 2 activations");
  EXPECT_NE(message.find("layer 2 activations"), std::string::npos) << message;
  EXPECT_NE(message.find("401"), std::string::npos) << message;
  EXPECT_NE(message.find("600"), std::string::npos) << message;
  EXPECT_NE(message.find("1000"), std::string::npos) << message;
  EXPECT_EQ(device->stats().in_use_bytes, 600) << "a refused allocation must not be charged";

  void* b = device->allocate(400, "b");
  EXPECT_EQ(device->stats().in_use_bytes, 1000);
  EXPECT_THROW(device->allocate(1, "one more byte"), OutOfBudget);

  device->deallocate(a);
  EXPECT_EQ(device->stats().in_use_bytes, 400);
  void* c = device->allocate(600, "c");
  EXPECT_EQ(device->stats().in_use_bytes, 1000);
  device->deallocate(b);
  device->deallocate(c);

  const DeviceStats stats = device->stats();
  EXPECT_EQ(stats.in_use_bytes, 0);
  EXPECT_EQ(stats.peak_bytes, 1000);
}

TEST(CpuDevice, PeakIsTheHighWaterMark) {
  auto device = make_cpu_device(kMiB);
  void* a = device->allocate(300, "a");
  void* b = device->allocate(500, "b");
  device->deallocate(a);
  void* c = device->allocate(100, "c");
  const DeviceStats stats = device->stats();
  EXPECT_EQ(stats.in_use_bytes, 600);
  EXPECT_EQ(stats.peak_bytes, 800);
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

TEST(CpuDevice, ZeroBytesAreFree) {
  auto device = make_cpu_device(64);
  EXPECT_EQ(device->allocate(0, "nothing"), nullptr);
  device->deallocate(nullptr);
  EXPECT_EQ(device->copy_to_device(nullptr, nullptr, 0), CopyTicket{0});
  device->wait(0);
  EXPECT_TRUE(device->is_complete(0));

  void* d = device->allocate(64, "d");
  const std::vector<float> host(16, 1.0F);
  const CopyTicket t = device->copy_to_device(d, host.data(), 64);
  EXPECT_EQ(t, CopyTicket{1});
  EXPECT_EQ(device->copy_to_host(nullptr, d, 0), t) << "a zero-byte copy returns the latest ticket";
  device->synchronize();
  const DeviceStats stats = device->stats();
  EXPECT_EQ(stats.h2d_copies, 1);
  EXPECT_EQ(stats.d2h_copies, 0);
  EXPECT_EQ(stats.d2h_bytes, 0);
  device->deallocate(d);
}

TEST(CpuDevice, CopiesMoveTheBytesAndCountEachDirection) {
  auto device = make_cpu_device(kMiB);
  const std::vector<float> src = iota_floats(1000, 1.0F);
  void* d = device->allocate(byte_size(src), "d");

  const CopyTicket up = device->copy_to_device(d, src.data(), byte_size(src));
  std::vector<float> back(1000, 0.0F);
  // The first half back from the device, then the rest, at an offset inside the allocation.
  const CopyTicket down1 = device->copy_to_host(back.data(), d, 2000);
  const CopyTicket down2 = device->copy_to_host(back.data() + 500, static_cast<char*>(d) + 2000, 2000);
  EXPECT_EQ(down1, up + 1);
  EXPECT_EQ(down2, up + 2);
  device->wait(down2);
  EXPECT_EQ(back, src);

  const DeviceStats stats = device->stats();
  EXPECT_EQ(stats.h2d_bytes, 4000);
  EXPECT_EQ(stats.h2d_copies, 1);
  EXPECT_EQ(stats.d2h_bytes, 4000);
  EXPECT_EQ(stats.d2h_copies, 2);
  EXPECT_EQ(stats.in_use_bytes, 4000);
  device->deallocate(d);
}

TEST(CpuDevice, CopiesCompleteInIssueOrder) {
  auto device = make_cpu_device(64 * kMiB);
  constexpr std::size_t kFloats = 256 * 1024;  // 1 MiB
  constexpr int kCopies = 32;
  void* d = device->allocate(kFloats * sizeof(float), "d");
  // A long copy first, so that the ones below queue up behind it instead of each running as it is issued.
  const std::vector<float> big(8 * kFloats, 1.0F);
  void* busy = device->allocate(byte_size(big), "busy");
  device->copy_to_device(busy, big.data(), byte_size(big));

  // Every upload overwrites the whole buffer: only the last one may be visible to the download after it.
  std::vector<std::vector<float>> sources;
  for (int i = 0; i < kCopies; ++i) sources.emplace_back(kFloats, static_cast<float>(i));
  std::vector<CopyTicket> tickets;
  for (const auto& s : sources) tickets.push_back(device->copy_to_device(d, s.data(), byte_size(s)));
  std::vector<float> back(kFloats, -1.0F);
  const CopyTicket last = device->copy_to_host(back.data(), d, byte_size(back));
  for (std::size_t i = 1; i < tickets.size(); ++i) EXPECT_EQ(tickets[i], tickets[i - 1] + 1);

  device->wait(last);
  for (const CopyTicket t : tickets) EXPECT_TRUE(device->is_complete(t));
  EXPECT_EQ(back, std::vector<float>(kFloats, static_cast<float>(kCopies - 1)));

  // Slices uploaded one by one are all there when the download issued after them completes.
  const std::vector<float> whole = iota_floats(kFloats, 0.0F);
  constexpr std::size_t kSlice = kFloats / kCopies;
  for (std::size_t s = 0; s < kCopies; ++s) {
    device->copy_to_device(static_cast<float*>(d) + s * kSlice, whole.data() + s * kSlice, kSlice * sizeof(float));
  }
  device->wait(device->copy_to_host(back.data(), d, byte_size(back)));
  EXPECT_EQ(back, whole);
  device->deallocate(d);
  device->deallocate(busy);
}

TEST(CpuDevice, CopiesRunWhileTheCallerComputes) {
  auto device = make_cpu_device(128 * kMiB);
  constexpr std::size_t kFloats = 16 * 1024 * 1024;  // 64 MiB
  const std::vector<float> src = iota_floats(kFloats, 0.0F);
  void* d = device->allocate(byte_size(src), "d");

  const CopyTicket t = device->copy_to_device(d, src.data(), byte_size(src));
  const std::vector<double> work(1 << 20, 0.5);
  const double computed = std::accumulate(work.begin(), work.end(), 0.0);
  device->wait(t);
  EXPECT_EQ(computed, 0.5 * (1 << 20));

  std::vector<float> back(kFloats, -1.0F);
  device->wait(device->copy_to_host(back.data(), d, byte_size(back)));
  EXPECT_EQ(back, src);
  const DeviceStats stats = device->stats();
  EXPECT_GT(stats.copy_seconds, 0.0);
  EXPECT_GE(stats.wait_seconds, 0.0);
  device->deallocate(d);
}

TEST(CpuDevice, DeallocateWaitsForPendingCopies) {
  auto device = make_cpu_device(64 * kMiB);
  const std::vector<float> src(16 * 1024 * 1024, 2.0F);
  void* d = device->allocate(byte_size(src), "d");
  const CopyTicket t = device->copy_to_device(d, src.data(), byte_size(src));
  device->deallocate(d);
  EXPECT_TRUE(device->is_complete(t));
  EXPECT_EQ(device->stats().in_use_bytes, 0);
}

TEST(CpuDevice, RejectsCopiesOutsideDeviceMemory) {
  auto device = make_cpu_device(kMiB);
  void* d = device->allocate(256, "d");
  void* other = device->allocate(256, "other");
  std::vector<float> host(128, 0.0F);

  EXPECT_THROW(device->copy_to_device(d, host.data(), 257), Error) << "past the allocation's end";
  EXPECT_THROW(device->copy_to_host(host.data(), static_cast<char*>(d) + 128, 129), Error);
  EXPECT_THROW(device->copy_to_device(host.data(), host.data(), 64), Error) << "the device side is host memory";
  EXPECT_THROW(device->copy_to_device(d, other, 64), Error) << "the host side is device memory";
  EXPECT_THROW(device->copy_to_host(d, other, 64), Error);
  EXPECT_THROW(device->copy_to_device(d, host.data(), -1), Error);
  EXPECT_THROW(device->wait(1), Error) << "no copy was issued";

  const DeviceStats stats = device->stats();
  EXPECT_EQ(stats.h2d_copies + stats.d2h_copies, 0) << "rejected copies are not counted";
  EXPECT_EQ(device->copy_to_device(d, host.data(), 256), CopyTicket{1}) << "nor do they take tickets";
  device->synchronize();
  device->deallocate(d);
  device->deallocate(other);
}

TEST(CpuDevice, ResetTransferStatsKeepsTheMemoryInUse) {
  auto device = make_cpu_device(kMiB);
  void* big = device->allocate(4096, "big");
  void* kept = device->allocate(1024, "kept");
  const std::vector<float> host(256, 3.0F);
  std::vector<float> back(256, 0.0F);
  device->copy_to_device(kept, host.data(), 1024);
  device->wait(device->copy_to_host(back.data(), kept, 1024));
  device->deallocate(big);

  device->reset_transfer_stats();
  DeviceStats stats = device->stats();
  EXPECT_EQ(stats.h2d_bytes, 0);
  EXPECT_EQ(stats.d2h_bytes, 0);
  EXPECT_EQ(stats.h2d_copies, 0);
  EXPECT_EQ(stats.d2h_copies, 0);
  EXPECT_EQ(stats.copy_seconds, 0.0);
  EXPECT_EQ(stats.wait_seconds, 0.0);
  EXPECT_EQ(stats.in_use_bytes, 1024);
  EXPECT_EQ(stats.peak_bytes, 1024);

  device->wait(device->copy_to_device(kept, host.data(), 512));
  stats = device->stats();
  EXPECT_EQ(stats.h2d_bytes, 512);
  EXPECT_EQ(stats.h2d_copies, 1);
  device->deallocate(kept);
}

TEST(CpuDevice, DeviceRowsFreeTheirBytes) {
  auto device = make_cpu_device(10 * 16 * 4 * 2);
  {
    DeviceRows a(*device, 10, 16, "a");
    EXPECT_EQ(a.bytes(), 640);
    EXPECT_EQ(device->stats().in_use_bytes, 640);

    DeviceRows b(std::move(a));
    EXPECT_EQ(a.bytes(), 0);  // NOLINT(bugprone-use-after-move): moved-from objects are empty
    EXPECT_EQ(b.bytes(), 640);
    EXPECT_EQ(device->stats().in_use_bytes, 640);

    DeviceRows c(*device, 5, 16, "c");
    EXPECT_EQ(device->stats().in_use_bytes, 960);
    c = std::move(b);  // frees c's own rows
    EXPECT_EQ(device->stats().in_use_bytes, 640);
    EXPECT_EQ(c.rows(), 10);

    try {
      DeviceRows too_big(*device, 11, 16, "too big");
      ADD_FAILURE() << "11 more rows fit a budget with room for 10";
    } catch (const OutOfBudget& e) {
      EXPECT_NE(std::string(e.what()).find("too big"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(device->stats().in_use_bytes, 0);
}

TEST(CpuDevice, DeviceRowsUploadAndDownloadRowRanges) {
  auto device = make_cpu_device(kMiB);
  DeviceRows rows(*device, 8, 3, "rows");
  Matrix host(8, 3);
  for (std::int64_t i = 0; i < host.size(); ++i) host.data()[i] = static_cast<float>(i);

  rows.upload(host.view().slice(0, 5));
  rows.upload(host.view().slice(5, 3), 5);
  Matrix back(3, 3, -1.0F);
  device->wait(rows.download(back.view(), 4));
  for (std::int64_t r = 0; r < 3; ++r) {
    for (std::int64_t c = 0; c < 3; ++c) EXPECT_EQ(back(r, c), host(4 + r, c));
  }

  Matrix wrong_cols(2, 4);
  EXPECT_THROW(rows.upload(wrong_cols.view()), Error);
  EXPECT_THROW(rows.download(back.view(), 6), Error) << "rows 6..9 of 8";
  EXPECT_EQ(device->stats().h2d_bytes, 8 * 3 * 4);
}

TEST(CpuDevice, AllocationAndCopiesFromTwoThreads) {
  constexpr std::int64_t kMaxBytes = 4096;
  constexpr int kLive = 4;
  // Less than one thread's worst case, so that refusals happen however the threads interleave.
  const std::int64_t budget = kMaxBytes * kLive * 3 / 4;
  auto device = make_cpu_device(budget);

  std::vector<int> refused(2, 0);
  std::vector<int> mismatches(2, 0);
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
        ++refused[static_cast<std::size_t>(id)];
        continue;
      }
      if (i % 8 == 0) {
        const std::vector<float> src(static_cast<std::size_t>(floats), static_cast<float>(id * 10000 + i));
        std::vector<float> back(src.size(), -1.0F);
        device->copy_to_device(live.back().first, src.data(), floats * 4);
        device->wait(device->copy_to_host(back.data(), live.back().first, floats * 4));
        if (back != src) ++mismatches[static_cast<std::size_t>(id)];
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
  EXPECT_GT(refused[0] + refused[1], 0);
  EXPECT_EQ(mismatches[0] + mismatches[1], 0);
  EXPECT_EQ(stats.h2d_copies, stats.d2h_copies);
}

TEST(CpuDevice, DestructionCompletesPendingCopies) {
  constexpr std::size_t kFloats = 1024 * 1024;  // 4 MiB
  const std::vector<float> src = iota_floats(kFloats, 7.0F);
  std::vector<float> back(kFloats, -1.0F);
  {
    auto device = make_cpu_device(8 * kMiB);
    // Left live on purpose: deallocate would wait for the copies, and they must still be in flight at
    // destruction. The destructor frees it (with a warning).
    void* d = device->allocate(byte_size(src), "d");
    for (int i = 0; i < 16; ++i) device->copy_to_device(d, src.data(), byte_size(src));
    device->copy_to_host(back.data(), d, byte_size(back));
  }
  EXPECT_EQ(back, src) << "the destructor must drain the queue, not drop it";
}

}  // namespace
}  // namespace nj
