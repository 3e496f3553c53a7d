#pragma once
// A command's host memory, phase by phase, beside the formula that says what each phase holds: what nj partition and
// nj convert log, so that every formula is compared with a measurement where it runs (and by the tests).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nj {

// One phase's bytes at its peak, above what the command held when it began.
struct PhaseBytes {
  std::string phase;
  std::int64_t bytes = 0;
};
// The most of them.
std::int64_t peak_bytes(std::span<const PhaseBytes> phases);
// "phase 1.20G, phase 800.00M", in order.
std::string describe(std::span<const PhaseBytes> phases);

// The most a command held, beyond what its process held when this was made, logged beside its formula. At debug level
// each phase's peak is measured on its own and logged too: the kernel's high-water mark is reset between phases
// (mark_peak), after which what reads it from outside (getrusage, /usr/bin/time) sees the last phase's peak only; at
// other levels the mark is left alone.
class PhaseMemory {
 public:
  PhaseMemory();
  // Ends a phase: what it freed in small blocks goes back to the system, so that the next phase starts from what is
  // live.
  void end_phase();
  // Logs "<who>: <phase>: peak X above the Y held before, formula Z" for each phase measured (debug), then
  // "<who>: <activity> held at most X above the Y held before (formula Z)" (info). An empty `who` is left out.
  void log(std::span<const PhaseBytes> formula, std::string_view who, std::string_view activity) const;

 private:
  std::int64_t before_;
  bool per_phase_;
  std::vector<std::int64_t> peaks_;
};

}  // namespace nj
