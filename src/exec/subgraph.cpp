#include "nj/exec/subgraph.hpp"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <numeric>
#include <optional>

#include "nj/core/error.hpp"
#include "nj/core/huge_pages.hpp"

namespace nj {

bool reads_mirror(const Subgraph& part, vid_t first_mirror) {
  return std::any_of(part.sources.begin(), part.sources.end(), [&](vid_t v) { return v >= first_mirror; });
}

namespace {

constexpr vid_t kOutside = -1;  // not a source of the subgraph being built

bool test_bit(const std::vector<std::uint64_t>& bits, vid_t v) {
  return ((bits[static_cast<std::size_t>(v) / 64] >> (static_cast<std::size_t>(v) % 64)) & 1U) != 0;
}
void set_bit(std::vector<std::uint64_t>& bits, vid_t v) {
  bits[static_cast<std::size_t>(v) / 64] |= std::uint64_t{1} << (static_cast<std::size_t>(v) % 64);
}

}  // namespace

SubgraphBuilder::SubgraphBuilder(const CsrGraph& graph, EdgeWeights weights, std::span<const gid_t> global_id,
                                 std::span<const vid_t> vertex_of, eid_t parallel_edges)
    : graph_(graph),
      weights_(weights),
      global_id_(global_id),
      vertex_of_(vertex_of),
      local_(static_cast<std::size_t>(graph.num_vertices()), kOutside),
      is_dst_((static_cast<std::size_t>(graph.num_vertices()) + 63) / 64, 0),
      seen_(is_dst_.size(), 0),
      rank_(is_dst_.size() + 1, 0),
      parallel_edges_(parallel_edges) {
  NJ_EXPECTS(weights.vertex_factor.empty() || weights.vertex_factor.size() == local_.size(),
             "{} vertex factors for a graph of {} vertices", weights.vertex_factor.size(), local_.size());
  NJ_EXPECTS(weights.per_edge.empty() || weights.per_edge.size() == graph.sources.size(),
             "{} edge weights for a graph of {} edges", weights.per_edge.size(), graph.sources.size());
}

eid_t SubgraphBuilder::mark_destinations(std::span<const vid_t> dsts) {
  const auto num_dst = static_cast<vid_t>(dsts.size());
  eid_t edges = 0;
  for (vid_t i = 0; i < num_dst; ++i) {
    const vid_t d = dsts[static_cast<std::size_t>(i)];
    NJ_EXPECTS(!test_bit(is_dst_, d), "destination {} is listed twice", d);
    set_bit(is_dst_, d);
    local_[static_cast<std::size_t>(d)] = i;
    edges += graph_.in_degree(d);
  }
  others_.clear();
  return edges;
}

eid_t SubgraphBuilder::number_sources(std::span<const vid_t> dsts, std::vector<vid_t>& sources,
                                      std::vector<vid_t>& in_edges) {
  const eid_t edges = mark_destinations(dsts);
  // The destinations' in-edges lie anywhere in the graph: fetch a few destinations ahead. Their sources, as vertex
  // ids, go to `in_edges` on the way.
  in_edges.resize(static_cast<std::size_t>(edges));
  vid_t* copied = in_edges.data();
  constexpr std::size_t kAhead = 8;
  for (std::size_t i = 0; i < dsts.size(); ++i) {
    if (i + 2 * kAhead < dsts.size())
      __builtin_prefetch(&graph_.offsets[static_cast<std::size_t>(dsts[i + 2 * kAhead])]);
    if (i + kAhead < dsts.size()) {
      __builtin_prefetch(graph_.sources.data() + graph_.offsets[static_cast<std::size_t>(dsts[i + kAhead])]);
    }
    const std::span<const vid_t> row = graph_.in_neighbors(dsts[i]);
    copied = std::copy(row.begin(), row.end(), copied);
    for (const vid_t s : row) note_source(s);
  }
  list_marked(dsts, sources);
  return edges;
}

void SubgraphBuilder::list_marked(std::span<const vid_t> dsts, std::vector<vid_t>& sources) {
  // The other sources, each once, in ascending vertex id: marked in a bitmap (cache-resident: one bit per vertex)
  // and read off it in order where that costs less than sorting them.
  const std::size_t words = seen_.size();
  ranked_ = others_.size() * 4 >= words;
  sources.reserve(dsts.size() + others_.size());
  sources.assign(dsts.begin(), dsts.end());
  if (ranked_) {
    std::uint32_t before = 0;
    for (std::size_t w = 0; w < words; ++w) {
      rank_[w] = before;
      for (std::uint64_t bits = seen_[w]; bits != 0; bits &= bits - 1) {
        sources.push_back(static_cast<vid_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits))));
        ++before;
      }
    }
  } else {
    for (const vid_t s : others_) seen_[static_cast<std::size_t>(s) / 64] = 0;
    std::sort(others_.begin(), others_.end());
    for (const vid_t s : others_) {
      local_[static_cast<std::size_t>(s)] = static_cast<vid_t>(sources.size());
      sources.push_back(s);
    }
  }
}

vid_t SubgraphBuilder::local_of(vid_t v, vid_t num_dst) const {
  if (!ranked_ || test_bit(is_dst_, v)) return local_[static_cast<std::size_t>(v)];
  const std::size_t word = static_cast<std::size_t>(v) / 64;
  const std::uint64_t below = seen_[word] & ((std::uint64_t{1} << (static_cast<std::size_t>(v) % 64)) - 1);
  return num_dst + static_cast<vid_t>(rank_[word]) + static_cast<vid_t>(std::popcount(below));
}

void SubgraphBuilder::forget(std::span<const vid_t> dsts, std::span<const vid_t> sources) {
  for (const vid_t d : dsts) {
    is_dst_[static_cast<std::size_t>(d) / 64] = 0;
    local_[static_cast<std::size_t>(d)] = kOutside;
  }
  if (ranked_) {
    std::fill(seen_.begin(), seen_.end(), 0);
  } else {
    for (const vid_t s : sources.subspan(dsts.size())) local_[static_cast<std::size_t>(s)] = kOutside;
  }
}

eid_t SubgraphBuilder::list_sources(std::span<const vid_t> dsts, std::span<const vid_t> closure,
                                    std::vector<vid_t>& sources) {
  const eid_t edges = mark_destinations(dsts);
  for (const vid_t s : closure) note_source(s);
  list_marked(dsts, sources);
  forget(dsts, sources);
  return edges;
}

Subgraph SubgraphBuilder::build(std::span<const vid_t> dsts) {
  Subgraph sub;
  build(dsts, sub);
  return sub;
}

void SubgraphBuilder::build(std::span<const vid_t> dsts, Subgraph& sub) {
  eid_t edges = 0;
  for (const vid_t d : dsts) edges += graph_.in_degree(d);
  const int threads = edges >= parallel_edges_ ? std::max(1, omp_get_max_threads()) : 1;
  if (threads > 1) {
    build_in_parallel(dsts, sub, threads);
    return;
  }
  SparseBlock& b = sub.block;
  number_sources(dsts, sub.sources, b.src_index);
  const auto num_dst = static_cast<vid_t>(dsts.size());
  b.num_src = static_cast<vid_t>(sub.sources.size());
  b.dst_offsets.resize(dsts.size() + 1);
  b.dst_offsets[0] = 0;
  for (vid_t& s : b.src_index) s = local_of(s, num_dst);  // vertex ids, as number_sources copied them
  b.edge_weight.resize(weights_.empty() ? 0 : static_cast<std::size_t>(edges));
  std::size_t at = 0;
  for (std::size_t i = 0; i < dsts.size(); ++i) {
    const auto d = static_cast<std::size_t>(dsts[i]);
    const auto first = static_cast<std::size_t>(graph_.offsets[d]);
    const auto last = static_cast<std::size_t>(graph_.offsets[d + 1]);
    if (!weights_.per_edge.empty() && i + 8 < dsts.size()) {
      __builtin_prefetch(weights_.per_edge.data() + graph_.offsets[static_cast<std::size_t>(dsts[i + 8])]);
    }
    if (!weights_.empty()) weights_.copy_in_edges(graph_, dsts[i], b.edge_weight.data() + at);
    at += last - first;
    b.dst_offsets[i + 1] = static_cast<eid_t>(at);
  }
  forget(dsts, sub.sources);
  finish_block(sub, 1);
}

// The same block by `threads` threads, each over a run of destinations with about equal in-edges: each marks the
// sources it reads in a bitmap of its own and counts its in-edges per source, so that its out-edges go after those
// of the runs before it, in the order one thread would have put them.
void SubgraphBuilder::build_in_parallel(std::span<const vid_t> dsts, Subgraph& sub, int threads) {
  SparseBlock& b = sub.block;
  const auto num_dst = static_cast<vid_t>(dsts.size());
  b.dst_offsets.resize(dsts.size() + 1);
  b.dst_offsets[0] = 0;
  for (vid_t i = 0; i < num_dst; ++i) {
    const vid_t d = dsts[static_cast<std::size_t>(i)];
    NJ_EXPECTS(!test_bit(is_dst_, d), "destination {} is listed twice", d);
    set_bit(is_dst_, d);
    local_[static_cast<std::size_t>(d)] = i;
    b.dst_offsets[static_cast<std::size_t>(i) + 1] = b.dst_offsets[static_cast<std::size_t>(i)] + graph_.in_degree(d);
  }
  const eid_t edges = b.dst_offsets.back();
  b.src_index.resize(static_cast<std::size_t>(edges));
  b.edge_weight.resize(weights_.empty() ? 0 : static_cast<std::size_t>(edges));
  const std::size_t words = seen_.size();
  if (thread_seen_.size() + 1 < static_cast<std::size_t>(threads))
    thread_seen_.resize(static_cast<std::size_t>(threads) - 1);
  for (auto& bits : thread_seen_) bits.resize(words, 0);
  // Thread t's destinations: [first[t], first[t + 1]), cut where the in-edges before them reach t / threads.
  std::vector<vid_t> first(static_cast<std::size_t>(threads) + 1, num_dst);
  for (int t = 0; t < threads; ++t) {
    const eid_t target = edges * t / threads;
    first[static_cast<std::size_t>(t)] = static_cast<vid_t>(
        std::lower_bound(b.dst_offsets.begin(), b.dst_offsets.end() - 1, target) - b.dst_offsets.begin());
  }
  // Runs, not OpenMP threads, own the bitmaps: a team smaller than asked for (a thread limit, a nested region)
  // takes several runs per thread.
#pragma omp parallel num_threads(threads)
  for (auto t = static_cast<std::size_t>(omp_get_thread_num()); t < static_cast<std::size_t>(threads);
       t += static_cast<std::size_t>(omp_get_num_threads())) {
    std::vector<std::uint64_t>& seen = t == 0 ? seen_ : thread_seen_[t - 1];
    for (auto i = static_cast<std::size_t>(first[t]); i < static_cast<std::size_t>(first[t + 1]); ++i) {
      if (i + 8 < static_cast<std::size_t>(first[t + 1])) {
        __builtin_prefetch(graph_.sources.data() + graph_.offsets[static_cast<std::size_t>(dsts[i + 8])]);
      }
      const auto d = static_cast<std::size_t>(dsts[i]);
      const auto from = static_cast<std::ptrdiff_t>(graph_.offsets[d]);
      const auto to = static_cast<std::ptrdiff_t>(graph_.offsets[d + 1]);
      const auto at = static_cast<std::ptrdiff_t>(b.dst_offsets[i]);
      std::copy(graph_.sources.begin() + from, graph_.sources.begin() + to, b.src_index.begin() + at);
      if (!weights_.empty()) weights_.copy_in_edges(graph_, dsts[i], b.edge_weight.data() + at);
      for (auto e = from; e < to; ++e) {
        const auto s = static_cast<std::size_t>(graph_.sources[static_cast<std::size_t>(e)]);
        const std::uint64_t bit = std::uint64_t{1} << (s % 64);
        if ((is_dst_[s / 64] & bit) == 0) seen[s / 64] |= bit;
      }
    }
  }
  // One bitmap of the other sources; their ranks; the sources in order.
  for (auto& bits : thread_seen_) {
    for (std::size_t w = 0; w < words; ++w) {
      seen_[w] |= bits[w];
      bits[w] = 0;
    }
  }
  ranked_ = true;
  sub.sources.assign(dsts.begin(), dsts.end());
  std::uint32_t before = 0;
  for (std::size_t w = 0; w < words; ++w) {
    rank_[w] = before;
    for (std::uint64_t bits = seen_[w]; bits != 0; bits &= bits - 1) {
      sub.sources.push_back(static_cast<vid_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits))));
      ++before;
    }
  }
  b.num_src = static_cast<vid_t>(sub.sources.size());
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::size_t e = 0; e < b.src_index.size(); ++e) b.src_index[e] = local_of(b.src_index[e], num_dst);
  forget(dsts, sub.sources);
  finish_block(sub, threads);
}

void SubgraphBuilder::finish_block(Subgraph& sub, int threads) {
  SparseBlock& b = sub.block;
  const auto num_dst = static_cast<vid_t>(b.dst_offsets.size() - 1);
  const auto num_src = static_cast<std::size_t>(b.num_src);
  // The out-edge view, as SparseBlock::index_by_source makes it, into the block's own arrays: each thread counts
  // the in-edges of its run of destinations per source; a source's out-edges from thread t's run go after those
  // from the runs before it, which keeps them in destination order.
  CsrTranspose& t = b.by_source;
  t.offsets.assign(num_src + 1, 0);
  t.destinations.resize(b.src_index.size());
  t.edge_position.resize(b.src_index.size());
  if (thread_cursor_.size() < static_cast<std::size_t>(threads))
    thread_cursor_.resize(static_cast<std::size_t>(threads));
  const eid_t edges = b.dst_offsets.back();
  std::vector<vid_t> first(static_cast<std::size_t>(threads) + 1, num_dst);
  for (int k = 0; k < threads; ++k) {
    first[static_cast<std::size_t>(k)] = static_cast<vid_t>(
        std::lower_bound(b.dst_offsets.begin(), b.dst_offsets.end() - 1, edges * k / threads) - b.dst_offsets.begin());
  }
  // As in build_in_parallel, runs own the cursors, whatever the team's size.
#pragma omp parallel num_threads(threads)
  {
    const auto team = static_cast<std::size_t>(omp_get_num_threads());
    const auto runs = static_cast<std::size_t>(threads);
    for (auto k = static_cast<std::size_t>(omp_get_thread_num()); k < runs; k += team) {
      std::vector<eid_t>& cursor = thread_cursor_[k];
      cursor.assign(num_src, 0);
      const eid_t from = b.dst_offsets[static_cast<std::size_t>(first[k])];
      const eid_t to = b.dst_offsets[static_cast<std::size_t>(first[k + 1])];
      for (eid_t e = from; e < to; ++e) ++cursor[static_cast<std::size_t>(b.src_index[static_cast<std::size_t>(e)])];
    }
#pragma omp barrier
#pragma omp single
    {
      eid_t total = 0;
      for (std::size_t s = 0; s < num_src; ++s) {
        t.offsets[s] = total;
        for (int j = 0; j < threads; ++j) {
          eid_t& count = thread_cursor_[static_cast<std::size_t>(j)][s];
          const eid_t next = total + count;
          count = total;  // now where thread j's out-edges of s start
          total = next;
        }
      }
      t.offsets[num_src] = total;
    }
    for (auto k = static_cast<std::size_t>(omp_get_thread_num()); k < runs; k += team) {
      std::vector<eid_t>& cursor = thread_cursor_[k];
      for (auto d = first[k]; d < first[k + 1]; ++d) {
        for (eid_t e = b.dst_offsets[static_cast<std::size_t>(d)]; e < b.dst_offsets[static_cast<std::size_t>(d) + 1];
             ++e) {
          const auto slot =
              static_cast<std::size_t>(cursor[static_cast<std::size_t>(b.src_index[static_cast<std::size_t>(e)])]++);
          t.destinations[slot] = d;
          t.edge_position[slot] = e;
        }
      }
    }
  }
  b.out_weight.resize(b.edge_weight.size());
  b.src_gid.resize(sub.sources.size());
  const std::span<const float> factor = weights_.per_edge.empty() ? weights_.vertex_factor : std::span<const float>{};
  b.src_factor.resize(factor.empty() ? 0 : sub.sources.size());
  b.factor_of = weights_.factor_of;
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static) nowait
    for (std::size_t k = 0; k < b.out_weight.size(); ++k) {
      b.out_weight[k] = b.edge_weight[static_cast<std::size_t>(t.edge_position[k])];
    }
#pragma omp for schedule(static)
    for (std::size_t s = 0; s < sub.sources.size(); ++s) {
      const vid_t v = sub.sources[s];
      b.src_gid[s] =
          global_id_[static_cast<std::size_t>(vertex_of_.empty() ? v : vertex_of_[static_cast<std::size_t>(v)])];
      if (!factor.empty()) b.src_factor[s] = factor[static_cast<std::size_t>(v)];
    }
  }
}

Subgraph make_subgraph(const CsrGraph& graph, EdgeWeights weights, std::span<const vid_t> dsts,
                       std::span<const gid_t> global_id, std::span<const vid_t> vertex_of) {
  return SubgraphBuilder(graph, weights, global_id, vertex_of).build(dsts);
}

namespace {

// The vertices by ascending in-degree, ties in id order: a counting sort, sequential passes over the offsets
// where a comparison sort reads two degrees at random per comparison.
std::vector<vid_t> by_in_degree(const CsrGraph& graph) {
  const vid_t n = graph.num_vertices();
  eid_t max_degree = 0;
  for (vid_t v = 0; v < n; ++v) max_degree = std::max(max_degree, graph.in_degree(v));
  std::vector<vid_t> next(static_cast<std::size_t>(max_degree) + 1, 0);  // per degree: first its count
  for (vid_t v = 0; v < n; ++v) ++next[static_cast<std::size_t>(graph.in_degree(v))];
  std::exclusive_scan(next.begin(), next.end(), next.begin(), vid_t{0});
  std::vector<vid_t> sorted(static_cast<std::size_t>(n));
  for (vid_t v = 0; v < n; ++v)
    sorted[static_cast<std::size_t>(next[static_cast<std::size_t>(graph.in_degree(v))]++)] = v;
  return sorted;
}

}  // namespace

std::vector<vid_t> locality_order(const CsrGraph& graph) {
  const vid_t n = graph.num_vertices();
  const std::vector<vid_t> by_degree = by_in_degree(graph);
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
      : graph_(graph), stamp_(static_cast<std::size_t>(hops) + 1, HugeVector<std::uint32_t>(graph.num_vertices(), 0)) {
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
  // add(v) for one hop, without the frontier lists.
  void add_one_hop(vid_t v, std::vector<std::vector<vid_t>>* added = nullptr) {
    if (!mark(0, v, added)) return;
    size_.edges[0] += graph_.in_degree(v);
    mark(1, v, added);
    for (const vid_t s : graph_.in_neighbors(v)) mark(1, s, added);
  }
  // Fetches what add_one_hop(v) will read: v's in-neighbours' one-hop marks (its row must be fetched already).
  void prefetch_one_hop(vid_t v) const {
    for (const vid_t s : graph_.in_neighbors(v)) __builtin_prefetch(&stamp_[1][static_cast<std::size_t>(s)]);
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
  // 32 bits: half the memory traffic of marking. Every in-edge marks its source at random: on huge pages, where
  // a mark costs no page walk (with 4 KiB pages, a graph of millions of vertices misses the TLB on most edges).
  std::vector<HugeVector<std::uint32_t>> stamp_;
  std::uint32_t generation_ = 0;
  ClosureSize size_;
  std::vector<vid_t> frontier_;
  std::vector<vid_t> next_;
};

}  // namespace detail

using detail::ClosureTracker;

std::vector<std::vector<vid_t>> partition_in_order(const CsrGraph& graph, std::span<const vid_t> order, int hops,
                                                   const SubgraphCost& cost, std::int64_t limit,
                                                   const std::function<std::string(std::int64_t)>& describe_minimum,
                                                   const RunClosure& on_run) {
  NJ_EXPECTS(!on_run || hops == 1, "runs' closures are handed over for one hop only, not {}", hops);
  ClosureTracker closure(graph, hops);
  std::vector<std::vector<vid_t>> parts;
  std::vector<vid_t> current;
  // What the current run's vertices added to each closure level, in the order marked, where the one-hop closure
  // is handed over: a run that ends before a vertex takes the closure as it was before that vertex's marks.
  std::vector<std::vector<vid_t>> added(2);
  const std::vector<vid_t>& closure_rows = added[1];
  const auto add = [&](vid_t v) { hops == 1 ? closure.add_one_hop(v, on_run ? &added : nullptr) : closure.add(v); };
  const auto close = [&](std::vector<vid_t>&& run, std::size_t closure_size) {
    if (on_run) on_run(run, std::span<const vid_t>(closure_rows).first(closure_size));
    parts.push_back(std::move(run));
    closure.reset();
    for (std::vector<vid_t>& level : added) level.clear();
  };
  for (std::size_t i = 0; i < order.size(); ++i) {
    const vid_t v = order[i];
    if (hops == 1) {
      // The vertices come in an order of their own, their in-edges from anywhere: fetch ahead, the offsets of the
      // vertex 16 on, the in-edges of the one 8 on, and the marks the one 4 on will test.
      if (i + 16 < order.size()) __builtin_prefetch(&graph.offsets[static_cast<std::size_t>(order[i + 16])]);
      if (i + 8 < order.size())
        __builtin_prefetch(graph.sources.data() + graph.offsets[static_cast<std::size_t>(order[i + 8])]);
      if (i + 4 < order.size()) closure.prefetch_one_hop(order[i + 4]);
    }
    const std::size_t closure_before = closure_rows.size();
    add(v);
    if (cost(closure.size()) <= limit) {
      current.push_back(v);
      continue;
    }
    if (!current.empty()) {  // close the run without v and start a new one with it
      close(std::move(current), closure_before);
      current.clear();
      add(v);
      if (cost(closure.size()) <= limit) {
        current.push_back(v);
        continue;
      }
    }
    if (describe_minimum) throw InputError(describe_minimum(largest_single_vertex_cost(graph, order, hops, cost)));
    close({v}, closure_rows.size());
  }
  if (!current.empty()) close(std::move(current), closure_rows.size());
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
