#pragma once
// How long-running library work reports progress: `done` of `total` units of a named stage ("edges",
// "cora/features.txt", "shards"). The library calls it at a coarse grain (stage changes, and about every 1 %);
// the CLI turns it into a bar on a terminal and into log lines elsewhere (src/cli/progress.hpp). An empty callback
// reports nothing.
#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>

namespace nj {

using ProgressCallback = std::function<void(std::string_view stage, std::int64_t done, std::int64_t total)>;

// Reports a loop's progress about every 1 % of `total` units: `tick(done)` is cheap to call on every iteration.
// One thread ticks (in a parallel loop, the first, scaling its own share to the whole).
class ProgressTicks {
 public:
  ProgressTicks(ProgressCallback progress, std::string_view stage, std::int64_t total)
      : progress_(std::move(progress)), stage_(stage), total_(total), step_(total / 100 > 0 ? total / 100 : 1) {
    if (progress_) progress_(stage_, 0, total_);
  }
  void tick(std::int64_t done) {
    if (!progress_ || done < next_) return;
    next_ = done + step_;
    progress_(stage_, done < total_ ? done : total_, total_);
  }
  void finish() const {
    if (progress_) progress_(stage_, total_, total_);
  }

 private:
  ProgressCallback progress_;
  std::string_view stage_;
  std::int64_t total_;
  std::int64_t step_;
  std::int64_t next_ = step_;  // 0 was reported on construction
};

}  // namespace nj
