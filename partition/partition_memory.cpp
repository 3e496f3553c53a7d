#include "nj/partition/partition_memory.hpp"

#include <algorithm>
#include <cmath>

namespace nj {
namespace {

// Bytes of each array, as partition/parallel.cpp holds them: global ids, edge offsets and in-degrees take 8 bytes,
// parts and labels 4, masks 1 each.
constexpr std::int64_t kId = 8;
constexpr std::int64_t kFloat = 4;
constexpr std::int64_t kFactsPerRow = 8 + 4 + 8 + 1;            // name, part, in-degree, self-loop (VertexFacts)
constexpr std::int64_t kRowFieldsSent = 8 + 8 + 4 + 8 + 4 + 3;  // id, name, part, in-degree, label, masks
constexpr std::int64_t kRowFieldsBuilt = 8 + 8 + 8 + 4 + 3;     // id, name, edge offset, label, masks (PartRows)
constexpr std::int64_t kArraysPerMessage = 8;
constexpr std::int64_t kFactAnswer = 24;  // a mirror's facts as its owner answers them
// PT-Scotch's own peak, per vertex and adjacency entry of the clusters' graph that a rank holds and per entry of the
// whole clusters' graph (the band around the cut, which every rank gathers): a least-squares fit, not a derivation, to
// what Scotch held on 6 generated graphs at 4 and 16 parts (Debian 12's scotch-int64; partition/README.md, "What a
// rank holds"), its cost per vertex fitted again once light components were set aside (partition/components.hpp), to
// the 400k-vertex graph of Forecasts.PartitionHoldsWhatItsFormulaSays at 1, 2 and 4 ranks: the pieces that were
// isolated vertices, which cost Scotch little, no longer count. On several ranks it was within 16 % where Scotch held
// more than 40 MiB, and within 16 MiB below; in one process within 6 %, and 26 MiB.
struct ScotchFit {
  std::int64_t per_vertex;
  std::int64_t per_entry;
  std::int64_t per_whole_entry;
};
constexpr ScotchFit kScotchOnRanks{971, 98, 17};
constexpr ScotchFit kScotchInOneProcess{1352, 46, 0};

std::int64_t slice_bytes(const PartitionRankCounts& c) {
  return kId * (c.rows + 1) + kId * c.in_edges + (4 + 3) * c.rows + (c.named ? kId * c.rows : 0);
}

// Each stored edge s -> v (not a self-loop) travels as (s, v) to the rank that holds s; the rank then fills the
// offsets and the neighbours from its own edges and the messages it received.
std::int64_t undirected_bytes(const PartitionRankCounts& c) {
  const std::int64_t own = c.in_edges - c.self_loops;
  const std::int64_t exchanging = 2 * kId * own + 2 * kId * c.reversed;
  const std::int64_t filling = 2 * kId * c.reversed + kId * (own + c.reversed) + kId * c.rows;
  return slice_bytes(c) + kId * (c.rows + 1) + std::max(exchanging, filling);
}

std::int64_t adjacency_bytes(const PartitionRankCounts& c) { return kId * (c.rows + 1) + kId * c.adjacency; }

// Label propagation's rounds hold each row's weight, visiting order, label and label before the half-round, and the
// outside neighbours' labels; summing the clusters' weights holds each row's owned weight, the labels of the table
// and the questions and answers about them (as many as this rank asks: n + g). Finding the outside neighbours holds
// their entries while they are sorted; counting the cut holds each entry's part.
// PT-Scotch partitions the clusters' graph (the heavy components' pieces, partition/components.hpp): each row's weight
// and cluster and the graph (offsets, neighbours, edge weights, vertex weights), and Scotch's own memory, fitted to
// measurements.
std::int64_t scotch_bytes(const PartitionRankCounts& c) {
  const ScotchFit fit = c.ranks > 1 ? kScotchOnRanks : kScotchInOneProcess;
  const std::int64_t scotch = fit.per_vertex * c.clusters + fit.per_entry * c.cluster_adjacency +
                              fit.per_whole_entry * c.whole_cluster_adjacency;
  return (8 + 4) * c.rows + kId * (c.clusters + 1) + 2 * kId * c.cluster_adjacency + kId * c.clusters + scotch;
}

// Each row's component and whether it is heavy, and the names of the components, held from the clusters' rounds until
// the parts are known.
std::int64_t components_bytes(const PartitionRankCounts& c) { return (kId + 1) * c.rows + kId * c.components; }

std::int64_t assigning_bytes(const PartitionRankCounts& c) {
  const std::int64_t n = c.rows;
  const std::int64_t g = c.outside;
  const std::int64_t labels = n + g;
  const std::int64_t rounds = (8 + 4 + 8 + 8) * n + 2 * kId * g + kId * n + kId * labels + 3 * kId * labels;
  const std::int64_t finding = (8 + 4 + 8) * n + kId * (c.outside_entries + g);
  const std::int64_t counting = 8 * n + kFactsPerRow * n + 4 * c.adjacency + (kId + 4) * g + 3 * kId * g;
  return slice_bytes(c) + adjacency_bytes(c) +
         std::max({components_bytes(c) + rounds, finding, components_bytes(c) + scotch_bytes(c), counting});
}

std::int64_t message_bytes(std::int64_t rows, std::int64_t edges, std::int64_t width, int messages) {
  return rows * (kRowFieldsSent + kFloat * width) + kId * edges + kArraysPerMessage * kId * messages;
}

std::int64_t built_bytes(const PartitionRankCounts& c) {
  return c.rows_in * (kRowFieldsBuilt + kFloat * c.feature_width) + kId * c.edges_in + kId * c.parts_built;
}

// Packing holds the slice, its features and the messages out; exchanging, the messages out and in (the slice's
// in-edges and features gone); unpacking, the messages in and the parts they fill.
std::int64_t sending_bytes(const PartitionRankCounts& c) {
  const std::int64_t kept = slice_bytes(c) - kId * c.in_edges + kFactsPerRow * c.rows + 8 * c.rows;
  const std::int64_t out = message_bytes(c.rows, c.in_edges, c.feature_width, c.ranks);
  const std::int64_t in = message_bytes(c.rows_in, c.edges_in, c.feature_width, c.ranks);
  const std::int64_t packing = kId * c.in_edges + kFloat * c.feature_width * c.rows + out;
  return kept + std::max({packing, out + in, in + built_bytes(c)});
}

// While the mirrors' facts are asked, the slice's rows and facts are still held; then the parts' local graphs are
// built beside their rows (local sources, and per local vertex its offset, id, in-degree and self-loop) from every
// mirror's facts.
std::int64_t building_bytes(const PartitionRankCounts& c) {
  const std::int64_t m = c.mirrors;
  const std::int64_t mirror_lists = 2 * kId * m;  // per part, and all of them
  // The questions out and in, then the answers out and in (or in and their array), then the facts copied out of it.
  const std::int64_t asking =
      slice_bytes(c) - kId * c.in_edges + kFactsPerRow * c.rows +
      std::max({2 * kId * m + kFactAnswer * m, 2 * kFactAnswer * m, (kFactAnswer + kFactsPerRow) * m});
  // The parts' shards are built one after the other, beside every mirror's facts. A part's own facts and local graph
  // are built beside its rows; once its shard is made, its rows by global id go and its local graph stays, which
  // holds more than they did where a part has many mirrors.
  const std::int64_t parts = std::max<std::int64_t>(c.parts_built, 1);
  const std::int64_t one_local = kFactsPerRow * m / parts + 4 * c.edges_in / parts +
                                 (8 + 8 + 8 + 1) * (c.rows_in + m) / parts + (4 + 4 + 8) * m / parts;
  const std::int64_t kept_per_part = std::max<std::int64_t>(0, c.rows_in + 29 * m - 4 * c.edges_in) / parts;
  const std::int64_t locals = kFactsPerRow * m + one_local + (parts - 1) * kept_per_part;
  return built_bytes(c) + mirror_lists + std::max(asking, locals);
}

}  // namespace

PartitionRankCounts mean_partition_counts(std::int64_t vertices, std::int64_t edges, std::int64_t feature_width,
                                          int ranks, int parts, double mirrors_per_vertex) {
  // Entries drawn at random among `among` vertices name this many of them.
  const auto distinct = [](std::int64_t entries, std::int64_t among) {
    const auto n = static_cast<double>(among);
    return among == 0 ? std::int64_t{0} : static_cast<std::int64_t>(n * -std::expm1(-static_cast<double>(entries) / n));
  };
  // The entries of `entries` that name a vertex outside a set of `inside` vertices.
  const auto outside_of = [&](std::int64_t entries, std::int64_t inside) {
    return static_cast<std::int64_t>(static_cast<double>(entries) * static_cast<double>(vertices - inside) /
                                     static_cast<double>(vertices));
  };
  PartitionRankCounts c;
  c.ranks = ranks;
  c.rows = vertices / ranks;
  c.in_edges = edges / ranks;
  c.reversed = c.in_edges;
  c.adjacency = c.in_edges;
  c.outside_entries = outside_of(c.adjacency, c.rows);
  c.outside = distinct(c.outside_entries, vertices - c.rows);
  c.components = 1;
  c.feature_width = feature_width;
  c.parts_built = (parts + ranks - 1) / ranks;
  c.rows_in = c.parts_built * (vertices / parts);
  c.edges_in = c.parts_built * (edges / parts);
  c.mirrors = mirrors_per_vertex >= 0
                  ? static_cast<std::int64_t>(mirrors_per_vertex * static_cast<double>(c.rows_in))
                  : c.parts_built * distinct(outside_of(edges / parts, vertices / parts), vertices - vertices / parts);
  return c;
}

std::vector<PhaseBytes> partition_phase_bytes(const PartitionRankCounts& counts) {
  return {{"reading the slice", slice_bytes(counts)},
          {"the undirected graph", undirected_bytes(counts)},
          {"assigning parts", assigning_bytes(counts)},
          {"sending the rows", sending_bytes(counts)},
          {"building the shards", building_bytes(counts)}};
}

}  // namespace nj
