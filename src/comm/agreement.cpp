#include <string>
#include <vector>

#include "nj/comm/communicator.hpp"

namespace nj {

void agree_on_failure(Communicator& comm, const std::function<void()>& work) {
  std::string message;
  try {
    work();
  } catch (const std::exception& e) {
    message = e.what();
  }
  // The lowest failing rank, as size - rank so that the maximum finds it and 0 means none failed.
  std::vector<double> lowest_failure = {message.empty() ? 0.0 : static_cast<double>(comm.size() - comm.rank())};
  comm.all_reduce_max(lowest_failure);
  if (lowest_failure[0] == 0.0) return;
  const int failed = comm.size() - static_cast<int>(lowest_failure[0]);
  throw JobError(message, failed, comm.rank() == failed);
}

}  // namespace nj
