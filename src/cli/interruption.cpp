#include "cli/interruption.hpp"

#include <unistd.h>

#include <array>
#include <csignal>

namespace nj::cli {
namespace {

volatile std::sig_atomic_t received = 0;
volatile std::sig_atomic_t announce = 0;
struct sigaction previous_sigint {};
struct sigaction previous_sigterm {};
struct sigaction previous_sigusr1 {};

void on_signal(int signal) {
  if (signal == SIGINT && received == SIGINT) {  // Ctrl-C twice: stop now
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  const bool first = received == 0;
  received = signal;
  if (first && announce != 0) {
    static constexpr char kMessage[] = "\nnj: stopping at the end of this epoch (Ctrl-C again stops at once)\n";
    // write(2) is safe in a signal handler, and what it fails to write is lost with no harm done.
    [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  }
}

}  // namespace

InterruptionWatch::InterruptionWatch(bool announce_signal) {
  received = 0;
  announce = announce_signal ? 1 : 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // calls in progress go on: the epoch finishes
  sigaction(SIGINT, &action, &previous_sigint);
  sigaction(SIGTERM, &action, &previous_sigterm);
  sigaction(SIGUSR1, &action, &previous_sigusr1);
}

InterruptionWatch::~InterruptionWatch() {
  sigaction(SIGINT, &previous_sigint, nullptr);
  sigaction(SIGTERM, &previous_sigterm, nullptr);
  sigaction(SIGUSR1, &previous_sigusr1, nullptr);
}

int InterruptionWatch::agreed_signal(Communicator& comm) const {
  std::array<double, 1> signal{static_cast<double>(received)};
  comm.all_reduce_max(signal);
  return static_cast<int>(signal[0]);
}

}  // namespace nj::cli
