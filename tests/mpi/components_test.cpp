// The connected components of a distributed graph, and where PT-Scotch's partition puts them
// (nj/partition/components.hpp): on 1 to 4 ranks, as tests/CMakeLists.txt runs this binary.
#include "nj/partition/components.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "mpi/job.hpp"
#include "nj/graph/generate.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/partition/parallel.hpp"
#include "nj/partition/partition.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

// An undirected graph of `n` vertices whose components are known: a path through 400 vertices in an order drawn at
// random (so that it runs back and forth between the slices), cliques of 2 to 6, and isolated vertices.
struct KnownComponents {
  static constexpr std::size_t kPath = 400;
  std::int64_t n = 0;
  std::vector<std::vector<gid_t>> neighbours;
  std::vector<gid_t> component;  // the least vertex of each vertex's component

  explicit KnownComponents(std::int64_t vertices) : n(vertices), neighbours(vertices) {
    std::vector<gid_t> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(3));
    const auto join = [&](gid_t a, gid_t b) {
      neighbours[static_cast<std::size_t>(a)].push_back(b);
      neighbours[static_cast<std::size_t>(b)].push_back(a);
    };
    std::size_t at = 0;
    for (; at + 1 < kPath; ++at) join(order[at], order[at + 1]);
    ++at;
    for (std::size_t size = 2; at + size + 20 <= order.size(); at += size, size = 2 + size % 5) {
      for (std::size_t i = at; i < at + size; ++i) {
        for (std::size_t j = i + 1; j < at + size; ++j) join(order[i], order[j]);
      }
    }
    // The reference: repeated relaxation to each neighbour's least name, until none changes.
    component.resize(static_cast<std::size_t>(n));
    std::iota(component.begin(), component.end(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (gid_t v = 0; v < n; ++v) {
        for (const gid_t u : neighbours[static_cast<std::size_t>(v)]) {
          if (component[static_cast<std::size_t>(u)] < component[static_cast<std::size_t>(v)]) {
            component[static_cast<std::size_t>(v)] = component[static_cast<std::size_t>(u)];
            changed = true;
          }
        }
      }
    }
  }

  SliceAdjacency slice(const Slices& slices, int rank) const {
    SliceAdjacency slice;
    slice.first = slices.first(rank);
    for (gid_t v = slice.first; v < slice.first + slices.rows(rank); ++v) {
      for (const gid_t u : neighbours[static_cast<std::size_t>(v)]) slice.neighbours.push_back(u);
      slice.offsets.push_back(static_cast<std::int64_t>(slice.neighbours.size()));
    }
    return slice;
  }
};

TEST(Components, AreThoseOfTheWholeGraphOnAnyNumberOfRanks) {
  Communicator& comm = test::job();
  const KnownComponents graph(1000);
  const Slices slices(graph.n, comm.size());
  const SliceAdjacency slice = graph.slice(slices, comm.rank());
  const auto found = slice_components(slice, slices, comm, 1000);
  ASSERT_TRUE(found.has_value());
  for (std::int64_t r = 0; r < slice.rows(); ++r) {
    ASSERT_EQ((*found)[static_cast<std::size_t>(r)], graph.component[static_cast<std::size_t>(slice.first + r)])
        << "vertex " << slice.first + r;
  }
}

// The path runs between slices many times: one round of trading names cannot find its component, and every rank
// says so alike. In one process the slice's own edges join every component, without a round.
TEST(Components, AreNotFoundWhereTheyTakeMoreRoundsThanAllowed) {
  Communicator& comm = test::job();
  const KnownComponents graph(1000);
  const Slices slices(graph.n, comm.size());
  const auto found = slice_components(graph.slice(slices, comm.rank()), slices, comm, 1);
  EXPECT_EQ(found.has_value(), comm.size() == 1);
}

// Light components go whole to one part, and fill what the heavy components leave of each part's weight and of its
// share of the training vertices.
TEST(WeighedComponents, PlaceLightComponentsWholeInTheRoomTheHeavyOnesLeave) {
  Communicator& comm = test::job();
  const KnownComponents graph(1000);
  const Slices slices(graph.n, comm.size());
  const SliceAdjacency slice = graph.slice(slices, comm.rank());
  const std::vector<gid_t> component = *slice_components(slice, slices, comm, 1000);
  std::vector<std::int64_t> weights;
  std::vector<std::uint8_t> training;
  for (gid_t v = slice.first; v < slice.first + slice.rows(); ++v) {
    training.push_back(v % 7 == 0 ? 1 : 0);
    weights.push_back(1 + training.back());
  }
  constexpr int kParts = 4;
  constexpr std::int64_t kLight = 12;  // every clique and isolated vertex; the path weighs more
  const WeighedComponents components(component, weights, training, kLight, slices, comm);
  // The path, heavy, all in part 1.
  std::vector<std::int32_t> part(weights.size(), 1);
  std::vector<std::int64_t> heavy_load(kParts, 0);
  std::vector<std::int64_t> heavy_training(kParts, 0);
  std::vector<std::int64_t> weight(kParts, 0);
  std::vector<std::int64_t> trained(kParts, 0);
  for (std::size_t r = 0; r < part.size(); ++r) {
    if (components.heavy(r)) {
      heavy_load[1] += weights[r];
      heavy_training[1] += training[r];
    }
  }
  comm.all_reduce_sum(heavy_load);
  comm.all_reduce_sum(heavy_training);
  components.place_light(part, heavy_load, heavy_training);
  // Each component's least and most part, negated and not, as every rank saw them.
  std::vector<double> seen(2 * static_cast<std::size_t>(graph.n), -1.0 * kParts);
  for (std::size_t r = 0; r < part.size(); ++r) {
    const auto c = static_cast<std::size_t>(component[r]);
    seen[2 * c] = std::max(seen[2 * c], -static_cast<double>(part[r]));
    seen[2 * c + 1] = std::max(seen[2 * c + 1], static_cast<double>(part[r]));
    weight[static_cast<std::size_t>(part[r])] += weights[r];
    trained[static_cast<std::size_t>(part[r])] += training[r];
  }
  comm.all_reduce_max(seen);
  comm.all_reduce_sum(weight);
  comm.all_reduce_sum(trained);
  for (std::size_t c = 0; c < static_cast<std::size_t>(graph.n); ++c) {
    if (seen[2 * c + 1] >= 0) {
      EXPECT_EQ(-seen[2 * c], seen[2 * c + 1]) << "component " << c << " is cut";
    }
  }
  const std::int64_t total_weight = std::accumulate(weight.begin(), weight.end(), std::int64_t{0});
  const std::int64_t total_training = std::accumulate(trained.begin(), trained.end(), std::int64_t{0});
  ASSERT_GT(heavy_load[1], total_weight / kParts) << "the heavy part must leave part 1 no room";
  for (int k = 0; k < kParts; ++k) {
    if (k == 1) {
      EXPECT_EQ(weight[1], heavy_load[1]) << "light components where there is no room";
    } else {
      const auto k_at = static_cast<std::size_t>(k);
      const double even_weight = static_cast<double>(total_weight - heavy_load[1]) / (kParts - 1);
      const double even_training = static_cast<double>(total_training - heavy_training[1]) / (kParts - 1);
      EXPECT_NEAR(static_cast<double>(weight[k_at]), even_weight, kLight * comm.size()) << "part " << k;
      EXPECT_NEAR(static_cast<double>(trained[k_at]), even_training, 2 * comm.size()) << "part " << k;
    }
  }
}

// A graph like CiteSeer's: one large component of communities (generated) and many small ones (paths of 2 to 9
// vertices, a tenth of their vertices training), the ids shuffled so that every component spreads over the slices.
Dataset large_and_small_components() {
  GeneratorOptions options;
  options.vertices = 2000;
  options.edges = 12000;
  options.features = 4;
  options.classes = 4;
  options.seed = 11;
  const Dataset large = generate_dataset(options);
  constexpr vid_t kVertices = 3000;
  std::vector<vid_t> id(kVertices);
  std::iota(id.begin(), id.end(), 0);
  std::shuffle(id.begin(), id.end(), std::mt19937(5));
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
  Dataset dataset;
  dataset.name = "components";
  dataset.features = Matrix(kVertices, options.features);
  dataset.labels.assign(kVertices, 0);
  dataset.num_classes = options.classes;
  for (auto* mask : {&dataset.train_mask, &dataset.val_mask, &dataset.test_mask}) mask->assign(kVertices, 0);
  for (vid_t v = 0; v < kVertices; ++v) {
    const auto to = static_cast<std::size_t>(id[static_cast<std::size_t>(v)]);
    if (v < large.num_vertices()) {
      for (const vid_t s : large.graph.in_neighbors(v)) {
        src.push_back(id[static_cast<std::size_t>(s)]);
        dst.push_back(static_cast<vid_t>(to));
      }
      std::copy_n(large.features.row(v), options.features, dataset.features.row(static_cast<std::int64_t>(to)));
      dataset.labels[to] = large.labels[static_cast<std::size_t>(v)];
      dataset.train_mask[to] = large.train_mask[static_cast<std::size_t>(v)];
    } else {
      dataset.labels[to] = v % options.classes;
      dataset.train_mask[to] = v % 10 == 0 ? 1 : 0;
    }
    dataset.val_mask[to] = dataset.train_mask[to] == 0 && v % 5 == 0 ? 1 : 0;
  }
  for (vid_t v = large.num_vertices(), length = 2; v + length <= kVertices; v += length, length = 2 + v % 8) {
    for (vid_t i = v; i + 1 < v + length; ++i) {
      for (const auto& [a, b] : {std::pair(i, i + 1), std::pair(i + 1, i)}) {
        src.push_back(id[static_cast<std::size_t>(a)]);
        dst.push_back(id[static_cast<std::size_t>(b)]);
      }
    }
  }
  dataset.graph = build_csr(kVertices, src, dst);
  dataset.symmetrized = true;
  return dataset;
}

// With many small components PT-Scotch still cuts about as few edges as METIS: it places them whole and divides the
// large one among the parts it needs. Handed the whole graph, Scotch spread CiteSeer's large component over every part
// and cut up to 2.3 times METIS's edges.
TEST(ParallelPartition, ScotchCutsAboutAsFewEdgesAsMetisWhereSmallComponentsAbound) {
  Communicator& comm = test::job();
  const test::TempDir mine;
  const std::string folder = test::shared_folder(comm, mine);
  const std::string path = folder + "/components.h5";
  const Dataset dataset = large_and_small_components();
  if (comm.rank() == 0) write_dataset(path, dataset);
  test::wait_for_every_rank(comm);
  for (const int parts : {4, 8}) {
    SCOPED_TRACE(testing::Message() << parts << " parts");
    PartitionInfo metis;
    assign_parts(dataset, {.method = PartitionMethod::kMetis, .parts = parts, .seed = 1}, metis);
    const PartitionManifest scotch = partition_in_parallel(
        path, {.method = PartitionMethod::kScotch, .parts = parts, .seed = 1}, comm, [](Shard&&) {});
    EXPECT_LE(static_cast<double>(scotch.partition.edge_cut), 1.3 * static_cast<double>(metis.edge_cut))
        << "METIS cuts " << metis.edge_cut;
    EXPECT_LE(scotch.partition.vertex_imbalance(), 1.05);
  }
}

// A small graph is partitioned several ways and the least cut kept: never more than the clusters' way alone, and here
// fewer.
TEST(ParallelPartition, ASmallGraphKeepsTheLeastCutOfSeveralWays) {
  Communicator& comm = test::job();
  const test::TempDir mine;
  const std::string folder = test::shared_folder(comm, mine);
  const std::string path = folder + "/components.h5";
  if (comm.rank() == 0) write_dataset(path, large_and_small_components());
  test::wait_for_every_rank(comm);
  std::int64_t fewer = 0;
  for (const int parts : {4, 8}) {
    const PartitionOptions several{.method = PartitionMethod::kScotch, .parts = parts, .seed = 1};
    PartitionOptions one = several;
    one.several_ways_up_to = 0;
    const auto cut = [&](const PartitionOptions& options) {
      return partition_in_parallel(path, options, comm, [](Shard&&) {}).partition.edge_cut;
    };
    const std::int64_t least = cut(several);
    const std::int64_t clusters = cut(one);
    EXPECT_LE(least, clusters) << parts << " parts";
    fewer += least < clusters ? 1 : 0;
  }
  EXPECT_GT(fewer, 0) << "the other ways never cut fewer edges";
}

}  // namespace
}  // namespace nj
