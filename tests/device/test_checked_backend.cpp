// Kernels through make_cpu_resources' checked backend: the emulated device refuses a kernel on memory that is
// freed, too small, or not yet ordered after the copy that fills it, and a copy not ordered after the kernel it
// depends on. On a GPU each of these gives wrong numbers only when the timing is unlucky; here each throws,
// naming the buffer, whatever the timing. Every kernel below that should be refused touches no memory if the
// check were missing (count 0, or in-bounds rows), so a broken check fails the test instead of corrupting it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

#include "nj/device/device.hpp"
#include "nj/runtime/resources.hpp"
#include "support/device_checks.hpp"

namespace nj {
namespace {

using test::mentions;
using test::message_of;
using test::poll_until_complete;

constexpr DeviceSpan<const vid_t> kAllRows{};  // an empty row list: rows 0..count-1

Matrix sample(std::int64_t rows, std::int64_t cols, float first) {
  Matrix m(rows, cols);
  for (std::int64_t i = 0; i < m.size(); ++i) m.data()[i] = first + 0.5F * static_cast<float>(i);
  return m;
}

bool same(const Matrix& a, const Matrix& b) { return std::ranges::equal(a.span(), b.span()); }

// `host` on the device, ready for kernels: the compute stream waited for its load.
DeviceMatrix loaded(Resources& r, const Matrix& host, std::string_view what) {
  DeviceMatrix m(*r.device, host.rows(), host.cols(), what);
  r.device->wait(Stream::kCompute, upload(*r.device, m.view(), host.view()));
  return m;
}

// The rows back on the host, ordered after every kernel issued so far.
Matrix fetched(Resources& r, const DeviceMatrix& m) {
  r.device->wait(Stream::kDeviceToHost, r.device->record(Stream::kCompute));
  Matrix back(m.rows(), m.cols(), -1.0F);
  r.device->synchronize(download(*r.device, back.view(), m.view()));
  return back;
}

TEST(CheckedBackend, KernelBeforeTheComputeStreamWaitedForItsLoadThrows) {
  Resources r = make_cpu_resources(0, 1);
  const Matrix host = sample(4, 8, 1.0F);
  DeviceMatrix features(*r.device, 4, 8, "features");
  DeviceMatrix out(*r.device, 4, 8, "out");
  const Event load = upload(*r.device, features.view(), host.view());
  // The copy has completed, yet nothing ordered the kernel after it: on a GPU only luck would.
  ASSERT_TRUE(poll_until_complete(*r.device, load));
  const std::string message =
      message_of([&] { r.backend->copy_rows(features.view(), kAllRows, out.view(), kAllRows, 4); });
  EXPECT_TRUE(mentions(message, "device buffer 'features' used by copy_rows"));
  EXPECT_TRUE(mentions(message, "before the compute stream waited for the copy that fills it"));

  r.device->wait(Stream::kCompute, load);
  r.backend->copy_rows(features.view(), kAllRows, out.view(), kAllRows, 4);
  EXPECT_TRUE(same(fetched(r, out), host));
}

TEST(CheckedBackend, KernelOverwritingWhatADownloadReadsThrows) {
  Resources r = make_cpu_resources(0, 1);
  const Matrix host = sample(4, 8, 2.0F);
  DeviceMatrix grads = loaded(r, host, "gradients");
  DeviceMatrix copy(*r.device, 4, 8, "copy");
  // The download learns of the load through the compute stream, which waited for it.
  r.device->wait(Stream::kDeviceToHost, r.device->record(Stream::kCompute));
  Matrix saved(4, 8, -1.0F);
  const Event read = download(*r.device, saved.view(), grads.view());
  ASSERT_TRUE(poll_until_complete(*r.device, read));

  // Reading alongside a download is fine; overwriting is not, until the compute stream waits for it.
  EXPECT_NO_THROW(r.backend->copy_rows(grads.view(), kAllRows, copy.view(), kAllRows, 4));
  const std::string message = message_of([&] { r.backend->zero_rows(grads.view(), kAllRows, 0); });
  EXPECT_TRUE(mentions(message, "device buffer 'gradients' overwritten by zero_rows output"));
  EXPECT_TRUE(mentions(message, "before the compute stream waited for the copy that reads it"));

  r.device->wait(Stream::kCompute, read);
  r.backend->zero_rows(grads.view(), kAllRows, 4);
  EXPECT_TRUE(same(saved, host));
  EXPECT_TRUE(same(fetched(r, grads), Matrix(4, 8, 0.0F)));
}

TEST(CheckedBackend, DownloadOfKernelOutputNeedsTheComputeStream) {
  Resources r = make_cpu_resources(0, 1);
  const Matrix host = sample(4, 8, 3.0F);
  DeviceMatrix in = loaded(r, host, "in");
  DeviceMatrix out(*r.device, 4, 8, "out");
  r.backend->copy_rows(in.view(), kAllRows, out.view(), kAllRows, 4);

  Matrix back(4, 8, -1.0F);
  EXPECT_TRUE(mentions(message_of([&] { download(*r.device, back.view(), out.view()); }),
                       "copy to host of device buffer 'out' issued before its stream waited for the kernel"));
  r.device->wait(Stream::kDeviceToHost, r.device->record(Stream::kCompute));
  r.device->synchronize(download(*r.device, back.view(), out.view()));
  EXPECT_TRUE(same(back, host));
}

TEST(CheckedBackend, LoadOverKernelInputNeedsTheComputeStream) {
  Resources r = make_cpu_resources(0, 1);
  DeviceMatrix in = loaded(r, sample(4, 8, 4.0F), "in");
  DeviceMatrix out(*r.device, 4, 8, "out");
  r.backend->copy_rows(in.view(), kAllRows, out.view(), kAllRows, 4);

  const Matrix next = sample(4, 8, 100.0F);
  EXPECT_TRUE(mentions(message_of([&] { upload(*r.device, in.view(), next.view()); }),
                       "copy to device of device buffer 'in' issued before its stream waited for the work"));
  r.device->wait(Stream::kHostToDevice, r.device->record(Stream::kCompute));
  r.device->wait(Stream::kCompute, upload(*r.device, in.view(), next.view()));
  r.backend->copy_rows(in.view(), kAllRows, out.view(), kAllRows, 4);
  EXPECT_TRUE(same(fetched(r, out), next));
}

TEST(CheckedBackend, LoadIntoReusedMemoryNeedsTheComputeStream) {
  // The arena hands freed memory out again at once; on a GPU a kernel issued earlier may still be reading it,
  // so a load into the new buffer must wait for the compute stream. Fresh arena memory needs no such wait.
  Resources r = make_cpu_resources(0, 1);
  const Matrix host = sample(4, 8, 1.0F);
  {
    DeviceMatrix used = loaded(r, host, "used");
    DeviceMatrix out(*r.device, 4, 8, "out");
    r.backend->copy_rows(used.view(), kAllRows, out.view(), kAllRows, 4);
  }
  DeviceMatrix reused(*r.device, 4, 8, "reused");        // first fit: where "used" was
  const DeviceMatrix filler(*r.device, 4, 8, "filler");  // where "out" was
  DeviceMatrix fresh(*r.device, 4, 8, "fresh");          // beyond all the memory used so far
  EXPECT_NO_THROW(r.device->synchronize(upload(*r.device, fresh.view(), host.view())));
  EXPECT_TRUE(mentions(message_of([&] { upload(*r.device, reused.view(), host.view()); }),
                       "copy to device of device buffer 'reused' issued before its stream waited for the work"));
  r.device->wait(Stream::kHostToDevice, r.device->record(Stream::kCompute));
  EXPECT_NO_THROW(r.device->synchronize(upload(*r.device, reused.view(), host.view())));
}

TEST(CheckedBackend, KernelOnFreedMemoryThrows) {
  Resources r = make_cpu_resources(0, 1);
  DeviceMatrix live(*r.device, 4, 8, "live");
  DeviceRows stale_rows;
  DeviceSpan<const vid_t> stale_list;
  {
    DeviceMatrix rows(*r.device, 4, 8, "rows");
    DeviceArray<vid_t> list(*r.device, 2, "row list");
    stale_rows = rows.view();
    stale_list = list.view();
    EXPECT_NO_THROW(r.backend->zero_rows(stale_rows, kAllRows, 4)) << "fine while the rows live";
  }
  // Nothing is allocated after the frees, so no new buffer can sit at the stale addresses.
  EXPECT_TRUE(mentions(message_of([&] { r.backend->zero_rows(stale_rows, kAllRows, 0); }), "not live device memory"));
  EXPECT_TRUE(mentions(message_of([&] { r.backend->zero_rows(live.view(), stale_list, 0); }),
                       "zero_rows rows touches 8 bytes"));
}

TEST(CheckedBackend, KernelViewPastItsAllocationThrows) {
  Resources r = make_cpu_resources(0, 1);
  DeviceMatrix activations(*r.device, 4, 8, "activations");
  // Rows 1..4 of 4: one row past the end, though the kernel is asked to touch none of them.
  const std::string message = message_of([&] { r.backend->zero_rows(activations.view().slice(1, 4), kAllRows, 0); });
  EXPECT_TRUE(mentions(message, "overruns device buffer 'activations'"));
  EXPECT_TRUE(mentions(message, "by 32 bytes"));
  EXPECT_NO_THROW(r.backend->zero_rows(activations.view().slice(1, 3), kAllRows, 3)) << "up to the end is fine";
}

}  // namespace
}  // namespace nj
