// The multi-rank suite's entry point: every rank runs every test, in the same order, so that their
// collectives meet. Only rank 0 prints; any rank's failure fails the job.
#include <gtest/gtest.h>

#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "mpi/job.hpp"

namespace nj::test {
namespace {
Communicator* job_communicator = nullptr;
}  // namespace

Communicator& job() { return *job_communicator; }

std::string shared_folder(Communicator& comm, const TempDir& mine) {
  std::string path = mine.path().string();
  auto length = static_cast<std::int64_t>(path.size());
  comm.broadcast(std::as_writable_bytes(std::span(&length, 1)), 0);
  path.resize(static_cast<std::size_t>(length));
  comm.broadcast(std::as_writable_bytes(std::span(path)), 0);
  return path;
}

void wait_for_every_rank(Communicator& comm) {
  std::vector<std::int64_t> arrived{1};
  comm.all_reduce_sum(arrived);
}

}  // namespace nj::test

int main(int argc, char** argv) {
  nj::MpiSession mpi;
  const std::unique_ptr<nj::Communicator> comm = mpi.communicator();
  nj::test::job_communicator = comm.get();
  ::testing::InitGoogleTest(&argc, argv);
  // NJ_ALL_RANKS_PRINT=1 (with mpirun -x) lets every rank print: a failure on one rank alone shows its message.
  if (comm->rank() != 0 && std::getenv("NJ_ALL_RANKS_PRINT") == nullptr) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  // A rank whose test failed reports it; make the whole job's exit code say so.
  std::vector<std::int64_t> failures = {failed != 0 ? 1 : 0};
  comm->all_reduce_sum(failures);
  if (comm->rank() == 0 && failures[0] > 0)
    std::fprintf(stderr, "%lld rank(s) failed\n", static_cast<long long>(failures[0]));
  return failures[0] > 0 ? 1 : 0;
}
