#include "cli/progress.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace nj::cli {
namespace {

constexpr auto kRedraw = std::chrono::milliseconds(500);
// How often a stage logs where there is no terminal: NJ_PROGRESS_SECONDS, else 10 s.
std::chrono::steady_clock::duration log_interval() {
  const char* text = std::getenv("NJ_PROGRESS_SECONDS");
  const double seconds = text != nullptr ? std::strtod(text, nullptr) : 10.0;
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}
constexpr int kBarWidth = 24;

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// 1.2K, 3.4M: counts of edges, rows or bytes alike.
std::string amount(std::int64_t n) {
  if (n < 10000) return std::to_string(n);
  const char* units = "KMGT";
  double value = static_cast<double>(n);
  int unit = -1;
  while (value >= 1000.0 && unit < 3) {
    value /= 1000.0;
    ++unit;
  }
  return fmt::format("{:.1f}{}", value, units[unit]);
}

std::string duration(double s) {
  if (s < 90) return fmt::format("{:.0f} s", s);
  if (s < 5400) return fmt::format("{:.0f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

}  // namespace

ProgressDisplay::ProgressDisplay(std::string command, bool shown)
    : command_(std::move(command)),
      shown_(shown),
      terminal_(shown && isatty(STDERR_FILENO) != 0),
      log_interval_(log_interval()) {
  if (terminal_) ticker_ = std::thread([this] { redraw_loop(); });
}

ProgressDisplay::~ProgressDisplay() {
  if (!terminal_) return;
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  ticker_.join();
  clear();
}

ProgressCallback ProgressDisplay::callback() {
  return [this](std::string_view stage, std::int64_t done, std::int64_t total) { update(stage, done, total); };
}

void ProgressDisplay::update(std::string_view stage, std::int64_t done, std::int64_t total) {
  if (!shown_) return;
  const auto now = std::chrono::steady_clock::now();
  const std::lock_guard lock(mutex_);
  const bool new_stage = stage != stage_;
  if (new_stage) {
    stage_ = stage;
    stage_started_ = now;
  }
  done_ = done;
  total_ = total;
  if (terminal_) {  // the ticker draws: at once for a new stage
    if (new_stage) wake_.notify_all();
    return;
  }
  // Quiet for short stages: a line once a stage has run the interval, every interval after, and at its end.
  if (new_stage) {
    last_logged_ = now;
    logged_done_ = -1;
  }
  const bool finished = total > 0 && done >= total;
  const bool due = now - last_logged_ >= log_interval_ || (finished && logged_done_ >= 0);
  if (due && done != logged_done_) {
    last_logged_ = now;
    logged_done_ = done;
    spdlog::info("{}", line(now));
  }
}

void ProgressDisplay::clear() {
  const std::lock_guard lock(mutex_);
  if (drawn_) std::fputs("\r\033[K", stderr);
  drawn_ = false;
}

std::string ProgressDisplay::line(std::chrono::steady_clock::time_point now) const {
  const double elapsed = seconds(now - stage_started_);
  const double fraction = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 0.0;
  std::string text =
      fmt::format("{}: {} {:3.0f}% ({} of {})", command_, stage_, 100.0 * fraction, amount(done_), amount(total_));
  if (terminal_) {
    const int filled = static_cast<int>(fraction * kBarWidth);
    text = fmt::format("{}: {} [{}{}] {:3.0f}% ({} of {})", command_, stage_, std::string(filled, '#'),
                       std::string(kBarWidth - filled, '.'), 100.0 * fraction, amount(done_), amount(total_));
  }
  text += fmt::format(", {}", duration(elapsed));
  // An estimate once there is something to go on.
  if (fraction > 0.01 && fraction < 1.0 && elapsed > 1.0) {
    text += fmt::format(", about {} left", duration(elapsed * (1.0 - fraction) / fraction));
  }
  return text;
}

void ProgressDisplay::redraw_loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, kRedraw);
    if (stopping_ || stage_.empty()) continue;
    std::fprintf(stderr, "\r\033[K%s", line(std::chrono::steady_clock::now()).c_str());
    std::fflush(stderr);
    drawn_ = true;
  }
}

}  // namespace nj::cli
