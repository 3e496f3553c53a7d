#pragma once
// A device that only places allocations. Planning replays an epoch of the executor on it, with kernels that do
// nothing (make_planning_backend, nj/kernels/planning_backend.hpp), to learn exactly what a run allocates, when, and
// how the arena places it: the same first-fit arena as the real devices, so the predicted peak footprint, fragmentation
// included, is what the run will see. Copies to the host write zeros; nothing else touches memory.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nj/device/device.hpp"
#include "nj/device/transfers.hpp"

namespace nj {

struct MemoryForecast {
  std::int64_t peak_bytes = 0;            // requested bytes live at once, at most
  std::int64_t peak_footprint_bytes = 0;  // the arena's extent at its highest: what a budget must hold
  // Requested bytes live when the footprint peaked, by category: the part of each allocation's name before
  // ':' ("rows: transform inputs" counts under "rows").
  std::map<std::string, std::int64_t> at_peak;
  // The most requested bytes each category held at once, at any time.
  std::map<std::string, std::int64_t> category_peaks;
  // Per phase the replay marked (PlanningDevice::begin_phase), the arena's extent at its highest during it: what the
  // budget leaves that phase is the budget less this. Phases never marked read 0.
  std::vector<std::int64_t> phase_peak_footprint_bytes;
  // What the replayed step copied each way, by what each copy carried (the replay's Transfers count them as a run's
  // do): the bytes a run's epoch measures, counted by the executor's own code rather than estimated beside it.
  TrafficBytes h2d, d2h;
  // The most one copy moved through page-locked staging, since the executor last released its staging.
  std::int64_t largest_copy_bytes = 0;
  // The footprint beyond the requested bytes at its peak: alignment and fragmentation.
  std::int64_t padding_at_peak() const;
};

class PlanningDevice final : public Device {
 public:
  // `copies_pageable_memory_directly`: as the device planned for does (Device::copies_pageable_memory_directly),
  // which decides what its copies stage.
  explicit PlanningDevice(bool copies_pageable_memory_directly = false);
  ~PlanningDevice() override;
  std::string_view name() const override { return "planning"; }
  std::int64_t budget_bytes() const override { return kUnlimited; }
  bool moves_data() const override { return false; }
  bool copies_pageable_memory_directly() const override { return copies_pageable_memory_directly_; }
  void* allocate(std::int64_t bytes, std::string_view what) override;
  void deallocate(void* ptr) noexcept override;
  void* allocate_pinned(std::int64_t bytes) override;
  void deallocate_pinned(void* ptr) noexcept override;
  Event copy_to_device(void* device_dst, const void* host_src, std::int64_t bytes) override;
  Event copy_to_host(void* host_dst, const void* device_src, std::int64_t bytes) override;
  Event record(Stream stream) override { return {stream, {}}; }
  void wait(Stream /*waiter*/, const Event& /*event*/) override {}
  bool is_complete(const Event& /*event*/) override { return true; }
  void synchronize(const Event& /*event*/) override {}
  void synchronize() override {}
  void use(const void* /*ptr*/, std::int64_t /*bytes*/, Access /*access*/, std::string_view /*what*/) override {}
  void check_host_access(const void* /*ptr*/, std::int64_t /*bytes*/, std::string_view /*what*/) const override {}
  DeviceStats stats() const override;
  void reset_transfer_stats() override {}

  // What is allocated from now until the next call counts toward phase `phase`'s peak, beside what is live now.
  void begin_phase(std::size_t phase);
  MemoryForecast forecast() const { return forecast_; }

 private:
  struct Live;
  std::unique_ptr<Live> live_;
  MemoryForecast forecast_;
  std::optional<std::size_t> phase_;  // marked last
  bool copies_pageable_memory_directly_;
};

}  // namespace nj
