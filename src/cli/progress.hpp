#pragma once
// Progress of a command, shown where the user looks: on a terminal, a bar on stderr with the stage, the share
// done, the elapsed time and an estimate of the time left, redrawn twice a second; otherwise (a log file, a
// batch job) a plain log line every 10 s of a stage (NJ_PROGRESS_SECONDS sets the interval) and one at its end,
// so that short stages stay quiet. Only rank 0 shows it.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "nj/core/progress.hpp"

namespace nj::cli {

class ProgressDisplay {
 public:
  // `command` names what runs ("generate", "train"); `shown` is false on ranks other than 0.
  explicit ProgressDisplay(std::string command, bool shown = true);
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;
  ~ProgressDisplay();

  // What the library reports through; valid while the display lives.
  ProgressCallback callback();
  void update(std::string_view stage, std::int64_t done, std::int64_t total);
  // Erases the bar, so that a log line can be printed; the next redraw brings it back.
  void clear();

 private:
  void redraw_loop();
  std::string line(std::chrono::steady_clock::time_point now) const;  // under mutex_

  std::string command_;
  bool shown_;
  bool terminal_;
  std::chrono::steady_clock::duration log_interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread ticker_;
  bool stopping_ = false;
  bool drawn_ = false;
  std::string stage_;
  std::int64_t done_ = 0;
  std::int64_t total_ = 0;
  std::chrono::steady_clock::time_point stage_started_;
  std::chrono::steady_clock::time_point last_logged_;
  std::int64_t logged_done_ = -1;  // what the last log line said, so that a stage's end is said once
};

}  // namespace nj::cli
