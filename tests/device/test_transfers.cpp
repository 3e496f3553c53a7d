#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "nj/core/host_memory.hpp"
#include "nj/device/planning_device.hpp"
#include "nj/device/transfers.hpp"
#include "support/backends.hpp"
#include "support/on_device.hpp"

namespace nj {
namespace {

Matrix counting(std::int64_t rows, std::int64_t cols) {
  Matrix m(rows, cols);
  std::iota(m.data(), m.data() + m.size(), 1.0F);
  return m;
}

// Copies larger than a piece go piece by piece through staging of one piece: rows, listed or not, both ways, and
// arrays, arrive whole and in place.
TEST(Transfers, CopiesLargerThanAPieceArriveWholeThroughStagingOfOnePiece) {
  constexpr std::int64_t kPiece = 40;  // three rows of 3 floats, ten ints, five 8-byte ids
  test::OnDevice on(DeviceKind::kCpu, 1, kPiece);
  const Matrix host = counting(17, 3);
  DeviceMatrix device = on.put(host);
  const Matrix whole = on.get(device.view());
  EXPECT_TRUE(std::equal(whole.data(), whole.data() + whole.size(), host.data()));

  // Listed rows, in an order that is not consecutive, up and down.
  std::vector<vid_t> listed(11);
  for (std::size_t i = 0; i < listed.size(); ++i) listed[i] = static_cast<vid_t>((i * 7) % host.rows());
  DeviceMatrix gathered(on.device(), static_cast<std::int64_t>(listed.size()), 3, "test rows");
  on.transfers().upload(host.view(), listed, gathered.view());
  const Matrix back = on.get(gathered.view());
  Matrix scattered(host.rows(), 3);
  on.transfers().download(gathered.view(), scattered.view(), listed);
  for (std::size_t i = 0; i < listed.size(); ++i) {
    for (std::int64_t c = 0; c < 3; ++c) {
      EXPECT_EQ(back(static_cast<std::int64_t>(i), c), host(listed[i], c)) << "row " << i;
      EXPECT_EQ(scattered(listed[i], c), host(listed[i], c)) << "row " << listed[i];
    }
  }

  std::vector<gid_t> ids(23);
  std::iota(ids.begin(), ids.end(), gid_t{1} << 40);
  const DeviceArray<gid_t> on_device = on.put_array<gid_t>(ids);
  EXPECT_EQ(on.get_array(on_device.view()), ids);
  EXPECT_LE(on.device().stats().pinned_bytes, kPiece);
  EXPECT_EQ(on.transfers().largest_copy_bytes(), kPiece);
}

// Only copies through page-locked staging count towards it: on the CPU device, whose memory takes a block of host rows
// straight, listed rows stage and whole blocks do not; a planning device counts as the device it plans for would.
// Released, the staging leaves the heap, with the blocks the device kept, and the count starts afresh.
TEST(Transfers, OnlyCopiesThroughStagingCountTowardsItAndReleasedItLeavesTheHeap) {
  const Matrix host = counting(std::int64_t{1} << 16, 8);
  const std::int64_t bytes = host.size() * std::int64_t{sizeof(float)};
  test::OnDevice on(DeviceKind::kCpu);
  DeviceMatrix rows = on.put(host);
  Matrix back(host.rows(), host.cols());
  on.transfers().download(rows.view(), back.view());
  EXPECT_EQ(on.transfers().largest_copy_bytes(), 0);
  std::vector<vid_t> reversed(static_cast<std::size_t>(host.rows()));
  std::iota(reversed.rbegin(), reversed.rend(), vid_t{0});
  on.transfers().upload(host.view(), reversed, rows.view());
  EXPECT_EQ(on.transfers().largest_copy_bytes(), bytes);
  EXPECT_EQ(on.get(rows.view())(0, 0), host(host.rows() - 1, 0));

  const std::int64_t before = heap_bytes_in_use();
  on.transfers().release_staging();
  EXPECT_GE(before - heap_bytes_in_use(), bytes);
  EXPECT_EQ(on.transfers().largest_copy_bytes(), 0);
  EXPECT_EQ(on.device().stats().pinned_bytes, 0);

  for (const bool direct : {true, false}) {
    PlanningDevice planning(direct);
    Transfers transfers(planning);
    DeviceMatrix planned(planning, host.rows(), host.cols(), "test rows");
    transfers.upload(host.view(), {}, planned.view());
    transfers.download(planned.view(), back.view());
    EXPECT_EQ(transfers.largest_copy_bytes(), direct ? 0 : bytes) << (direct ? "straight" : "staged");
  }
}

}  // namespace
}  // namespace nj
