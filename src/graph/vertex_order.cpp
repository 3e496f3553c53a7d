#include "nj/graph/vertex_order.hpp"

#include <algorithm>
#include <numeric>

#include "nj/core/error.hpp"

namespace nj {
namespace {

// Rounds of label propagation: most vertices settle in the first two, and each round reads every edge once.
constexpr int kPropagationRounds = 3;

}  // namespace

std::vector<vid_t> communities(const LocalGraph& local) {
  const vid_t n = local.num_owned;
  const CsrGraph& g = local.graph;
  std::vector<vid_t> label(static_cast<std::size_t>(n));
  std::iota(label.begin(), label.end(), vid_t{0});
  std::vector<vid_t> size(static_cast<std::size_t>(n), 1);
  std::vector<vid_t> votes(static_cast<std::size_t>(n), 0);
  std::vector<vid_t> voted;  // labels with votes for the current vertex
  for (int round = 0; round < kPropagationRounds; ++round) {
    eid_t moves = 0;
    for (vid_t v = 0; v < n; ++v) {
      // The labels are a random gather: ask for the next vertex's while this one votes.
      if (v + 1 < n) {
        for (const vid_t s : g.in_neighbors(v + 1)) {
          if (s < n) __builtin_prefetch(&label[static_cast<std::size_t>(s)]);
        }
      }
      for (const vid_t s : g.in_neighbors(v)) {
        if (s >= n || s == v) continue;  // mirrors are not renumbered
        const vid_t l = label[static_cast<std::size_t>(s)];
        if (votes[static_cast<std::size_t>(l)]++ == 0) voted.push_back(l);
      }
      const vid_t current = label[static_cast<std::size_t>(v)];
      vid_t best = current;
      vid_t best_votes = votes[static_cast<std::size_t>(current)];
      for (const vid_t l : voted) {
        const vid_t count = votes[static_cast<std::size_t>(l)];
        // Ties go to the smaller label, and a full community takes no one, so the result is deterministic and
        // every community stays within the cap.
        const bool better = count > best_votes || (count == best_votes && best != current && l < best);
        if (better && l != current && size[static_cast<std::size_t>(l)] < kCommunityVertices) {
          best = l;
          best_votes = count;
        }
        votes[static_cast<std::size_t>(l)] = 0;
      }
      voted.clear();
      if (best != current) {
        --size[static_cast<std::size_t>(current)];
        ++size[static_cast<std::size_t>(best)];
        label[static_cast<std::size_t>(v)] = best;
        ++moves;
      }
    }
    if (moves == 0) break;
  }
  return label;
}

namespace {

// Permutes rows [0, order.size()) of a row-major array in place: row i becomes old row order[i].
template <class T>
void permute_rows(T* data, std::int64_t cols, std::span<const vid_t> order) {
  std::vector<bool> placed(order.size(), false);
  std::vector<T> held(static_cast<std::size_t>(cols));
  for (std::size_t start = 0; start < order.size(); ++start) {
    if (placed[start]) continue;
    // Follow the cycle through start: each position takes the row its order names.
    std::copy_n(data + static_cast<std::int64_t>(start) * cols, cols, held.begin());
    std::size_t i = start;
    while (true) {
      placed[i] = true;
      const auto from = static_cast<std::size_t>(order[i]);
      if (from == start) {
        std::copy(held.begin(), held.end(), data + static_cast<std::int64_t>(i) * cols);
        break;
      }
      std::copy_n(data + static_cast<std::int64_t>(from) * cols, cols, data + static_cast<std::int64_t>(i) * cols);
      i = from;
    }
  }
}

// The same for one value per row, through a copy: following cycles is a chain of cache misses, while a copy's
// gathers are independent (and a few bytes per vertex).
template <class T>
void permute_prefix(std::vector<T>& values, std::span<const vid_t> order) {
  std::vector<T> permuted(order.size());
#pragma omp parallel for schedule(static) if (order.size() > (std::size_t{1} << 20))
  for (std::size_t i = 0; i < order.size(); ++i) permuted[i] = values[static_cast<std::size_t>(order[i])];
  std::copy(permuted.begin(), permuted.end(), values.begin());
}

}  // namespace

const char* to_string(VertexOrder order) { return order == VertexOrder::kInput ? "input" : "community"; }

VertexOrder parse_vertex_order(const std::string& text) {
  if (text == "input") return VertexOrder::kInput;
  if (text == "community") return VertexOrder::kCommunity;
  throw InputError(fmt::format("unknown vertex order '{}' (use input or community)", text));
}

std::vector<vid_t> owned_order(const LocalGraph& local, VertexOrder order) {
  std::vector<vid_t> result(static_cast<std::size_t>(local.num_owned));
  std::iota(result.begin(), result.end(), vid_t{0});
  if (order == VertexOrder::kInput) return result;
  const std::vector<vid_t> label = communities(local);
  // Communities in the order of their smallest vertex, then ascending ids within each.
  std::vector<vid_t> rank(label.size(), -1);
  vid_t communities = 0;
  for (const vid_t l : label) {
    if (rank[static_cast<std::size_t>(l)] < 0) rank[static_cast<std::size_t>(l)] = communities++;
  }
  std::stable_sort(result.begin(), result.end(), [&](vid_t a, vid_t b) {
    return rank[static_cast<std::size_t>(label[static_cast<std::size_t>(a)])] <
           rank[static_cast<std::size_t>(label[static_cast<std::size_t>(b)])];
  });
  return result;
}

void renumber_owned(LocalGraph& local, std::span<const vid_t> order) {
  const vid_t owned = local.num_owned;
  NJ_EXPECTS(static_cast<vid_t>(order.size()) == owned, "an order of {} vertices for {} owned", order.size(), owned);
  std::vector<vid_t> new_of(static_cast<std::size_t>(local.num_local()), -1);
  for (vid_t i = 0; i < owned; ++i) {
    const vid_t old = order[static_cast<std::size_t>(i)];
    NJ_EXPECTS(old >= 0 && old < owned && new_of[static_cast<std::size_t>(old)] < 0,
               "the order is not a permutation of the owned vertices (at {})", i);
    new_of[static_cast<std::size_t>(old)] = i;
  }
  for (vid_t v = owned; v < local.num_local(); ++v) new_of[static_cast<std::size_t>(v)] = v;

  // Offsets first, so that each vertex's in-edges can then be renumbered and sorted on any thread.
  const CsrGraph& g = local.graph;
  CsrGraph renumbered;
  renumbered.offsets.assign(g.offsets.size(), 0);
  for (vid_t i = 0; i < g.num_vertices(); ++i) {
    const eid_t degree = i < owned ? g.in_degree(order[static_cast<std::size_t>(i)]) : 0;
    renumbered.offsets[static_cast<std::size_t>(i) + 1] = renumbered.offsets[static_cast<std::size_t>(i)] + degree;
  }
  renumbered.sources.resize(static_cast<std::size_t>(renumbered.offsets.back()));
#pragma omp parallel for schedule(dynamic, 4096) if (g.num_edges() > (eid_t{1} << 20))
  for (vid_t i = 0; i < owned; ++i) {
    vid_t* out = renumbered.sources.data() + renumbered.offsets[static_cast<std::size_t>(i)];
    vid_t* end = out;
    for (const vid_t s : g.in_neighbors(order[static_cast<std::size_t>(i)]))
      *end++ = new_of[static_cast<std::size_t>(s)];
    std::sort(out, end);
  }
  local.graph = std::move(renumbered);

  permute_prefix(local.global_id, order);
  permute_prefix(local.global_in_degree, order);
  permute_prefix(local.global_self_loop, order);
  for (PeerRows& peer : local.peers) {
    for (vid_t& v : peer.send) v = new_of[static_cast<std::size_t>(v)];
  }
}

void renumber_owned(Shard& shard, std::span<const vid_t> order) {
  renumber_owned(shard.local, order);
  permute_rows(shard.features.row(0), shard.features.cols(), order);
  permute_prefix(shard.labels, order);
  permute_prefix(shard.train_mask, order);
  permute_prefix(shard.val_mask, order);
  permute_prefix(shard.test_mask, order);
}

void order_vertices(LocalGraph& local, VertexOrder order) {
  if (order != VertexOrder::kInput) renumber_owned(local, owned_order(local, order));
}

void order_vertices(Shard& shard, VertexOrder order) {
  if (order != VertexOrder::kInput) renumber_owned(shard, owned_order(shard.local, order));
}

}  // namespace nj
