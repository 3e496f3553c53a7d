#include <gtest/gtest.h>

#include "nj/graph/csr.hpp"

namespace nj {
namespace {

TEST(BuildCsr, GroupsByDestinationWithSortedSources) {
  const std::vector<vid_t> src = {2, 0, 1, 0};
  const std::vector<vid_t> dst = {1, 1, 2, 2};
  const auto g = build_csr(3, src, dst);
  EXPECT_EQ(g.offsets, (std::vector<eid_t>{0, 0, 2, 4}));
  EXPECT_EQ(g.sources, (std::vector<vid_t>{0, 2, 0, 1}));
}

TEST(BuildCsr, SymmetrizesRemovesDuplicatesAndSelfLoops) {
  const std::vector<vid_t> src = {0, 1, 0, 2};
  const std::vector<vid_t> dst = {1, 0, 1, 2};
  const auto g = build_csr(3, src, dst,
                           {.symmetrize = true, .self_loops = SelfLoops::kRemove, .duplicates = Duplicates::kRemove});
  EXPECT_EQ(g.offsets, (std::vector<eid_t>{0, 1, 2, 2}));
  EXPECT_EQ(g.sources, (std::vector<vid_t>{1, 0}));
}

TEST(BuildCsr, AddsOnlyMissingSelfLoops) {
  const std::vector<vid_t> src = {1, 1};
  const std::vector<vid_t> dst = {0, 1};
  const auto g = build_csr(2, src, dst, {.self_loops = SelfLoops::kAddMissing});
  EXPECT_EQ(g.offsets, (std::vector<eid_t>{0, 2, 3}));
  EXPECT_EQ(g.sources, (std::vector<vid_t>{0, 1, 1}));
}

TEST(BuildCsr, RejectsOutOfRangeEndpoint) {
  const std::vector<vid_t> src = {0};
  const std::vector<vid_t> dst = {5};
  EXPECT_THROW(build_csr(3, src, dst), InputError);
}

TEST(WithSelfLoops, GcnKeepsExistingAndGatKeepsExactlyOne) {
  CsrGraph g;
  g.offsets = {0, 3, 4};
  g.sources = {0, 0, 1, 0};
  const auto gcn = with_self_loops(g, false);
  EXPECT_EQ(gcn.sources, (std::vector<vid_t>{0, 0, 1, 0, 1}));
  const auto gat = with_self_loops(g, true);
  EXPECT_EQ(gat.sources, (std::vector<vid_t>{0, 1, 0, 1}));
  EXPECT_EQ(gat.offsets, (std::vector<eid_t>{0, 2, 4}));
}

TEST(Transpose, ListsOutEdgesWithTheirPositions) {
  const std::vector<eid_t> offsets = {0, 2, 3};
  const std::vector<vid_t> sources = {1, 2, 1};
  const auto t = transpose(offsets, sources, 3);
  EXPECT_EQ(t.offsets, (std::vector<eid_t>{0, 0, 2, 3}));
  EXPECT_EQ(t.destinations, (std::vector<vid_t>{0, 1, 0}));
  EXPECT_EQ(t.edge_position, (std::vector<eid_t>{0, 2, 1}));
}

}  // namespace
}  // namespace nj
