#include "nj/graph/csr.hpp"

#include <algorithm>
#include <numeric>

#include "nj/core/error.hpp"

namespace nj {

void CsrGraph::validate(const std::string& where) const {
  NJ_REQUIRE(!offsets.empty() && offsets.front() == 0, "{}: offsets must start at 0", where);
  for (std::size_t v = 0; v + 1 < offsets.size(); ++v) {
    NJ_REQUIRE(offsets[v] <= offsets[v + 1], "{}: offsets decrease at vertex {} ({} > {})", where, v, offsets[v],
               offsets[v + 1]);
  }
  NJ_REQUIRE(offsets.back() == num_edges(), "{}: last offset {} != number of edges {}", where, offsets.back(),
             num_edges());
  const vid_t n = num_vertices();
  for (std::size_t e = 0; e < sources.size(); ++e) {
    NJ_REQUIRE(sources[e] >= 0 && sources[e] < n, "{}: edge {} has source {} outside [0, {})", where, e, sources[e], n);
  }
}

CsrGraph build_csr(vid_t num_vertices, std::span<const vid_t> src, std::span<const vid_t> dst,
                   const EdgeListOptions& options) {
  NJ_EXPECTS(src.size() == dst.size(), "edge list sides differ: {} vs {}", src.size(), dst.size());
  const std::size_t n = static_cast<std::size_t>(num_vertices);
  auto keep = [&](vid_t s, vid_t d) {
    NJ_REQUIRE(s >= 0 && s < num_vertices && d >= 0 && d < num_vertices,
               "edge ({}, {}) has an endpoint outside [0, {})", s, d, num_vertices);
    return !(options.self_loops == SelfLoops::kRemove && s == d);
  };

  CsrGraph graph;
  graph.offsets.assign(n + 1, 0);
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (!keep(src[i], dst[i])) continue;
    ++graph.offsets[static_cast<std::size_t>(dst[i]) + 1];
    if (options.symmetrize && src[i] != dst[i]) ++graph.offsets[static_cast<std::size_t>(src[i]) + 1];
  }
  if (options.self_loops == SelfLoops::kAddMissing) {
    for (std::size_t v = 0; v < n; ++v) ++graph.offsets[v + 1];  // a slot, trimmed below if unused
  }
  std::partial_sum(graph.offsets.begin(), graph.offsets.end(), graph.offsets.begin());
  graph.sources.assign(static_cast<std::size_t>(graph.offsets.back()), 0);
  std::vector<eid_t> cursor(graph.offsets.begin(), graph.offsets.end() - 1);
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (!keep(src[i], dst[i])) continue;
    graph.sources[static_cast<std::size_t>(cursor[static_cast<std::size_t>(dst[i])]++)] = src[i];
    if (options.symmetrize && src[i] != dst[i]) {
      graph.sources[static_cast<std::size_t>(cursor[static_cast<std::size_t>(src[i])]++)] = dst[i];
    }
  }

  // Sort each destination's sources, then compact: drop duplicates and unused self-loop slots as asked.
  std::vector<vid_t> sources;
  sources.reserve(graph.sources.size());
  std::vector<eid_t> offsets(n + 1, 0);
  for (std::size_t v = 0; v < n; ++v) {
    const auto first = graph.sources.begin() + graph.offsets[v];
    const auto filled = graph.sources.begin() + cursor[v];
    std::sort(first, filled);
    bool has_self_loop = false;
    for (auto it = first; it != filled; ++it) {
      if (options.duplicates == Duplicates::kRemove && it != first && *it == *(it - 1)) continue;
      has_self_loop = has_self_loop || *it == static_cast<vid_t>(v);
      sources.push_back(*it);
    }
    if (options.self_loops == SelfLoops::kAddMissing && !has_self_loop) {
      sources.insert(std::upper_bound(sources.begin() + offsets[v], sources.end(), static_cast<vid_t>(v)),
                     static_cast<vid_t>(v));
    }
    offsets[v + 1] = static_cast<eid_t>(sources.size());
  }
  graph.offsets = std::move(offsets);
  graph.sources = std::move(sources);
  return graph;
}

CsrGraph with_self_loops(const CsrGraph& graph, bool exactly_one, vid_t rows) {
  const vid_t n = graph.num_vertices();
  NJ_EXPECTS(rows >= 0 && rows <= n, "{} rows of a graph of {} vertices", rows, n);
  CsrGraph out;
  out.offsets.assign(static_cast<std::size_t>(n) + 1, 0);
  out.sources.reserve(graph.sources.size() + static_cast<std::size_t>(rows));
  for (vid_t v = 0; v < n; ++v) {
    if (v >= rows) {
      const auto sources = graph.in_neighbors(v);
      out.sources.insert(out.sources.end(), sources.begin(), sources.end());
      out.offsets[static_cast<std::size_t>(v) + 1] = static_cast<eid_t>(out.sources.size());
      continue;
    }
    bool seen = false;
    bool inserted = false;
    for (const vid_t s : graph.in_neighbors(v)) {
      if (s == v) {
        if (exactly_one && seen) continue;
        seen = true;
        inserted = true;
      } else if (!inserted && s > v) {
        out.sources.push_back(v);
        inserted = true;
      }
      out.sources.push_back(s);
    }
    if (!inserted) out.sources.push_back(v);
    out.offsets[static_cast<std::size_t>(v) + 1] = static_cast<eid_t>(out.sources.size());
  }
  return out;
}

CsrTranspose transpose(std::span<const eid_t> offsets, std::span<const vid_t> sources, vid_t num_sources) {
  CsrTranspose t;
  t.offsets.assign(static_cast<std::size_t>(num_sources) + 1, 0);
  for (const vid_t s : sources) ++t.offsets[static_cast<std::size_t>(s) + 1];
  std::partial_sum(t.offsets.begin(), t.offsets.end(), t.offsets.begin());
  t.destinations.resize(sources.size());
  t.edge_position.resize(sources.size());
  std::vector<eid_t> cursor(t.offsets.begin(), t.offsets.end() - 1);
  const auto num_dst = static_cast<vid_t>(offsets.size() - 1);
  for (vid_t d = 0; d < num_dst; ++d) {  // destinations ascending, so each source's list comes out sorted
    for (eid_t e = offsets[static_cast<std::size_t>(d)]; e < offsets[static_cast<std::size_t>(d) + 1]; ++e) {
      const auto slot =
          static_cast<std::size_t>(cursor[static_cast<std::size_t>(sources[static_cast<std::size_t>(e)])]++);
      t.destinations[slot] = d;
      t.edge_position[slot] = e;
    }
  }
  return t;
}

}  // namespace nj
