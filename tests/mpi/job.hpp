#pragma once
#include "nj/comm/communicator.hpp"

namespace nj::test {

// The communicator of the job this test binary runs in: every rank of mpirun, or one process.
Communicator& job();

}  // namespace nj::test
