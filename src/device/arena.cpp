#include "nj/device/arena.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "nj/core/error.hpp"

namespace nj {

namespace {

std::int64_t round_down(std::int64_t bytes) { return bytes / kArenaAlignment * kArenaAlignment; }

}  // namespace

ArenaAllocator::ArenaAllocator(std::int64_t capacity) : capacity_(capacity) {
  NJ_EXPECTS(capacity >= 0, "arena capacity of {} bytes", capacity);
  // Blocks are whole alignment units, so the unlimited region ends just below kUnlimited: far beyond any
  // footprint, and offset + size can never overflow.
  if (round_down(capacity) > 0) add_free(0, round_down(capacity));
}

void ArenaAllocator::add_free(std::int64_t offset, std::int64_t size) { free_by_offset_.emplace(offset, size); }

void ArenaAllocator::remove_free(std::map<std::int64_t, std::int64_t>::iterator range) { free_by_offset_.erase(range); }

std::optional<std::int64_t> ArenaAllocator::allocate(std::int64_t bytes) {
  NJ_EXPECTS(bytes > 0, "arena allocation of {} bytes", bytes);
  // Checked before rounding, which could otherwise overflow near kUnlimited.
  if (bytes > round_down(capacity_)) return std::nullopt;
  const std::int64_t size = arena_block_bytes(bytes);
  const auto fit = std::find_if(free_by_offset_.begin(), free_by_offset_.end(),
                                [size](const auto& range) { return range.second >= size; });
  if (fit == free_by_offset_.end()) return std::nullopt;
  const auto [offset, hole_size] = *fit;
  remove_free(fit);
  // Placing at the hole's start keeps the remainder in one piece, next to whatever follows.
  if (hole_size > size) add_free(offset + size, hole_size - size);
  live_.emplace(offset, size);
  in_use_ += size;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  peak_footprint_ = std::max(peak_footprint_, offset + size);
  return offset;
}

std::int64_t ArenaAllocator::deallocate(std::int64_t offset) {
  const auto block = live_.find(offset);
  NJ_EXPECTS(block != live_.end(), "arena deallocate at offset {}, which is not a live block", offset);
  const std::int64_t size = block->second;
  live_.erase(block);
  in_use_ -= size;

  std::int64_t start = offset;
  std::int64_t end = offset + size;
  auto next = free_by_offset_.lower_bound(offset);
  if (next != free_by_offset_.begin()) {
    const auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      remove_free(prev);
    }
  }
  if (next != free_by_offset_.end() && next->first == end) {
    end += next->second;
    remove_free(next);
  }
  add_free(start, end - start);
  return size;
}

ArenaStats ArenaAllocator::stats() const {
  ArenaStats stats;
  stats.in_use_bytes = in_use_;
  stats.peak_in_use_bytes = peak_in_use_;
  stats.footprint_bytes = live_.empty() ? 0 : live_.rbegin()->first + live_.rbegin()->second;
  stats.peak_footprint_bytes = peak_footprint_;
  stats.live_blocks = static_cast<std::int64_t>(live_.size());
  if (capacity_ == kUnlimited) {
    stats.largest_free_bytes = kUnlimited;
  } else {
    for (const auto& [offset, size] : free_by_offset_)
      stats.largest_free_bytes = std::max(stats.largest_free_bytes, size);
  }
  return stats;
}

void ArenaAllocator::reset_peaks() {
  const ArenaStats now = stats();
  peak_in_use_ = now.in_use_bytes;
  peak_footprint_ = now.footprint_bytes;
}

SizeLimitedArena::SizeLimitedArena(std::int64_t budget) : budget_(budget <= 0 ? kUnlimited : budget), arena_(budget_) {}

SizeLimitedArena::Block SizeLimitedArena::allocate(std::int64_t bytes, std::string_view what) {
  NJ_EXPECTS(bytes > 0, "device allocation of {} bytes for {}", bytes, what);
  if (bytes > budget_ - requested_in_use_) {
    throw OutOfBudget(
        fmt::format("device memory budget exceeded: {} needs {} bytes, but {} of the {} budgeted bytes are in use "
                    "({} free)",
                    what, bytes, requested_in_use_, budget_, budget_ - requested_in_use_));
  }
  const std::optional<std::int64_t> offset = arena_.allocate(bytes);
  if (!offset) {
    throw OutOfBudget(
        fmt::format("device memory budget exceeded: {} needs {} bytes, and {} of the {} budgeted bytes are in use, "
                    "but the largest free range is {} bytes (fragmented)",
                    what, bytes, requested_in_use_, budget_, arena_.stats().largest_free_bytes));
  }
  requested_.emplace(*offset, bytes);
  requested_in_use_ += bytes;
  requested_peak_ = std::max(requested_peak_, requested_in_use_);
  return {*offset, bytes};
}

void SizeLimitedArena::deallocate(std::int64_t offset) {
  const auto block = requested_.find(offset);
  NJ_EXPECTS(block != requested_.end(), "device deallocate at offset {}, which is not a live block", offset);
  arena_.deallocate(offset);
  requested_in_use_ -= block->second;
  requested_.erase(block);
}

void SizeLimitedArena::reset_peaks() {
  requested_peak_ = requested_in_use_;
  arena_.reset_peaks();
}

}  // namespace nj
