#include <string>
#include <vector>

#include "nj/comm/communicator.hpp"

namespace nj {

void agree_on_failure(Communicator& comm, const std::function<void()>& work) {
  std::string message;
  int exit_code = 0;
  try {
    work();
  } catch (const UsageError& e) {
    message = e.what();
    exit_code = 2;
  } catch (const std::exception& e) {
    message = e.what();
    exit_code = 1;
  }
  // The lowest failing rank, as size - rank so that the maximum finds it and 0 means none failed; and the highest
  // exit code, which every rank then exits with.
  std::vector<double> failure = {exit_code == 0 ? 0.0 : static_cast<double>(comm.size() - comm.rank()),
                                 static_cast<double>(exit_code)};
  comm.all_reduce_max(failure);
  if (failure[0] == 0.0) return;
  const int failed = comm.size() - static_cast<int>(failure[0]);
  throw JobError(message, failed, comm.rank() == failed, static_cast<int>(failure[1]));
}

}  // namespace nj
