#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "nj/core/error.hpp"
#include "nj/graph/mean_part.hpp"

namespace nj {
namespace {

// The made-up part has the counts it was asked for: owned vertices with the in-edges spread evenly, every mirror read
// by an edge, and each mirror owned by one peer, which mirrors as many owned rows.
TEST(MeanPart, HasTheCountsItWasGiven) {
  const PartShape shape{.owned = 1000, .mirrors = 700, .in_edges = 10003, .peers = 3};
  const LocalGraph local = mean_part_graph(shape, 5);
  EXPECT_EQ(local.num_owned, 1000);
  EXPECT_EQ(local.num_mirrors(), 700);
  EXPECT_EQ(local.graph.num_edges(), 10003);
  local.graph.validate("mean part");
  std::set<vid_t> read;
  for (vid_t v = 0; v < local.num_owned; ++v) {
    EXPECT_TRUE(local.graph.in_degree(v) == 10 || local.graph.in_degree(v) == 11) << v;
    const auto sources = local.graph.in_neighbors(v);
    EXPECT_TRUE(std::is_sorted(sources.begin(), sources.end())) << v;
    read.insert(sources.begin(), sources.end());
  }
  for (vid_t m = local.num_owned; m < local.num_local(); ++m) {
    EXPECT_EQ(local.graph.in_degree(m), 0);
    EXPECT_TRUE(read.contains(m)) << "mirror " << m << " is read by no edge";
  }
  ASSERT_EQ(local.peers.size(), 3U);
  std::size_t received = 0;
  for (const PeerRows& peer : local.peers) {
    received += peer.receive.size();
    EXPECT_TRUE(std::all_of(peer.send.begin(), peer.send.end(), [&](vid_t v) { return v < local.num_owned; }));
    EXPECT_TRUE(std::is_sorted(peer.send.begin(), peer.send.end()));
    EXPECT_EQ(peer.send.size(), peer.receive.size());
  }
  EXPECT_EQ(received, 700U);
}

TEST(MeanPart, RefusesCountsThatCannotBeAPart) {
  EXPECT_THROW(mean_part_graph({.owned = 0, .mirrors = 0, .in_edges = 0, .peers = 0}, 1), InputError);
  EXPECT_THROW(mean_part_graph({.owned = 10, .mirrors = 20, .in_edges = 5, .peers = 1}, 1), InputError);
  EXPECT_THROW(mean_part_graph({.owned = 10, .mirrors = 2, .in_edges = 50, .peers = 0}, 1), InputError);
  EXPECT_EQ(mean_part_graph({.owned = 10, .mirrors = 0, .in_edges = 50, .peers = 0}, 1).peers.size(), 0U);
}

}  // namespace
}  // namespace nj
