#include "training_balance.hpp"

#include <algorithm>
#include <numeric>

#include "nj/core/error.hpp"
#include "nj/partition/parallel.hpp"

namespace nj {
namespace {

// Pairs what parts give with what others take, in part order, taking both down.
void pair_up(std::vector<std::int64_t>& give, std::vector<std::int64_t>& take, std::vector<TrainingExchange>& out) {
  for (std::size_t from = 0, to = 0; from < give.size() && to < take.size();) {
    if (give[from] == 0) {
      ++from;
    } else if (take[to] == 0) {
      ++to;
    } else {
      const std::int64_t count = std::min(give[from], take[to]);
      out.push_back({static_cast<int>(from), static_cast<int>(to), count});
      give[from] -= count;
      take[to] -= count;
    }
  }
}

// Per rank, part and kind (1 training, 0 not), the vertices that may still move: every rank's counts, and how many
// of each an exchange has taken from each rank.
class Candidates {
 public:
  Candidates(std::span<const std::int32_t> part, std::span<const std::uint8_t> training, int parts, Communicator& comm)
      : parts_(parts), ranks_(comm.size()), rank_(comm.rank()), left_(static_cast<std::size_t>(ranks_ * parts * 2), 0) {
    for (std::size_t r = 0; r < part.size(); ++r) ++left_[index(rank_, part[r], training[r])];
    comm.all_reduce_sum(left_);
  }
  // Takes `count` vertices of `part` and `kind` from the ranks in rank order; returns how many are this rank's.
  std::int64_t take(int part, int kind, std::int64_t count) {
    std::int64_t mine = 0;
    for (int rank = 0; rank < ranks_ && count > 0; ++rank) {
      std::int64_t& left = left_[index(rank, part, kind)];
      const std::int64_t taken = std::min(left, count);
      left -= taken;
      count -= taken;
      if (rank == rank_) mine = taken;
    }
    return mine;
  }
  std::int64_t left(int part, int kind) const {
    std::int64_t sum = 0;
    for (int rank = 0; rank < ranks_; ++rank) sum += left_[index(rank, part, kind)];
    return sum;
  }

 private:
  std::size_t index(int rank, int part, int kind) const {
    return static_cast<std::size_t>((rank * parts_ + part) * 2 + kind);
  }
  int parts_;
  int ranks_;
  int rank_;
  std::vector<std::int64_t> left_;
};

// Moves `count` of this rank's vertices of `kind` still in part `from` (as Scotch left them) to part `to`, those with
// the most neighbours in `to` less those in `from` first.
void move_best(std::vector<std::int32_t>& part, std::vector<char>& moved, std::span<const std::uint8_t> training,
               const SliceAdjacency& adjacency, std::span<const std::int32_t> neighbour_part, int kind, int from,
               int to, std::int64_t count) {
  std::vector<std::pair<std::int64_t, std::size_t>> ranked;  // (-gain, row)
  for (std::size_t r = 0; r < part.size(); ++r) {
    if (part[r] != from || training[r] != kind || moved[r] != 0) continue;
    std::int64_t gain = 0;
    for (auto e = adjacency.offsets[r]; e < adjacency.offsets[r + 1]; ++e) {
      const std::int32_t q = neighbour_part[static_cast<std::size_t>(e)];
      gain += (q == to ? 1 : 0) - (q == from ? 1 : 0);
    }
    ranked.emplace_back(-gain, r);
  }
  const auto chosen =
      static_cast<std::ptrdiff_t>(std::min<std::size_t>(static_cast<std::size_t>(count), ranked.size()));
  std::partial_sort(ranked.begin(), ranked.begin() + chosen, ranked.end());
  for (auto it = ranked.begin(); it != ranked.begin() + chosen; ++it) {
    part[it->second] = to;
    moved[it->second] = 1;
  }
}

}  // namespace

std::vector<TrainingExchange> training_exchanges(std::span<const std::int64_t> training) {
  NJ_EXPECTS(!training.empty(), "training vertices of no part to even out");
  const auto parts = static_cast<std::int64_t>(training.size());
  const std::int64_t total = std::accumulate(training.begin(), training.end(), std::int64_t{0});
  const std::int64_t high = (total + parts - 1) / parts;
  const std::int64_t low = total / parts;
  std::vector<std::int64_t> give(training.size());
  std::vector<std::int64_t> take_to_low(training.size());
  std::vector<std::int64_t> take_to_high(training.size());
  for (std::size_t p = 0; p < training.size(); ++p) {
    give[p] = std::max<std::int64_t>(0, training[p] - high);
    take_to_low[p] = std::max<std::int64_t>(0, low - training[p]);
    take_to_high[p] = high - std::max(low, std::min(training[p], high));
  }
  // Where the parts below the mean rounded down cannot take it all (140 over 8 parts: 19 beside 17s and 18s, none
  // below 17), parts below the mean rounded up take the rest, so that none stays above it.
  std::vector<TrainingExchange> exchanges;
  pair_up(give, take_to_low, exchanges);
  pair_up(give, take_to_high, exchanges);
  return exchanges;
}

void balance_training_vertices(std::vector<std::int32_t>& part, std::span<const std::uint8_t> training,
                               const SliceAdjacency& adjacency, std::span<const std::int32_t> neighbour_part, int parts,
                               Communicator& comm) {
  std::vector<std::int64_t> per_part(static_cast<std::size_t>(parts), 0);
  for (std::size_t r = 0; r < part.size(); ++r) per_part[static_cast<std::size_t>(part[r])] += training[r];
  comm.all_reduce_sum(per_part);
  Candidates candidates(part, training, parts, comm);
  std::vector<char> moved(part.size(), 0);
  for (const TrainingExchange& exchange : training_exchanges(per_part)) {
    const std::int64_t count =
        std::min({exchange.count, candidates.left(exchange.from, 1), candidates.left(exchange.to, 0)});
    move_best(part, moved, training, adjacency, neighbour_part, 1, exchange.from, exchange.to,
              candidates.take(exchange.from, 1, count));
    move_best(part, moved, training, adjacency, neighbour_part, 0, exchange.to, exchange.from,
              candidates.take(exchange.to, 0, count));
  }
}

}  // namespace nj
