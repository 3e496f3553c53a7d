#include "nj/device/planning_device.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "nj/device/arena.hpp"

namespace nj {
namespace {

// Device addresses are never dereferenced here; a high base keeps them apart from null and from host memory.
constexpr std::uintptr_t kBase = std::uintptr_t{1} << 44U;
constexpr std::align_val_t kPinnedAlignment{kArenaAlignment};

std::string category_of(std::string_view what) {
  const auto colon = what.find(':');
  return std::string(colon == std::string_view::npos ? what : what.substr(0, colon));
}

}  // namespace

std::int64_t MemoryForecast::padding_at_peak() const {
  std::int64_t requested = 0;
  for (const auto& [category, bytes] : at_peak) requested += bytes;
  return peak_footprint_bytes - requested;
}

struct PlanningDevice::Live {
  SizeLimitedArena arena{kUnlimited};
  std::map<std::int64_t, std::pair<std::int64_t, std::string>> blocks;  // offset -> requested bytes, category
  std::map<std::string, std::int64_t> by_category;
};

PlanningDevice::PlanningDevice(bool copies_pageable_memory_directly)
    : live_(std::make_unique<Live>()), copies_pageable_memory_directly_(copies_pageable_memory_directly) {}
PlanningDevice::~PlanningDevice() = default;

void* PlanningDevice::allocate(std::int64_t bytes, std::string_view what) {
  NJ_EXPECTS(bytes >= 0, "negative device allocation of {} bytes for {}", bytes, what);
  if (bytes == 0) return nullptr;
  const auto block = live_->arena.allocate(bytes, what);
  std::string category = category_of(what);
  const std::int64_t held = live_->by_category[category] += bytes;
  std::int64_t& category_peak = forecast_.category_peaks[category];
  category_peak = std::max(category_peak, held);
  live_->blocks.emplace(block.offset, std::make_pair(bytes, std::move(category)));
  forecast_.peak_bytes = live_->arena.requested_peak();
  const std::int64_t footprint = live_->arena.arena().stats().footprint_bytes;
  if (phase_) {
    std::int64_t& phase_peak = forecast_.phase_peak_footprint_bytes[*phase_];
    phase_peak = std::max(phase_peak, footprint);
  }
  if (footprint > forecast_.peak_footprint_bytes) {
    forecast_.peak_footprint_bytes = footprint;
    forecast_.at_peak = live_->by_category;
  }
  return reinterpret_cast<void*>(kBase + static_cast<std::uintptr_t>(block.offset));
}

void PlanningDevice::begin_phase(std::size_t phase) {
  std::vector<std::int64_t>& peaks = forecast_.phase_peak_footprint_bytes;
  if (peaks.size() <= phase) peaks.resize(phase + 1, 0);
  phase_ = phase;
  peaks[phase] = std::max(peaks[phase], live_->arena.arena().stats().footprint_bytes);
}

void PlanningDevice::deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return;
  const auto offset = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(ptr) - kBase);
  const auto it = live_->blocks.find(offset);
  NJ_EXPECTS(it != live_->blocks.end(), "deallocate of {}, which is not a live allocation", fmt::ptr(ptr));
  live_->by_category[it->second.second] -= it->second.first;
  live_->blocks.erase(it);
  live_->arena.deallocate(offset);
}

void* PlanningDevice::allocate_pinned(std::int64_t bytes) {
  return bytes == 0 ? nullptr : ::operator new(static_cast<std::size_t>(bytes), kPinnedAlignment);
}

void PlanningDevice::deallocate_pinned(void* ptr) noexcept {
  if (ptr != nullptr) ::operator delete(ptr, kPinnedAlignment);
}

Event PlanningDevice::copy_to_device(void* /*device_dst*/, const void* /*host_src*/, std::int64_t /*bytes*/) {
  return {Stream::kHostToDevice, {}};
}

Event PlanningDevice::copy_to_host(void* host_dst, const void* /*device_src*/, std::int64_t bytes) {
  if (bytes > 0) std::memset(host_dst, 0, static_cast<std::size_t>(bytes));
  return {Stream::kDeviceToHost, {}};
}

DeviceStats PlanningDevice::stats() const {
  DeviceStats s;
  s.in_use_bytes = live_->arena.requested_in_use();
  s.peak_bytes = forecast_.peak_bytes;
  s.peak_footprint_bytes = forecast_.peak_footprint_bytes;
  return s;
}

}  // namespace nj
