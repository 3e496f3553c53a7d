#include "nj/core/phase_memory.hpp"

#include <malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "nj/core/bytes.hpp"
#include "nj/core/host_memory.hpp"

namespace nj {

std::int64_t peak_bytes(std::span<const PhaseBytes> phases) {
  std::int64_t peak = 0;
  for (const PhaseBytes& phase : phases) peak = std::max(peak, phase.bytes);
  return peak;
}

std::string describe(std::span<const PhaseBytes> phases) {
  std::string text;
  for (const PhaseBytes& phase : phases) {
    text += fmt::format("{}{} {}", text.empty() ? "" : ", ", phase.phase, format_bytes(phase.bytes));
  }
  return text;
}

PhaseMemory::PhaseMemory() : before_(resident_memory().current), per_phase_(spdlog::should_log(spdlog::level::debug)) {
  if (per_phase_) mark_peak();
}

void PhaseMemory::end_phase() {
  if (per_phase_) peaks_.push_back(resident_memory().peak_since_mark - before_);
  malloc_trim(0);
  if (per_phase_) mark_peak();
}

void PhaseMemory::log(std::span<const PhaseBytes> formula, std::string_view who, std::string_view activity) const {
  const std::string prefix = who.empty() ? std::string() : fmt::format("{}: ", who);
  for (std::size_t i = 0; i < peaks_.size() && i < formula.size(); ++i) {
    spdlog::debug("{}{}: peak {} above the {} held before, formula {}", prefix, formula[i].phase,
                  format_bytes(peaks_[i]), format_bytes(before_), format_bytes(formula[i].bytes));
  }
  spdlog::info("{}{} held at most {} above the {} held before (formula {})", prefix, activity,
               format_bytes(resident_memory().peak - before_), format_bytes(before_),
               format_bytes(peak_bytes(formula)));
}

}  // namespace nj
