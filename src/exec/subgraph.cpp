#include "nj/exec/subgraph.hpp"

#include <algorithm>
#include <bit>
#include <numeric>
#include <optional>

#include "nj/core/error.hpp"

namespace nj {

bool reads_mirror(const Subgraph& part, vid_t first_mirror) {
  return std::any_of(part.sources.begin(), part.sources.end(), [&](vid_t v) { return v >= first_mirror; });
}

namespace {

constexpr vid_t kOutside = -1;  // not a source of the subgraph being built
constexpr vid_t kOther = -2;    // a source that is not a destination, not yet numbered

}  // namespace

SubgraphBuilder::SubgraphBuilder(const CsrGraph& graph, std::span<const float> edge_weight,
                                 std::span<const gid_t> global_id, std::span<const vid_t> vertex_of)
    : graph_(graph),
      edge_weight_(edge_weight),
      global_id_(global_id),
      vertex_of_(vertex_of),
      local_(static_cast<std::size_t>(graph.num_vertices()), kOutside),
      seen_((static_cast<std::size_t>(graph.num_vertices()) + 63) / 64, 0) {}

Subgraph SubgraphBuilder::build(std::span<const vid_t> dsts) {
  Subgraph sub;
  const auto num_dst = static_cast<vid_t>(dsts.size());
  eid_t edges = 0;
  for (vid_t i = 0; i < num_dst; ++i) {
    const vid_t d = dsts[static_cast<std::size_t>(i)];
    NJ_EXPECTS(local_[static_cast<std::size_t>(d)] == kOutside, "destination {} is listed twice", d);
    local_[static_cast<std::size_t>(d)] = i;
    edges += graph_.in_degree(d);
  }
  // The other sources, each once, then in ascending vertex id: by a scan of the bitmap where that costs less than
  // sorting them.
  others_.clear();
  for (const vid_t d : dsts) {
    for (const vid_t s : graph_.in_neighbors(d)) {
      vid_t& mark = local_[static_cast<std::size_t>(s)];
      if (mark != kOutside) continue;
      mark = kOther;
      others_.push_back(s);
    }
  }
  const std::size_t words = seen_.size();
  if (others_.size() * 4 >= words) {
    for (const vid_t s : others_) seen_[static_cast<std::size_t>(s) / 64] |= std::uint64_t{1} << (s % 64);
    others_.clear();
    for (std::size_t w = 0; w < words; ++w) {
      for (std::uint64_t bits = seen_[w]; bits != 0; bits &= bits - 1) {
        others_.push_back(static_cast<vid_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits))));
      }
      seen_[w] = 0;
    }
  } else {
    std::sort(others_.begin(), others_.end());
  }
  sub.sources.reserve(dsts.size() + others_.size());
  sub.sources.assign(dsts.begin(), dsts.end());
  for (const vid_t s : others_) {
    local_[static_cast<std::size_t>(s)] = static_cast<vid_t>(sub.sources.size());
    sub.sources.push_back(s);
  }

  SparseBlock& b = sub.block;
  b.num_src = static_cast<vid_t>(sub.sources.size());
  b.dst_offsets.resize(dsts.size() + 1);
  b.dst_offsets[0] = 0;
  b.src_index.resize(static_cast<std::size_t>(edges));
  if (!edge_weight_.empty()) b.edge_weight.resize(static_cast<std::size_t>(edges));
  std::size_t at = 0;
  for (std::size_t i = 0; i < dsts.size(); ++i) {
    const auto d = static_cast<std::size_t>(dsts[i]);
    const auto first = static_cast<std::size_t>(graph_.offsets[d]);
    const auto last = static_cast<std::size_t>(graph_.offsets[d + 1]);
    for (std::size_t e = first; e < last; ++e) {
      b.src_index[at + e - first] = local_[static_cast<std::size_t>(graph_.sources[e])];
    }
    if (!edge_weight_.empty()) {
      std::copy(edge_weight_.begin() + static_cast<std::ptrdiff_t>(first),
                edge_weight_.begin() + static_cast<std::ptrdiff_t>(last),
                b.edge_weight.begin() + static_cast<std::ptrdiff_t>(at));
    }
    at += last - first;
    b.dst_offsets[i + 1] = static_cast<eid_t>(at);
  }
  for (const vid_t v : sub.sources) local_[static_cast<std::size_t>(v)] = kOutside;
  b.index_by_source();
  b.src_gid.resize(sub.sources.size());
  std::transform(sub.sources.begin(), sub.sources.end(), b.src_gid.begin(), [&](vid_t v) {
    return global_id_[static_cast<std::size_t>(vertex_of_.empty() ? v : vertex_of_[static_cast<std::size_t>(v)])];
  });
  return sub;
}

Subgraph make_subgraph(const CsrGraph& graph, std::span<const float> edge_weight, std::span<const vid_t> dsts,
                       std::span<const gid_t> global_id, std::span<const vid_t> vertex_of) {
  return SubgraphBuilder(graph, edge_weight, global_id, vertex_of).build(dsts);
}

std::vector<vid_t> locality_order(const CsrGraph& graph) {
  const vid_t n = graph.num_vertices();
  std::vector<vid_t> by_degree(static_cast<std::size_t>(n));
  std::iota(by_degree.begin(), by_degree.end(), 0);
  std::stable_sort(by_degree.begin(), by_degree.end(),
                   [&](vid_t a, vid_t b) { return graph.in_degree(a) < graph.in_degree(b); });
  std::vector<char> visited(static_cast<std::size_t>(n), 0);
  std::vector<vid_t> order;
  order.reserve(static_cast<std::size_t>(n));
  std::vector<vid_t> neighbours;
  for (const vid_t root : by_degree) {
    if (visited[static_cast<std::size_t>(root)] != 0) continue;
    visited[static_cast<std::size_t>(root)] = 1;
    for (std::size_t head = order.size(), tail = (order.push_back(root), order.size()); head < tail;
         tail = order.size()) {
      for (; head < tail; ++head) {
        neighbours.clear();
        for (const vid_t s : graph.in_neighbors(order[head])) {
          if (visited[static_cast<std::size_t>(s)] == 0) {
            visited[static_cast<std::size_t>(s)] = 1;
            neighbours.push_back(s);
          }
        }
        std::stable_sort(neighbours.begin(), neighbours.end(),
                         [&](vid_t a, vid_t b) { return graph.in_degree(a) < graph.in_degree(b); });
        order.insert(order.end(), neighbours.begin(), neighbours.end());
      }
    }
  }
  return order;
}

namespace detail {

// Grows the k-hop closures of a set of destinations one vertex at a time. stamp[k][v] == generation marks v as
// a member of closure k; starting a new generation empties every closure in O(1).
class ClosureTracker {
 public:
  ClosureTracker(const CsrGraph& graph, int hops)
      : graph_(graph), stamp_(static_cast<std::size_t>(hops) + 1, std::vector<std::uint32_t>(graph.num_vertices(), 0)) {
    reset();
  }
  void reset() {
    if (++generation_ == 0) {  // the stamps wrapped around: clear them, since an old one could match again
      for (auto& level : stamp_) std::fill(level.begin(), level.end(), 0);
      generation_ = 1;
    }
    size_.vertices.assign(stamp_.size(), 0);
    size_.edges.assign(stamp_.size() - 1, 0);
  }
  // Adds destination v; `added` collects the vertices new to each closure (used for ordering).
  void add(vid_t v, std::vector<std::vector<vid_t>>* added = nullptr) {
    frontier_.clear();
    if (mark(0, v, added)) frontier_.push_back(v);
    for (std::size_t k = 0; k + 1 < stamp_.size(); ++k) {
      next_.clear();
      for (const vid_t u : frontier_) {
        size_.edges[k] += graph_.in_degree(u);
        if (mark(k + 1, u, added)) next_.push_back(u);
        for (const vid_t s : graph_.in_neighbors(u)) {
          if (mark(k + 1, s, added)) next_.push_back(s);
        }
      }
      frontier_.swap(next_);
    }
  }
  const ClosureSize& size() const { return size_; }
  bool contains(std::size_t level, vid_t v) const { return stamp_[level][static_cast<std::size_t>(v)] == generation_; }

 private:
  bool mark(std::size_t level, vid_t v, std::vector<std::vector<vid_t>>* added) {
    auto& stamp = stamp_[level][static_cast<std::size_t>(v)];
    if (stamp == generation_) return false;
    stamp = generation_;
    ++size_.vertices[level];
    if (added != nullptr) (*added)[level].push_back(v);
    return true;
  }

  const CsrGraph& graph_;
  std::vector<std::vector<std::uint32_t>> stamp_;  // 32 bits: half the memory traffic of marking
  std::uint32_t generation_ = 0;
  ClosureSize size_;
  std::vector<vid_t> frontier_;
  std::vector<vid_t> next_;
};

}  // namespace detail

using detail::ClosureTracker;

std::vector<std::vector<vid_t>> partition_in_order(const CsrGraph& graph, std::span<const vid_t> order, int hops,
                                                   const SubgraphCost& cost, std::int64_t limit,
                                                   const std::function<std::string(std::int64_t)>& describe_minimum) {
  ClosureTracker closure(graph, hops);
  std::vector<std::vector<vid_t>> parts;
  std::vector<vid_t> current;
  for (const vid_t v : order) {
    closure.add(v);
    if (cost(closure.size()) <= limit) {
      current.push_back(v);
      continue;
    }
    if (!current.empty()) {  // close the run without v and start a new one with it
      parts.push_back(std::move(current));
      current.clear();
      closure.reset();
      closure.add(v);
      if (cost(closure.size()) <= limit) {
        current.push_back(v);
        continue;
      }
    }
    if (describe_minimum) throw InputError(describe_minimum(largest_single_vertex_cost(graph, order, hops, cost)));
    parts.push_back({v});
    closure.reset();
  }
  if (!current.empty()) parts.push_back(std::move(current));
  return parts;
}

namespace {

// The size of v's one-hop in-closure, v and its distinct in-neighbours, where its in-neighbours are sorted (as
// every graph here stores them): one pass over them, without marks. -1 where they are not sorted.
std::int64_t sorted_closure_size(const CsrGraph& graph, vid_t v) {
  std::int64_t distinct = 0;
  bool has_v = false;
  vid_t previous = -1;
  for (const vid_t s : graph.in_neighbors(v)) {
    if (s < previous) return -1;
    if (s != previous) ++distinct;
    has_v = has_v || s == v;
    previous = s;
  }
  return distinct + (has_v ? 0 : 1);
}

}  // namespace

std::int64_t largest_single_vertex_cost(const CsrGraph& graph, std::span<const vid_t> vertices, int hops,
                                        const SubgraphCost& cost) {
  std::int64_t largest = 0;
  std::optional<ClosureTracker> tracker;
  ClosureSize one_hop{{1, 0}, {0}};
  for (const vid_t v : vertices) {
    if (hops == 1) {
      one_hop.vertices[1] = sorted_closure_size(graph, v);
      one_hop.edges[0] = graph.in_degree(v);
      if (one_hop.vertices[1] >= 0) {
        largest = std::max(largest, cost(one_hop));
        continue;
      }
    }
    if (!tracker) tracker.emplace(graph, hops);
    ClosureTracker& closure = *tracker;
    closure.reset();
    closure.add(v);
    largest = std::max(largest, cost(closure.size()));
  }
  return largest;
}

ClosureLister::ClosureLister(const CsrGraph& graph, int hops)
    : tracker_(std::make_unique<ClosureTracker>(graph, hops)), added_(static_cast<std::size_t>(hops) + 1) {}

ClosureLister::~ClosureLister() = default;

std::vector<vid_t> ClosureLister::list(std::span<const vid_t> dsts, std::vector<std::int64_t>& level_sizes) {
  tracker_->reset();
  for (auto& level : added_) level.clear();
  for (const vid_t v : dsts) tracker_->add(v, &added_);
  // Closure k+1 holds closure k, so listing each level's members that are not in the level below gives nested
  // prefixes.
  std::vector<vid_t> order(added_[0]);
  level_sizes.assign(1, static_cast<std::int64_t>(order.size()));
  for (std::size_t k = 1; k < added_.size(); ++k) {
    std::sort(added_[k].begin(), added_[k].end());
    for (const vid_t v : added_[k]) {
      if (!tracker_->contains(k - 1, v)) order.push_back(v);
    }
    level_sizes.push_back(static_cast<std::int64_t>(order.size()));
  }
  return order;
}

}  // namespace nj
