#pragma once
// The fault-injection seam nj train keeps for the tests of failure handling (--inject-failure, hidden from --help):
// a rank raises an error or dies in the middle of an epoch's step, or dies while a checkpoint is being written. The
// tests that use it start nj as a user would (tests/cli: a killed rank ends the job, a checkpoint survives a kill,
// a resumed run ends with the same weights); nothing else reaches it.
#include <cstdint>
#include <memory>
#include <string>

#include "nj/exec/executor.hpp"

namespace nj::cli {

// --inject-failure RANK:EPOCH[:error|kill|kill-in-checkpoint], EPOCH counted from 1.
struct FailurePoint {
  enum class How { kError, kKill, kKillInCheckpoint };
  int rank = -1;
  std::uint32_t epoch = 0;  // counted from 0
  How how = How::kError;
  bool in_step(int this_rank) const { return rank == this_rank && how != How::kKillInCheckpoint; }
};
// Throws nj::InputError on a malformed text.
FailurePoint parse_failure_point(const std::string& text);

// `inner`, failing in the middle of point.epoch's step, after its forward pass, as `point` says.
std::unique_ptr<Executor> make_failing_executor(Executor& inner, const FailurePoint& point);

}  // namespace nj::cli
