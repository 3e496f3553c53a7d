#pragma once
#include <string>

#include "nj/comm/communicator.hpp"
#include "support/test_support.hpp"

namespace nj::test {

// The communicator of the job this test binary runs in: every rank of mpirun, or one process.
Communicator& job();

// A folder every rank of the job names alike: rank 0's `mine`, its path broadcast.
std::string shared_folder(Communicator& comm, const TempDir& mine);

// Returns once every rank of `comm` has called it: after rank 0 writes a file the others read, or before it replaces
// one they read.
void wait_for_every_rank(Communicator& comm);

}  // namespace nj::test
