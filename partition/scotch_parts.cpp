#include "scotch_parts.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "nj/core/mix64.hpp"
#include "nj/partition/components.hpp"
#include "nj/partition/label_propagation.hpp"
#include "scotch.hpp"

namespace nj {
namespace {

// How heavy a cluster may grow, as a share of a part's mean weight. Lighter clusters split the generated graphs'
// communities, and Scotch then cut more edges: with 0.3, an earlier form of the propagation cut the 200k-vertex graph
// at 8 parts 25.4 % where METIS cuts 19.0 %, and with 0.6 19.0 %.
constexpr double kClusterShare = 0.6;

// Rounds of trading component names between slices before a graph is taken as one component (slice_components).
constexpr int kComponentRounds = 16;

// The ways of the clusters that a small graph is partitioned (PartitionOptions::several_ways_up_to): Scotch's cut of
// the same graph varied with its seed by up to 1.4 times (Cora, CiteSeer), on the clusters' graph as on the vertices',
// and neither graph was the better on both.
constexpr int kClusteredTries = 3;

// The connected component of each of the slice's rows; where finding them takes more than kComponentRounds rounds,
// one component for every row, as it was before components were looked for.
std::vector<gid_t> components_or_one(const SliceAdjacency& adjacency, const Slices& slices, Communicator& comm) {
  std::optional<std::vector<gid_t>> component = slice_components(adjacency, slices, comm, kComponentRounds);
  if (component) return std::move(*component);
  spdlog::debug("rank {}: components not found in {} rounds: the graph taken as one", comm.rank(), kComponentRounds);
  return std::vector<gid_t>(static_cast<std::size_t>(adjacency.rows()), 0);
}

// What Scotch divides the heavy components into: as few parts as their weight needs (parts weigh a 1/parts share of
// the whole, as even as whole units allow), padded to those parts' weight with fillers as heavy as a light component
// may be, which let Scotch leave any part the room it cuts least to leave.
ScotchTargets heavy_targets(const WeighedComponents& components, int parts, std::int64_t light_limit) {
  const Slices line(components.total_weight(), parts);
  int heavy_parts = 0;
  while (line.first(heavy_parts) < components.heavy_weight()) ++heavy_parts;
  return {
      .parts = heavy_parts, .padding = line.first(heavy_parts) - components.heavy_weight(), .most_filler = light_limit};
}

// One way to partition: Scotch on the clusters of label propagation, cut into pieces, or on the vertices themselves;
// and the seed of both and of the refinement.
struct Way {
  bool clustered = true;
  std::uint64_t seed = 0;
};

// What every way reads.
struct Graph {
  const SliceAdjacency& adjacency;
  std::span<const std::int64_t> weights;
  std::span<const std::uint8_t> training;
  const WeighedComponents& components;
  const Slices& slices;
};

SliceClusters single_vertices(std::int64_t rows) {
  SliceClusters clusters;
  clusters.of_row.resize(static_cast<std::size_t>(rows));
  std::iota(clusters.of_row.begin(), clusters.of_row.end(), 0);
  clusters.count = static_cast<std::int32_t>(rows);
  return clusters;
}

// Leaves the light components' rows out of the pieces (-1), the pieces of heavy components numbered as they were
// ordered: the graph Scotch partitions.
void set_light_apart(SliceClusters& clusters, const WeighedComponents& components) {
  std::vector<std::int32_t> number(static_cast<std::size_t>(clusters.count), -1);
  for (std::size_t r = 0; r < clusters.of_row.size(); ++r) {
    if (components.heavy(r)) number[static_cast<std::size_t>(clusters.of_row[r])] = 0;
  }
  std::int32_t heavy = 0;
  for (std::int32_t& n : number) {
    if (n == 0) n = heavy++;
  }
  for (std::int32_t& c : clusters.of_row) c = number[static_cast<std::size_t>(c)];
  clusters.count = heavy;
}

// The parts one way gives: the pieces of heavy components partitioned by Scotch into as few parts as they need, the
// light components placed whole in what those leave, and the parts refined on the whole graph.
std::vector<std::int32_t> parts_one_way(const Graph& graph, const Way& way, int parts, const ClusterLimits& limits,
                                        std::int64_t max_part_weight, Communicator& comm, PartitionRankCounts& counts) {
  SliceClusters clusters = way.clustered
                               ? cluster_slice(graph.adjacency, graph.weights, limits, way.seed, graph.slices, comm)
                               : single_vertices(graph.adjacency.rows());
  // A cluster lies within one component (a row joins its neighbours' cluster), and so do its pieces. Scotch partitions
  // the heavy components' pieces; the light ones' rows are placed below.
  set_light_apart(clusters, graph.components);
  std::vector<std::int32_t> cluster_part;
  {
    ClusterGraph contracted = contract(graph.adjacency, graph.weights, clusters, graph.slices, comm);
    spdlog::debug("rank {}: {} clusters with {} adjacency entries, from {} vertices with {}", comm.rank(),
                  clusters.count, contracted.adjacency.neighbours.size(), graph.adjacency.rows(),
                  graph.adjacency.neighbours.size());
    std::vector<std::int64_t> whole{static_cast<std::int64_t>(contracted.adjacency.neighbours.size())};
    comm.all_reduce_sum(whole);
    // The largest of the ways tried, each count on its own (the ways run one after the other).
    counts.clusters = std::max<std::int64_t>(counts.clusters, clusters.count);
    counts.cluster_adjacency =
        std::max(counts.cluster_adjacency, static_cast<std::int64_t>(contracted.adjacency.neighbours.size()));
    counts.whole_cluster_adjacency = std::max(counts.whole_cluster_adjacency, whole[0]);
    cluster_part = scotch_parts(contracted.adjacency, contracted.weights,
                                heavy_targets(graph.components, parts, limits.piece), way.seed, comm.size());
  }
  std::vector<std::int32_t> part;
  part.reserve(clusters.of_row.size());
  // What the heavy components weigh in each part, then their training vertices there.
  std::vector<std::int64_t> heavy(2 * static_cast<std::size_t>(parts), 0);
  for (std::size_t r = 0; r < clusters.of_row.size(); ++r) {
    const bool in_heavy = graph.components.heavy(r);
    part.push_back(in_heavy ? cluster_part[static_cast<std::size_t>(clusters.of_row[r])] : 0);
    if (!in_heavy) continue;
    heavy[static_cast<std::size_t>(part.back())] += graph.weights[r];
    heavy[static_cast<std::size_t>(parts + part.back())] += graph.training[r];
  }
  comm.all_reduce_sum(heavy);
  const std::span<const std::int64_t> heavy_amounts(heavy);
  graph.components.place_light(part, heavy_amounts.first(static_cast<std::size_t>(parts)),
                               heavy_amounts.last(static_cast<std::size_t>(parts)));
  refine_parts(graph.adjacency, graph.weights, part, parts, max_part_weight, way.seed, graph.slices, comm);
  return part;
}

// The adjacency entries between parts, over every rank: twice the edge cut.
std::int64_t cut_entries(const SliceAdjacency& adjacency, std::span<const std::int32_t> part, const Slices& slices,
                         Communicator& comm) {
  const NeighbourParts neighbour = neighbour_parts(adjacency, part, slices, comm);
  std::vector<std::int64_t> cut{0};
  for (std::int64_t r = 0; r < adjacency.rows(); ++r) {
    for (auto e = adjacency.offsets[static_cast<std::size_t>(r)];
         e < adjacency.offsets[static_cast<std::size_t>(r) + 1]; ++e) {
      cut[0] += neighbour.of_entry[static_cast<std::size_t>(e)] != part[static_cast<std::size_t>(r)] ? 1 : 0;
    }
  }
  comm.all_reduce_sum(cut);
  return cut[0];
}

// The ways to try: on a small graph the vertices' and kClusteredTries of the clusters', each seed drawn from the
// options'; on a larger one the clusters' with that seed.
std::vector<Way> ways_for(const SliceAdjacency& adjacency, const PartitionOptions& options, Communicator& comm) {
  const std::uint64_t seed = options.seed;
  std::vector<std::int64_t> entries{static_cast<std::int64_t>(adjacency.neighbours.size())};
  comm.all_reduce_sum(entries);
  if (entries[0] > options.several_ways_up_to) return {{.clustered = true, .seed = seed}};
  std::vector<Way> ways{{.clustered = false, .seed = seed}};
  for (int t = 0; t < kClusteredTries; ++t) {
    ways.push_back({.clustered = true, .seed = t == 0 ? seed : mix64(seed + static_cast<std::uint64_t>(t))});
  }
  return ways;
}

}  // namespace

std::vector<std::int32_t> scotch_slice_parts(const PartitionOptions& options, const SliceAdjacency& adjacency,
                                             std::span<const std::int64_t> weights,
                                             std::span<const std::uint8_t> training, const Slices& slices,
                                             Communicator& comm, PartitionRankCounts& counts) {
  std::vector<std::int64_t> total{std::accumulate(weights.begin(), weights.end(), std::int64_t{0})};
  comm.all_reduce_sum(total);
  const double mean_part = static_cast<double>(total[0]) / options.parts;
  const auto at_least_one = [](double weight) { return std::max<std::int64_t>(1, static_cast<std::int64_t>(weight)); };
  const ClusterLimits limits{at_least_one(kClusterShare * mean_part), at_least_one(kPartImbalance * mean_part)};
  const std::int64_t max_part_weight = at_least_one((1.0 + kPartImbalance) * mean_part);
  const std::vector<gid_t> component = components_or_one(adjacency, slices, comm);
  const WeighedComponents components(component, weights, training, limits.piece, slices, comm);
  counts.components = components.named();
  const Graph graph{adjacency, weights, training, components, slices};
  const std::vector<Way> ways = ways_for(adjacency, options, comm);
  std::vector<std::int32_t> best;
  std::int64_t best_cut = 0;
  for (const Way& way : ways) {
    std::vector<std::int32_t> part = parts_one_way(graph, way, options.parts, limits, max_part_weight, comm, counts);
    if (ways.size() == 1) return part;
    const std::int64_t cut = cut_entries(adjacency, part, slices, comm);
    spdlog::debug("rank {}: Scotch on the {} with seed {} cut {} edges", comm.rank(),
                  way.clustered ? "clusters" : "vertices", way.seed, cut / 2);
    if (best.empty() || cut < best_cut) {
      best = std::move(part);
      best_cut = cut;
    }
  }
  return best;
}

}  // namespace nj
