// PT-Scotch runs on one thread per rank where there are several ranks. Its threads fold halves of the graph at once,
// each calling MPI, which nj initialises for its main thread only (MPI_THREAD_FUNNELED); two folds at once corrupted
// Open MPI's heap. This binary is linked with --wrap=pthread_create (tests/CMakeLists.txt): the threads its static
// libraries start, Scotch's among them, pass through the counter below; those of shared libraries (Open MPI's,
// libstdc++'s) do not.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <string>

#include "mpi/job.hpp"
#include "nj/graph/generate.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/partition/parallel.hpp"
#include "support/test_support.hpp"

namespace {

std::atomic<int> threads_started{0};

}  // namespace

// The names the linker's --wrap gives the real function and its stand-in.
// NOLINTBEGIN(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)
extern "C" int __real_pthread_create(pthread_t* thread, const pthread_attr_t* attributes, void* (*start)(void*),
                                     void* argument);

extern "C" int __wrap_pthread_create(pthread_t* thread, const pthread_attr_t* attributes, void* (*start)(void*),
                                     void* argument) {
  ++threads_started;
  return __real_pthread_create(thread, attributes, start, argument);
}
// NOLINTEND(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp,readability-identifier-naming)

namespace nj {
namespace {

// Scotch's default is a thread per core, or SCOTCH_PTHREAD_NUMBER's: four here, whatever the machine. One process
// runs Scotch on them (which shows that the counter sees Scotch's threads); several ranks start none.
TEST(ScotchThreads, SeveralRanksPartitionOnOneThreadEach) {
  Communicator& comm = test::job();
  const test::TempDir mine;
  const std::string path = test::shared_folder(comm, mine) + "/generated.h5";
  GeneratorOptions generator;
  generator.vertices = 3000;
  generator.edges = 30000;
  generator.features = 4;
  generator.classes = 4;
  generator.seed = 2;
  if (comm.rank() == 0) write_dataset(path, generate_dataset(generator));
  test::wait_for_every_rank(comm);
  const test::ScopedVariable four_threads("SCOTCH_PTHREAD_NUMBER", "4");
  const int before = threads_started;
  partition_in_parallel(path, {.method = PartitionMethod::kScotch, .parts = 4, .seed = 1}, comm, [](Shard&&) {});
  const int started = threads_started - before;
  if (comm.size() > 1) {
    EXPECT_EQ(started, 0);
  } else {
    EXPECT_GT(started, 0);
  }
}

}  // namespace
}  // namespace nj
