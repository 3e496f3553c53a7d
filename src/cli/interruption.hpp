#pragma once
// SIGINT, SIGTERM and SIGUSR1 during nj train: Ctrl-C, Slurm before a time limit or a preemption, and mpirun, which
// takes SIGTERM and SIGINT as an order to kill its job but passes SIGUSR1 on to every rank. The epoch under way is
// finished; at its end every rank agrees, in one all-reduce, whether any rank received one, so that all stop after
// the same epoch and none is left waiting; nj train then writes a checkpoint and exits with 128 + the signal's
// number (130, 143, 138).
#include <stdexcept>
#include <string>

#include "nj/comm/communicator.hpp"

namespace nj::cli {

// While it lives, SIGINT, SIGTERM and SIGUSR1 are remembered instead of ending the process; a second SIGINT ends it at
// once, as an uncaught one would. One at a time.
class InterruptionWatch {
 public:
  // `announce`: say on stderr as the first signal comes that training stops at the end of the epoch (rank 0).
  explicit InterruptionWatch(bool announce);
  InterruptionWatch(const InterruptionWatch&) = delete;
  InterruptionWatch& operator=(const InterruptionWatch&) = delete;
  ~InterruptionWatch();  // the handlers before it, back

  // The signal received on any rank, the same on every rank (the highest number where ranks received different
  // ones); 0 where none was. A collective: every rank calls it at the same point.
  int agreed_signal(Communicator& comm) const;
};

// Thrown on every rank once the job stopped for a signal: main prints the message on the rank that reports it
// and exits with 128 + the signal's number.
class Interrupted : public std::runtime_error {
 public:
  Interrupted(const std::string& message, int signal, bool report)
      : std::runtime_error(message), signal_(signal), report_(report) {}
  int exit_code() const { return 128 + signal_; }
  bool report() const { return report_; }

 private:
  int signal_;
  bool report_;
};

}  // namespace nj::cli
