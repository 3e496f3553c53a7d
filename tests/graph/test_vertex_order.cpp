// Vertex orders: communities gather neighbours within the cap, renumbering keeps every vertex's data and what
// ranks exchange, and training under the community order is the training of the input order up to rounding.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "nj/exec/executor.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/train/trainer.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

// Two cliques of `size` vertices, interleaved: the even ids form one, the odd ids the other.
LocalGraph interleaved_cliques(vid_t size) {
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
  for (vid_t a = 0; a < 2 * size; ++a) {
    for (vid_t b = a % 2; b < 2 * size; b += 2) {
      if (a != b) src.push_back(a), dst.push_back(b);
    }
  }
  return whole_local_graph(build_csr(2 * size, src, dst));
}

std::set<gid_t> in_neighbour_ids(const LocalGraph& local, vid_t v) {
  std::set<gid_t> ids;
  for (const vid_t s : local.graph.in_neighbors(v)) ids.insert(local.global_id[static_cast<std::size_t>(s)]);
  return ids;
}

std::vector<vid_t> shuffled(vid_t n, std::uint64_t seed) {
  std::vector<vid_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), vid_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  return order;
}

TEST(VertexOrder, CommunityOrderPutsEachCliqueTogether) {
  const LocalGraph local = interleaved_cliques(6);
  const std::vector<vid_t> order = owned_order(local, VertexOrder::kCommunity);
  EXPECT_EQ(order, (std::vector<vid_t>{0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(owned_order(local, VertexOrder::kInput), (std::vector<vid_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
}

TEST(VertexOrder, CommunitiesStayWithinTheCap) {
  const Dataset data = test::grid_dataset(100, 100, 1);  // 10,000 vertices, connected
  const LocalGraph local = whole_local_graph(data.graph);
  std::map<vid_t, vid_t> size;
  for (const vid_t label : communities(local)) ++size[label];
  EXPECT_GE(size.size(), 3U);
  for (const auto& [label, members] : size) EXPECT_LE(members, kCommunityVertices) << "community " << label;
  EXPECT_EQ(communities(local), communities(local));
}

// Communities and the order on 1 and on 3 threads, the threads restored after.
struct OnThreads {
  std::vector<vid_t> communities;
  std::vector<vid_t> order;
};
OnThreads on_threads(const LocalGraph& local, int threads) {
  const int was = omp_get_max_threads();
  omp_set_num_threads(threads);
  OnThreads result{communities(local), owned_order(local, VertexOrder::kCommunity)};
  omp_set_num_threads(was);
  return result;
}

// A graph of three sweep chunks: the order is a permutation that lays each community out in one run, in ascending
// ids, communities in the order of their smallest vertex; and neither depends on the number of threads.
TEST(VertexOrder, CommunityOrderIsTheSameContiguousPermutationOnAnyThreads) {
  const Dataset data = test::grid_dataset(400, 400, 3);  // 160,000 vertices
  const LocalGraph local = whole_local_graph(data.graph);
  const OnThreads one = on_threads(local, 1);
  const OnThreads three = on_threads(local, 3);
  EXPECT_EQ(one.communities, three.communities);
  EXPECT_EQ(one.order, three.order);

  const std::vector<vid_t>& order = one.order;
  std::vector<vid_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<vid_t> ids(static_cast<std::size_t>(local.num_owned));
  std::iota(ids.begin(), ids.end(), vid_t{0});
  ASSERT_EQ(sorted, ids);
  std::set<vid_t> laid_out;
  vid_t smallest_before = -1;  // the smallest vertex of the community laid out before
  for (std::size_t i = 0; i < order.size(); ++i) {
    const vid_t label = one.communities[static_cast<std::size_t>(order[i])];
    if (i > 0 && label == one.communities[static_cast<std::size_t>(order[i - 1])]) {
      EXPECT_LT(order[i - 1], order[i]) << "at " << i;
    } else {
      EXPECT_TRUE(laid_out.insert(label).second) << "community " << label << " is split (at " << i << ")";
      EXPECT_GT(order[i], smallest_before) << "at " << i;
      smallest_before = order[i];
    }
  }
  // Propagation did gather the grid's neighbours: a community has about 20 vertices on average.
  EXPECT_LT(laid_out.size(), order.size() / 8);
}

// Every vertex of three chunks prefers the same hub labels, so each chunk alone would fill label 0: the cap must
// still hold once the chunks' moves are counted together.
TEST(VertexOrder, ChunksThatFillOneCommunityTogetherStayWithinTheCap) {
  constexpr vid_t kHubs = 4;
  const vid_t n = 3 * 65536;
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
  for (vid_t v = kHubs; v < n; ++v) {
    for (vid_t h = 0; h < kHubs; ++h) src.push_back(h), dst.push_back(v);
  }
  const LocalGraph local = whole_local_graph(build_csr(n, src, dst));
  const OnThreads one = on_threads(local, 1);
  EXPECT_EQ(one.communities, on_threads(local, 3).communities);
  std::map<vid_t, vid_t> size;
  for (const vid_t label : one.communities) ++size[label];
  vid_t largest = 0;
  for (const auto& [label, members] : size) largest = std::max(largest, members);
  EXPECT_EQ(largest, kCommunityVertices);  // the cap binds
}

// What nj convert and nj generate store is what a single-process run would search for: reading it orders the
// vertices exactly as searching does, for a graph and for a shard (which uses its stored order once).
TEST(VertexOrder, AStoredCommunityOrderOrdersAsTheSearchDoes) {
  Dataset dataset = test::grid_dataset(100, 100, 5);  // more vertices than a community holds
  store_community_order(dataset);
  const Shard input = whole_graph_shard(dataset);
  ASSERT_EQ(input.community_order, dataset.community_order);
  EXPECT_EQ(dataset.community_order, owned_order(input.local, VertexOrder::kCommunity));
  EXPECT_NE(dataset.community_order, owned_order(input.local, VertexOrder::kInput));  // the order does change

  LocalGraph searched = input.local;
  order_vertices(searched, VertexOrder::kCommunity);
  LocalGraph read = input.local;
  order_vertices(read, VertexOrder::kCommunity, dataset.community_order);
  EXPECT_EQ(read.global_id, searched.global_id);
  EXPECT_EQ(read.graph.offsets, searched.graph.offsets);
  EXPECT_EQ(read.graph.sources, searched.graph.sources);

  Shard shard = input;
  order_vertices(shard, VertexOrder::kCommunity);
  EXPECT_EQ(shard.local.global_id, searched.global_id);
  EXPECT_TRUE(shard.community_order.empty());  // its ids are no longer the shard's
  // The input order ignores a stored community order.
  LocalGraph as_stored = input.local;
  order_vertices(as_stored, VertexOrder::kInput, dataset.community_order);
  EXPECT_EQ(as_stored.global_id, input.local.global_id);
}

// The stored order is the one applied, whatever it is: reversed ids give reversed ids, to a graph and a shard.
TEST(VertexOrder, TheStoredOrderIsTheOneApplied) {
  Dataset dataset = test::grid_dataset(12, 12, 5);
  dataset.community_order.resize(static_cast<std::size_t>(dataset.num_vertices()));
  std::iota(dataset.community_order.rbegin(), dataset.community_order.rend(), vid_t{0});
  const std::vector<gid_t> reversed(dataset.community_order.begin(), dataset.community_order.end());
  Shard shard = whole_graph_shard(dataset);
  LocalGraph local = shard.local;
  order_vertices(local, VertexOrder::kCommunity, dataset.community_order);
  EXPECT_EQ(local.global_id, reversed);
  order_vertices(shard, VertexOrder::kCommunity);
  EXPECT_EQ(shard.local.global_id, reversed);
  EXPECT_TRUE(shard.community_order.empty());
}

// A shard renumbered by its own stored order reads the order to the end (its rows too), then drops it.
TEST(VertexOrder, RenumberingAShardByItsOwnStoredOrderPermutesItsRows) {
  Dataset dataset = test::grid_dataset(6, 6, 5);
  dataset.community_order.resize(static_cast<std::size_t>(dataset.num_vertices()));
  std::iota(dataset.community_order.rbegin(), dataset.community_order.rend(), vid_t{0});
  const Shard input = whole_graph_shard(dataset);
  Shard shard = input;
  renumber_owned(shard, shard.community_order);
  EXPECT_TRUE(shard.community_order.empty());
  const auto n = static_cast<std::size_t>(input.num_owned());
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(shard.labels[i], input.labels[n - 1 - i]) << i;
    EXPECT_EQ(shard.test_mask[i], input.test_mask[n - 1 - i]) << i;
    EXPECT_EQ(shard.features.row(static_cast<std::int64_t>(i))[0],
              input.features.row(static_cast<std::int64_t>(n - 1 - i))[0])
        << i;
  }
}

TEST(VertexOrder, AStoredOrderOfAnotherSizeIsAnInputError) {
  Dataset dataset = test::grid_dataset(10, 10, 5);
  store_community_order(dataset);
  dataset.community_order.pop_back();
  LocalGraph local = whole_local_graph(dataset.graph);
  EXPECT_THROW(order_vertices(local, VertexOrder::kCommunity, dataset.community_order), InputError);
}

TEST(VertexOrder, UnknownOrderIsAnInputError) {
  EXPECT_EQ(parse_vertex_order("community"), VertexOrder::kCommunity);
  EXPECT_EQ(parse_vertex_order("input"), VertexOrder::kInput);
  EXPECT_THROW(parse_vertex_order("rcm"), InputError);
}

TEST(VertexOrder, RenumberingKeepsEveryVertexWithItsEdgesAndData) {
  const Dataset data = test::random_dataset(300, 1500, 5, 3, 11);
  const Shard before = whole_graph_shard(data);
  Shard after = before;
  const std::vector<vid_t> order = shuffled(before.num_owned(), 5);
  renumber_owned(after, order);
  after.validate("renumbered");
  for (vid_t v = 0; v < after.num_owned(); ++v) {
    const auto old = static_cast<std::size_t>(order[static_cast<std::size_t>(v)]);
    const auto now = static_cast<std::size_t>(v);
    EXPECT_EQ(after.local.global_id[now], before.local.global_id[old]);
    EXPECT_EQ(after.local.global_in_degree[now], before.local.global_in_degree[old]);
    EXPECT_EQ(after.local.global_self_loop[now], before.local.global_self_loop[old]);
    EXPECT_EQ(in_neighbour_ids(after.local, v), in_neighbour_ids(before.local, static_cast<vid_t>(old)));
    const auto sources = after.local.graph.in_neighbors(v);
    EXPECT_TRUE(std::is_sorted(sources.begin(), sources.end()));
    EXPECT_TRUE(std::equal(after.features.row(v), after.features.row(v) + after.features.cols(),
                           before.features.row(static_cast<std::int64_t>(old))));
    EXPECT_EQ(after.labels[now], before.labels[old]);
    EXPECT_EQ(after.train_mask[now], before.train_mask[old]);
    EXPECT_EQ(after.val_mask[now], before.val_mask[old]);
    EXPECT_EQ(after.test_mask[now], before.test_mask[old]);
  }
  EXPECT_THROW(renumber_owned(after, std::vector<vid_t>(static_cast<std::size_t>(after.num_owned()), 0)), Error);
}

TEST(VertexOrder, RenumberingAShardKeepsWhatItsPeersExchange) {
  const Dataset data = test::grid_dataset(12, 12, 2);
  std::vector<std::int32_t> part_of(static_cast<std::size_t>(data.num_vertices()));
  for (vid_t v = 0; v < data.num_vertices(); ++v) part_of[static_cast<std::size_t>(v)] = v % 3 == 0 ? 1 : 0;
  PartitionInfo info;
  info.parts = 2;
  for (const int part : {0, 1}) {
    const Shard before = make_shard(data, part_of, part, info);
    Shard after = before;
    renumber_owned(after, shuffled(before.num_owned(), 7));
    after.local.validate("renumbered");
    ASSERT_EQ(after.local.peers.size(), before.local.peers.size());
    for (std::size_t p = 0; p < before.local.peers.size(); ++p) {
      const PeerRows& was = before.local.peers[p];
      const PeerRows& now = after.local.peers[p];
      ASSERT_EQ(now.send.size(), was.send.size());
      for (std::size_t k = 0; k < was.send.size(); ++k) {
        EXPECT_EQ(after.local.global_id[static_cast<std::size_t>(now.send[k])],
                  before.local.global_id[static_cast<std::size_t>(was.send[k])]);
      }
      EXPECT_EQ(now.receive, was.receive);
    }
    for (vid_t v = before.num_owned(); v < before.local.num_local(); ++v) {
      EXPECT_EQ(after.local.global_id[static_cast<std::size_t>(v)],
                before.local.global_id[static_cast<std::size_t>(v)]);
    }
  }
}

struct Trained {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
};

Trained train_in_memory(const Shard& shard, ModelKind kind) {
  ModelConfig config;
  config.kind = kind;
  config.hidden = 8;
  config.heads = 2;
  config.dropout = 0.5F;
  config.attention_dropout = 0.3F;
  config.seed = 4;
  Resources resources = test::backend_resources(DeviceKind::kCpu, kUnlimited, 2);
  auto comm = make_single_process_communicator();
  Model model(config, shard.features.cols(), shard.num_classes);
  InMemoryExecutor executor(resources, model, shard.local, shard.features.view());
  TrainOptions options;
  options.epochs = 4;
  options.eval_every = 0;
  Trained result;
  Trainer trainer(model, executor, *comm, targets_of(shard), options);
  trainer.fit([&](const EpochMetrics& m) { result.losses.push_back(m.loss); });
  for (const Parameter* p : model.parameters())
    result.weights.emplace_back(p->value.span().begin(), p->value.span().end());
  return result;
}

// Any order trains the same: the community order on a graph that forms several communities, and a random one.
TEST(VertexOrder, TrainingUnderAnyOrderIsTrainingUnderTheInputOrder) {
  const Shard input = whole_graph_shard(test::grid_dataset(100, 100, 5));
  Shard community = input;
  order_vertices(community, VertexOrder::kCommunity);
  ASSERT_NE(community.local.global_id, input.local.global_id);  // the order did change
  Shard random = input;
  renumber_owned(random, shuffled(input.num_owned(), 9));
  for (const ModelKind kind : {ModelKind::kGcn, ModelKind::kGat}) {
    SCOPED_TRACE(kind == ModelKind::kGcn ? "gcn" : "gat");
    const Trained a = train_in_memory(input, kind);
    for (const Shard* ordered : {&community, &random}) {
      const Trained b = train_in_memory(*ordered, kind);
      ASSERT_EQ(a.losses.size(), b.losses.size());
      for (std::size_t e = 0; e < a.losses.size(); ++e) EXPECT_NEAR(a.losses[e], b.losses[e], 1e-5 * a.losses[e]);
      for (std::size_t p = 0; p < a.weights.size(); ++p) {
        for (std::size_t k = 0; k < a.weights[p].size(); ++k) {
          EXPECT_NEAR(a.weights[p][k], b.weights[p][k], 1e-5F * std::max(1.0F, std::abs(a.weights[p][k])));
        }
      }
    }
  }
}

}  // namespace
}  // namespace nj
