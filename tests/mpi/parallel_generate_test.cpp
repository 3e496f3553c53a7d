// nj generate on several ranks: the file the ranks write between them is the one generate_dataset builds in one
// process, field by field, whatever the number of ranks and however unevenly the vertices and pairs divide among them.
#include "nj/run/parallel_generate.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "mpi/job.hpp"
#include "nj/graph/generate.hpp"
#include "nj/graph/statistics.hpp"
#include "nj/io/dataset_file.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

// Writes `options`' dataset on the job's ranks and compares it, and what generate_in_parallel returns, with what one
// process builds.
void expect_ranks_write_what_one_process_builds(const GeneratorOptions& options) {
  Communicator& comm = test::job();
  test::TempDir mine;
  const std::string path = test::shared_folder(comm, mine) + "/generated.h5";
  const GeneratedGraph written = generate_in_parallel(options, path, comm);

  const Dataset expected = generate_dataset(options);
  const Dataset got = read_dataset(path);
  std::vector<std::int64_t> read = {1};
  comm.all_reduce_sum(read);  // every rank has read the file before rank 0 removes its folder
  test::expect_same_dataset(got, expected);
  EXPECT_EQ(got.name, expected.name);
  EXPECT_TRUE(got.symmetrized);
  EXPECT_EQ(got.self_loops, SelfLoopPolicy::kRemoved);
  EXPECT_TRUE(got.community_order.empty());
  EXPECT_EQ(written.vertices, expected.num_vertices());
  EXPECT_EQ(written.edges, expected.graph.num_edges());
  EXPECT_DOUBLE_EQ(written.edge_homophily, edge_homophily(expected.graph, expected.labels));
  EXPECT_EQ(written.train, count(expected.train_mask));
  EXPECT_EQ(written.val, count(expected.val_mask));
  EXPECT_EQ(written.test, count(expected.test_mask));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST(ParallelGenerate, RanksWriteTheDatasetOneProcessBuilds) {
  GeneratorOptions options;
  options.vertices = 1003;  // neither the vertices nor the pairs a multiple of the ranks
  options.edges = 12'007;
  options.features = 9;  // not a multiple of the four normals a draw gives
  options.classes = 5;
  options.seed = 11;
  options.train_fraction = 0.37;
  options.val_fraction = 0.21;
  expect_ranks_write_what_one_process_builds(options);
}

TEST(ParallelGenerate, EdgeCasesOfTheSlicesAndTheSplits) {
  // Fewer vertices than ranks on 4 (a rank with no row); no edges; one pair; every vertex in train; no test split.
  const std::vector<GeneratorOptions> cases = {
      {.vertices = 3, .edges = 4, .features = 3, .classes = 2, .seed = 1},
      {.vertices = 50, .edges = 0, .features = 5, .classes = 2, .seed = 2},
      {.vertices = 50, .edges = 2, .features = 5, .classes = 2, .seed = 3},
      {.vertices = 40,
       .edges = 200,
       .features = 4,
       .classes = 3,
       .seed = 4,
       .train_fraction = 1.0,
       .val_fraction = 0.0},
      {.vertices = 40,
       .edges = 200,
       .features = 4,
       .classes = 3,
       .seed = 5,
       .train_fraction = 0.5,
       .val_fraction = 0.5},
  };
  for (const GeneratorOptions& options : cases) {
    SCOPED_TRACE(::testing::Message() << options.vertices << " vertices, " << options.edges << " edges, train "
                                      << options.train_fraction << ", val " << options.val_fraction);
    expect_ranks_write_what_one_process_builds(options);
  }
}

}  // namespace
}  // namespace nj
