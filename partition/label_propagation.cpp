#include "nj/partition/label_propagation.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "nj/core/error.hpp"
#include "nj/core/mix64.hpp"
#include "nj/core/release.hpp"

namespace nj {
namespace {

// Rounds of label propagation: each visits every row once. A round that moves fewer than one row in kSettledRows
// (over all ranks) ends it earlier.
constexpr int kRounds = 6;
constexpr std::int64_t kSettledRows = 1000;

// The rows in an order drawn from the seed, so that no cluster grows only because its rows come first.
std::vector<std::int32_t> visiting_order(std::int64_t rows, std::int64_t first, std::uint64_t seed) {
  NJ_REQUIRE(rows <= std::numeric_limits<std::int32_t>::max(),
             "a rank's slice of {} vertices is past 2^31 - 1: partition on more ranks", rows);
  std::vector<std::int32_t> order(static_cast<std::size_t>(rows));
  std::iota(order.begin(), order.end(), 0);
  const auto key = [&](std::int32_t row) { return mix64(seed ^ mix64(static_cast<std::uint64_t>(first + row))); };
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return key(a) < key(b); });
  return order;
}

bool inside(const SliceAdjacency& slice, gid_t v) { return slice.holds(v); }

// A label's rows' weight, as a rank sends it to the label's owner.
struct LabelWeight {
  gid_t label;
  std::int64_t weight;
};

// A value for each of a sorted set of labels (global vertex ids), found by binary search.
struct LabelTable {
  std::vector<gid_t> labels;  // ascending, without repeats
  std::vector<std::int64_t> values;

  std::int64_t& operator[](gid_t label) {
    const auto at = std::lower_bound(labels.begin(), labels.end(), label) - labels.begin();
    NJ_EXPECTS(at < static_cast<std::ptrdiff_t>(labels.size()) && labels[static_cast<std::size_t>(at)] == label,
               "label {} is not in the table", label);
    return values[static_cast<std::size_t>(at)];
  }
};

// Label propagation over the distributed graph: each row's label is a global vertex id (its own at first), and a
// cluster is the rows with one label, on any rank. A round moves half the rows (drawn), then the other half, each
// against the labels all rows had when its half began, wherever they are, so that what a row hears does not depend on
// how the rows are spread over the ranks; a cluster's weight is its weight then, plus this rank's moves. Ranks moving
// rows into one cluster at once may take it past the limit by as much as each adds: the pieces (pieces_of_clusters) are
// what must stay light, and they do.
class Propagation {
 public:
  Propagation(const SliceAdjacency& slice, std::span<const std::int64_t> weights, std::int64_t max_weight,
              std::uint64_t seed, const Slices& slices, Communicator& comm)
      : slice_(slice), weights_(weights), max_weight_(max_weight), seed_(seed), slices_(slices), comm_(comm) {
    label_.resize(static_cast<std::size_t>(slice.rows()));
    std::iota(label_.begin(), label_.end(), slice.first);
    outside_.labels = outside_neighbours(slice);
  }

  // One round over the rows in `order`; returns how many rows moved on every rank together.
  std::int64_t round(std::span<const std::int32_t> order, int round) {
    std::vector<std::int64_t> moved{0};
    for (const std::uint64_t half : {0U, 1U}) {
      outside_.values = ask_owners<gid_t>(outside_.labels, slices_, comm_, [&](gid_t id) { return label_of(id); });
      cluster_weight_ = LabelTable{};  // the last half-round's weights go before the new ones are summed
      cluster_weight_ = cluster_weights();
      before_ = label_;
      for (const std::int32_t row : order) {
        const auto r = static_cast<std::size_t>(row);
        if (half_of(row, round) != half) continue;
        const gid_t to = best_label(row, round);
        if (to == label_[r]) continue;
        cluster_weight_[label_[r]] -= weights_[r];
        cluster_weight_[to] += weights_[r];
        label_[r] = to;
        ++moved[0];
      }
    }
    comm_.all_reduce_sum(moved);
    return moved[0];
  }

  std::vector<gid_t> take_labels() { return std::move(label_); }

 private:
  gid_t label_of(gid_t v) const { return label_[static_cast<std::size_t>(v - slice_.first)]; }
  // Which half of the round a row moves in, drawn anew each round. Were every row to move at once, against the labels
  // as the round began, the two sides of a bipartite graph would trade labels each round, and no edge of a grid ever
  // joined one cluster.
  std::uint64_t half_of(std::int32_t row, int round) const {
    return mix64(seed_ ^ mix64(static_cast<std::uint64_t>(slice_.first + row) * 64U + static_cast<unsigned>(round))) &
           1U;
  }

  // A neighbour's label as the half-round began, on this rank as on the others: the other ranks' labels can only be
  // known so, and the rank's own are read alike, so that what a row hears does not depend on how the rows are spread
  // over the ranks (what a cluster may still take does: a rank sees its own moves at once, the others' a half later).
  gid_t neighbour_label(gid_t v) {
    return inside(slice_, v) ? before_[static_cast<std::size_t>(v - slice_.first)] : outside_[v];
  }

  // The weight of every label that this rank's rows or their neighbours hold: each rank's sums sent to the rank that
  // owns the label (as a vertex id), added there, and asked back.
  LabelTable cluster_weights() {
    std::vector<LabelWeight> mine;
    mine.reserve(label_.size());
    for (std::size_t r = 0; r < label_.size(); ++r) mine.push_back({label_[r], weights_[r]});
    std::sort(mine.begin(), mine.end(), [](const LabelWeight& a, const LabelWeight& b) { return a.label < b.label; });
    std::size_t labels = 0;  // each label once, with its rows' weight summed, in place
    for (std::size_t i = 0; i < mine.size(); ++labels) {
      LabelWeight sum{mine[i].label, 0};
      for (; i < mine.size() && mine[i].label == sum.label; ++i) sum.weight += mine[i].weight;
      mine[labels] = sum;
    }
    mine.resize(labels);
    std::vector<Writer> writers(static_cast<std::size_t>(comm_.size()));
    auto begin = mine.begin();
    for (int q = 0; q < comm_.size(); ++q) {  // the labels of each owner are a run, as the slices are ascending
      const auto end =
          std::partition_point(begin, mine.end(), [&](const LabelWeight& w) { return w.label < slices_.first(q + 1); });
      writers[static_cast<std::size_t>(q)].put(std::span<const LabelWeight>(begin, end));
      begin = end;
    }
    release_vector(mine);
    std::vector<std::int64_t> owned_weight(label_.size(), 0);  // of the labels that are this rank's vertex ids
    for (const auto& message : exchange(writers, comm_)) {
      const PackedArray<LabelWeight> sums = Reader(message).next<LabelWeight>();
      for (std::size_t i = 0; i < sums.size(); ++i) {
        const LabelWeight sum = sums[i];
        owned_weight[static_cast<std::size_t>(sum.label - slice_.first)] += sum.weight;
      }
    }
    LabelTable table;
    table.labels.reserve(label_.size() + outside_.values.size());
    table.labels = label_;
    table.labels.insert(table.labels.end(), outside_.values.begin(), outside_.values.end());
    table.labels = sorted_unique(std::move(table.labels));
    table.values = ask_owners<std::int64_t>(table.labels, slices_, comm_, [&](gid_t id) {
      return owned_weight[static_cast<std::size_t>(id - slice_.first)];
    });
    return table;
  }

  // The label most of `row`'s neighbours hold among those whose clusters can take it (ties: its own, then one drawn
  // by the seed and the round).
  gid_t best_label(std::int32_t row, int round) {
    const auto r = static_cast<std::size_t>(row);
    heard_.clear();
    for (auto e = slice_.offsets[r]; e < slice_.offsets[r + 1]; ++e) {
      heard_.push_back(neighbour_label(slice_.neighbours[static_cast<std::size_t>(e)]));
    }
    std::sort(heard_.begin(), heard_.end());
    const gid_t own = label_[r];
    const auto own_range = std::equal_range(heard_.begin(), heard_.end(), own);
    gid_t best = own;
    std::int64_t best_rating = own_range.second - own_range.first;
    std::uint64_t best_draw = 0;
    for (std::size_t i = 0; i < heard_.size();) {
      const gid_t label = heard_[i];
      std::size_t j = i;
      while (j < heard_.size() && heard_[j] == label) ++j;
      const auto rating = static_cast<std::int64_t>(j - i);
      i = j;
      if (label == own || rating < best_rating || cluster_weight_[label] + weights_[r] > max_weight_) continue;
      const std::uint64_t draw =
          mix64(seed_ ^ mix64(static_cast<std::uint64_t>(label) * 64U + static_cast<unsigned>(round)));
      if (rating > best_rating || (best != own && draw < best_draw)) {
        best = label;
        best_rating = rating;
        best_draw = draw;
      }
    }
    return best;
  }

  const SliceAdjacency& slice_;
  std::span<const std::int64_t> weights_;
  std::int64_t max_weight_;
  std::uint64_t seed_;
  const Slices& slices_;
  Communicator& comm_;
  std::vector<gid_t> label_;
  std::vector<gid_t> before_;  // this rank's labels as the round began
  LabelTable outside_;         // the labels of the neighbours on other ranks, as the round began
  LabelTable cluster_weight_;
  std::vector<gid_t> heard_;
};

// The rows of each label on this rank cut into pieces of at most `max_weight` (a row heavier than it alone), in the
// order `order`; the pieces numbered from 0.
SliceClusters pieces_of_clusters(std::span<const gid_t> label, std::span<const std::int64_t> weights,
                                 std::int64_t max_weight, std::span<const std::int32_t> order) {
  std::vector<std::int32_t> rows(order.begin(), order.end());
  std::stable_sort(rows.begin(), rows.end(), [&](std::int32_t a, std::int32_t b) {
    return label[static_cast<std::size_t>(a)] < label[static_cast<std::size_t>(b)];
  });
  SliceClusters pieces;
  pieces.of_row.assign(label.size(), 0);
  std::int64_t weight = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<std::size_t>(rows[i]);
    const bool new_label = i == 0 || label[r] != label[static_cast<std::size_t>(rows[i - 1])];
    if (new_label || weight + weights[r] > max_weight) {
      ++pieces.count;
      weight = 0;
    }
    weight += weights[r];
    pieces.of_row[r] = pieces.count - 1;
  }
  return pieces;
}

// The number of this rank's first cluster: the clusters of the ranks before it.
std::int64_t first_cluster(std::int32_t count, Communicator& comm) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(comm.size()), 0);
  counts[static_cast<std::size_t>(comm.rank())] = count;
  comm.all_reduce_sum(counts);
  return std::accumulate(counts.begin(), counts.begin() + comm.rank(), std::int64_t{0});
}

// The global cluster of every row's neighbour: its own rank's numbering for a neighbour in the slice, else asked of
// the rank whose slice holds it.
class NeighbourClusters {
 public:
  NeighbourClusters(const SliceAdjacency& slice, const SliceClusters& clusters, std::int64_t first_cluster,
                    const Slices& slices, Communicator& comm)
      : slice_(slice), clusters_(clusters), first_cluster_(first_cluster) {
    outside_.labels = outside_neighbours(slice);
    outside_.values = ask_owners<std::int64_t>(outside_.labels, slices, comm, [&](gid_t id) { return of(id); });
  }
  std::int64_t operator()(gid_t v) { return inside(slice_, v) ? of(v) : outside_[v]; }

 private:
  std::int64_t of(gid_t v) const {
    return first_cluster_ + clusters_.of_row[static_cast<std::size_t>(v - slice_.first)];
  }

  const SliceAdjacency& slice_;
  const SliceClusters& clusters_;
  std::int64_t first_cluster_;
  LabelTable outside_;
};

// Rounds of refinement, each in two halves (the rows of one parity of a hash, then the other), so that half the
// edges join rows that do not move at once, and fewer neighbours swap parts and undo each other's gain.
constexpr int kRefinementRounds = 8;

// Moves the rows of one half-round to the part most of their neighbours are in, where that cuts fewer edges and the
// part has room: each rank may fill a share of a part's room in proportion to how few ranks there are (1 / ranks).
class Refinement {
 public:
  Refinement(const SliceAdjacency& slice, std::span<const std::int64_t> weights, std::vector<std::int32_t>& part,
             int parts, std::int64_t max_part_weight, const Slices& slices, Communicator& comm)
      : slice_(slice),
        weights_(weights),
        part_(part),
        max_part_weight_(max_part_weight),
        slices_(slices),
        comm_(comm),
        part_weight_(static_cast<std::size_t>(parts), 0),
        rating_(static_cast<std::size_t>(parts), 0) {
    for (std::size_t r = 0; r < part.size(); ++r) part_weight_[static_cast<std::size_t>(part[r])] += weights[r];
    comm.all_reduce_sum(part_weight_);
    outside_.labels = outside_neighbours(slice);
  }

  // Moves the rows whose parity is `half`; returns how many moved on every rank together.
  std::int64_t half_round(std::uint64_t seed, int half) {
    outside_.values = ask_owners<std::int64_t>(outside_.labels, slices_, comm_, [&](gid_t id) {
      return std::int64_t{part_[static_cast<std::size_t>(id - slice_.first)]};
    });
    std::vector<std::int64_t> change(part_weight_.size() + 1, 0);  // each part's weight change, then the moves
    std::vector<std::int64_t> room;
    for (const std::int64_t weight : part_weight_)
      room.push_back(std::max<std::int64_t>(0, max_part_weight_ - weight) / comm_.size());
    const std::vector<std::int32_t> before = part_;
    for (std::int64_t row = 0; row < slice_.rows(); ++row) {
      const auto r = static_cast<std::size_t>(row);
      if ((mix64(seed ^ static_cast<std::uint64_t>(slice_.first + row)) & 1U) != static_cast<unsigned>(half)) continue;
      const std::int32_t to = best_part(row, before, room, change);
      if (to == part_[r]) continue;
      change[static_cast<std::size_t>(part_[r])] -= weights_[r];
      change[static_cast<std::size_t>(to)] += weights_[r];
      part_[r] = to;
      ++change.back();
    }
    comm_.all_reduce_sum(change);
    for (std::size_t p = 0; p < part_weight_.size(); ++p) part_weight_[p] += change[p];
    return change.back();
  }

 private:
  // The part with the most neighbours of `row` (as the half-round began) beyond those in its own, with room left.
  std::int32_t best_part(std::int64_t row, std::span<const std::int32_t> before, std::span<const std::int64_t> room,
                         std::span<const std::int64_t> change) {
    const auto r = static_cast<std::size_t>(row);
    touched_.clear();
    for (auto e = slice_.offsets[r]; e < slice_.offsets[r + 1]; ++e) {
      const gid_t v = slice_.neighbours[static_cast<std::size_t>(e)];
      const auto p = static_cast<std::size_t>(inside(slice_, v) ? before[static_cast<std::size_t>(v - slice_.first)]
                                                                : outside_[v]);
      if (rating_[p]++ == 0) touched_.push_back(static_cast<std::int32_t>(p));
    }
    const std::int32_t own = part_[r];
    const std::int64_t own_rating = rating_[static_cast<std::size_t>(own)];
    std::int32_t best = own;
    std::int64_t best_rating = own_rating;
    for (const std::int32_t p : touched_) {
      const auto i = static_cast<std::size_t>(p);
      if (rating_[i] > best_rating && std::max<std::int64_t>(change[i], 0) + weights_[r] <= room[i]) {
        best = p;
        best_rating = rating_[i];
      }
    }
    for (const std::int32_t p : touched_) rating_[static_cast<std::size_t>(p)] = 0;
    return best;
  }

  const SliceAdjacency& slice_;
  std::span<const std::int64_t> weights_;
  std::vector<std::int32_t>& part_;
  std::int64_t max_part_weight_;
  const Slices& slices_;
  Communicator& comm_;
  std::vector<std::int64_t> part_weight_;
  std::vector<std::int64_t> rating_;
  std::vector<std::int32_t> touched_;
  LabelTable outside_;  // the parts of the neighbours on other ranks, as the half-round began
};

}  // namespace

SliceClusters cluster_slice(const SliceAdjacency& slice, std::span<const std::int64_t> weights,
                            const ClusterLimits& limits, std::uint64_t seed, const Slices& slices, Communicator& comm) {
  NJ_EXPECTS(static_cast<std::int64_t>(weights.size()) == slice.rows(), "{} weights for {} rows", weights.size(),
             slice.rows());
  const std::vector<std::int32_t> order = visiting_order(slice.rows(), slice.first, seed);
  std::vector<std::int64_t> rows{slice.rows()};
  comm.all_reduce_sum(rows);
  Propagation propagation(slice, weights, limits.cluster, seed, slices, comm);
  for (int round = 0; round < kRounds; ++round) {
    if (propagation.round(order, round) * kSettledRows < rows[0]) break;
  }
  return pieces_of_clusters(propagation.take_labels(), weights, limits.piece, order);
}

ClusterGraph contract(const SliceAdjacency& slice, std::span<const std::int64_t> weights, const SliceClusters& clusters,
                      const Slices& slices, Communicator& comm) {
  ClusterGraph graph;
  graph.adjacency.first = first_cluster(clusters.count, comm);
  NeighbourClusters cluster_of(slice, clusters, graph.adjacency.first, slices, comm);
  // The rows of each cluster, grouped by a counting sort.
  std::vector<std::int64_t> member_offsets(static_cast<std::size_t>(clusters.count) + 1, 0);
  for (const std::int32_t c : clusters.of_row) {
    if (c >= 0) ++member_offsets[static_cast<std::size_t>(c) + 1];
  }
  std::partial_sum(member_offsets.begin(), member_offsets.end(), member_offsets.begin());
  std::vector<std::int32_t> members(static_cast<std::size_t>(member_offsets[static_cast<std::size_t>(clusters.count)]));
  std::vector<std::int64_t> cursor(member_offsets.begin(), member_offsets.end() - 1);
  for (std::size_t r = 0; r < clusters.of_row.size(); ++r) {
    if (clusters.of_row[r] < 0) continue;
    members[static_cast<std::size_t>(cursor[static_cast<std::size_t>(clusters.of_row[r])]++)] =
        static_cast<std::int32_t>(r);
  }
  graph.weights.assign(static_cast<std::size_t>(clusters.count), 0);
  std::vector<std::int64_t> reached;
  for (std::int32_t c = 0; c < clusters.count; ++c) {
    const std::int64_t self = graph.adjacency.first + c;
    reached.clear();
    for (auto m = member_offsets[static_cast<std::size_t>(c)]; m < member_offsets[static_cast<std::size_t>(c) + 1];
         ++m) {
      const auto r = static_cast<std::size_t>(members[static_cast<std::size_t>(m)]);
      graph.weights[static_cast<std::size_t>(c)] += weights[r];
      for (auto e = slice.offsets[r]; e < slice.offsets[r + 1]; ++e) {
        const std::int64_t other = cluster_of(slice.neighbours[static_cast<std::size_t>(e)]);
        if (other != self) reached.push_back(other);
      }
    }
    std::sort(reached.begin(), reached.end());
    for (std::size_t i = 0; i < reached.size();) {
      std::size_t j = i;
      while (j < reached.size() && reached[j] == reached[i]) ++j;
      graph.adjacency.neighbours.push_back(reached[i]);
      graph.adjacency.edge_weights.push_back(static_cast<std::int64_t>(j - i));
      i = j;
    }
    graph.adjacency.offsets.push_back(static_cast<std::int64_t>(graph.adjacency.neighbours.size()));
  }
  return graph;
}

void refine_parts(const SliceAdjacency& slice, std::span<const std::int64_t> weights, std::vector<std::int32_t>& part,
                  int parts, std::int64_t max_part_weight, std::uint64_t seed, const Slices& slices,
                  Communicator& comm) {
  Refinement refinement(slice, weights, part, parts, max_part_weight, slices, comm);
  for (int round = 0; round < kRefinementRounds; ++round) {
    const std::uint64_t round_seed = mix64(seed + static_cast<std::uint64_t>(round));
    if (refinement.half_round(round_seed, 0) + refinement.half_round(round_seed, 1) == 0) break;
  }
}

}  // namespace nj
