// The external sort of an edge list builds, run by run and merged from disk, the graph build_csr builds in memory from
// read_edge_list's edges: for every option (symmetrised, self-loops kept, removed or added, duplicates kept or
// removed, ids dense, one-based or relabelled), whatever the number of runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "nj/io/sorted_edge_list.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

// A directed edge list with repeated edges, self-loops, a vertex without edges (9) and edges in no order, ids spread
// above 2^32 where `spread`.
std::string edge_list_text(bool spread) {
  const std::vector<std::pair<std::int64_t, std::int64_t>> edges = {
      {3, 1}, {1, 3}, {0, 2}, {2, 2}, {5, 4}, {4, 5}, {4, 5},   {7, 0}, {8, 6}, {6, 6}, {10, 3}, {1, 10},
      {2, 0}, {3, 3}, {0, 7}, {6, 8}, {5, 1}, {1, 5}, {10, 10}, {8, 2}, {2, 8}, {4, 0}, {3, 1},  {7, 7}};
  std::string text = "# a comment\n";
  for (const auto& [src, dst] : edges) {
    const auto id = [&](std::int64_t v) { return spread ? (v << 33) + 7 * v + 1 : v; };
    text += std::to_string(id(src)) + "\t" + std::to_string(id(dst)) + "\n";
  }
  return text;
}

TEST(SortedEdgeList, EqualsTheGraphBuiltInMemoryForEveryOptionAndRunCount) {
  test::TempDir dir;
  for (const bool relabel : {false, true}) {
    const std::string path = dir.file(relabel ? "spread.txt" : "dense.txt");
    std::ofstream(path) << edge_list_text(relabel);
    const VertexIdOptions ids{.one_based = false, .relabel = relabel};
    const EdgeList edges = read_edge_list(path, ids);
    for (const bool symmetrize : {false, true}) {
      for (const SelfLoops self_loops : {SelfLoops::kKeep, SelfLoops::kRemove, SelfLoops::kAddMissing}) {
        for (const Duplicates duplicates : {Duplicates::kKeep, Duplicates::kRemove}) {
          const EdgeListOptions options{.symmetrize = symmetrize, .self_loops = self_loops, .duplicates = duplicates};
          Dataset expected;
          set_graph(expected, edges, options);
          for (const std::int64_t run_bytes : {16, 40, 1 << 20}) {  // 2 and 5 edges a run, and one run
            SCOPED_TRACE(testing::Message() << "relabel " << relabel << ", symmetrize " << symmetrize << ", self-loops "
                                            << static_cast<int>(self_loops) << ", duplicates "
                                            << static_cast<int>(duplicates) << ", run bytes " << run_bytes);
            const std::string out = dir.file("graph.h5");
            SortedGraph sorted;
            {
              auto file = hdf5::File::create(out);
              file.create_group("/graph");
              sorted =
                  write_sorted_edge_list(path, ids, options, {.run_bytes = run_bytes, .scratch = dir.file("s")}, file);
            }
            const auto file = hdf5::File::open_read(out);
            EXPECT_EQ(hdf5::read_vector<eid_t>(file, "/graph/indptr", -1), expected.graph.offsets);
            EXPECT_EQ(hdf5::read_vector<vid_t>(file, "/graph/indices", -1), expected.graph.sources);
            EXPECT_EQ(sorted.offsets, expected.graph.offsets);
            EXPECT_EQ(sorted.symmetrized, expected.symmetrized);
            EXPECT_EQ(sorted.self_loops, expected.self_loops);
            EXPECT_EQ(sorted.ids.count(), edges.ids.count());
            EXPECT_EQ(sorted.runs > 1, run_bytes < 1 << 20);
            EXPECT_TRUE(std::filesystem::is_empty(dir.file("s"))) << "the sort left its runs behind";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace nj
