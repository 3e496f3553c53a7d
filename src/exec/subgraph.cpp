#include "nj/exec/subgraph.hpp"

#include <algorithm>
#include <numeric>

#include "nj/core/error.hpp"

namespace nj {

bool reads_mirror(const Subgraph& part, vid_t first_mirror) {
  return std::any_of(part.sources.begin(), part.sources.end(), [&](vid_t v) { return v >= first_mirror; });
}

Subgraph make_subgraph(const CsrGraph& graph, std::span<const float> edge_weight, std::span<const vid_t> dsts,
                       std::span<const gid_t> global_id, std::span<const vid_t> vertex_of) {
  Subgraph sub;
  sub.sources.assign(dsts.begin(), dsts.end());
  std::vector<vid_t> others;
  for (const vid_t d : dsts) {
    for (const vid_t s : graph.in_neighbors(d)) others.push_back(s);
  }
  std::sort(others.begin(), others.end());
  others.erase(std::unique(others.begin(), others.end()), others.end());
  std::vector<vid_t> sorted_dsts(dsts.begin(), dsts.end());
  std::sort(sorted_dsts.begin(), sorted_dsts.end());
  std::set_difference(others.begin(), others.end(), sorted_dsts.begin(), sorted_dsts.end(),
                      std::back_inserter(sub.sources));

  // Local id of each vertex among the sources, by binary search in the two sorted runs.
  const auto num_dst = static_cast<vid_t>(dsts.size());
  std::vector<vid_t> dst_local(dsts.size());
  std::iota(dst_local.begin(), dst_local.end(), 0);
  std::sort(dst_local.begin(), dst_local.end(), [&](vid_t a, vid_t b) { return dsts[a] < dsts[b]; });
  auto local_of = [&](vid_t v) -> vid_t {
    const auto it = std::lower_bound(dst_local.begin(), dst_local.end(), v,
                                     [&](vid_t local, vid_t vertex) { return dsts[local] < vertex; });
    if (it != dst_local.end() && dsts[*it] == v) return *it;
    const auto rest = sub.sources.begin() + num_dst;
    return static_cast<vid_t>(std::lower_bound(rest, sub.sources.end(), v) - sub.sources.begin());
  };

  SparseBlock& b = sub.block;
  b.num_src = static_cast<vid_t>(sub.sources.size());
  b.dst_offsets.assign(1, 0);
  for (const vid_t d : dsts) {
    const eid_t first = graph.offsets[static_cast<std::size_t>(d)];
    for (eid_t e = first; e < graph.offsets[static_cast<std::size_t>(d) + 1]; ++e) {
      b.src_index.push_back(local_of(graph.sources[static_cast<std::size_t>(e)]));
      if (!edge_weight.empty()) b.edge_weight.push_back(edge_weight[static_cast<std::size_t>(e)]);
    }
    b.dst_offsets.push_back(static_cast<eid_t>(b.src_index.size()));
  }
  b.index_by_source();
  b.src_gid.resize(sub.sources.size());
  std::transform(sub.sources.begin(), sub.sources.end(), b.src_gid.begin(), [&](vid_t v) {
    return global_id[static_cast<std::size_t>(vertex_of.empty() ? v : vertex_of[static_cast<std::size_t>(v)])];
  });
  return sub;
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
      : graph_(graph), stamp_(static_cast<std::size_t>(hops) + 1, std::vector<std::int64_t>(graph.num_vertices(), -1)) {
    reset();
  }
  void reset() {
    ++generation_;
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
  std::vector<std::vector<std::int64_t>> stamp_;
  std::int64_t generation_ = 0;
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

std::int64_t largest_single_vertex_cost(const CsrGraph& graph, std::span<const vid_t> vertices, int hops,
                                        const SubgraphCost& cost) {
  ClosureTracker closure(graph, hops);
  std::int64_t largest = 0;
  for (const vid_t v : vertices) {
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
