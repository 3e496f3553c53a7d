#include "nj/io/edge_list.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>

#include "nj/core/printable.hpp"
#include "nj/io/input_limits.hpp"

namespace nj {
namespace {

constexpr std::int64_t kMaxVertices = std::numeric_limits<vid_t>::max();

// A symmetric graph has, at every vertex, the same in-neighbours as out-neighbours (as multisets).
bool is_symmetric(const CsrGraph& graph) {
  const auto out = transpose(graph.offsets, graph.sources, graph.num_vertices());
  if (out.offsets != graph.offsets) return false;
  return std::equal(graph.sources.begin(), graph.sources.end(), out.destinations.begin());
}

}  // namespace

std::vector<std::int64_t> sorted_distinct(std::vector<std::int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

VertexIds::VertexIds(std::int64_t count, bool one_based, std::vector<std::int64_t> sorted_ids)
    : count_(count), one_based_(one_based), sorted_ids_(std::move(sorted_ids)) {
  NJ_REQUIRE(count <= kMaxVertices, "{} vertices is more than this build supports ({}); are the ids sparse names?",
             count, kMaxVertices);
}

VertexIds VertexIds::dense(std::int64_t count, bool one_based) { return {count, one_based, {}}; }

VertexIds VertexIds::relabelled(std::vector<std::int64_t> sorted_ids, bool one_based) {
  const auto count = static_cast<std::int64_t>(sorted_ids.size());
  return {count, one_based, std::move(sorted_ids)};
}

std::int64_t VertexIds::parse(std::string_view field, const TextReader& at) const {
  const auto id = parse_integer(field, at, "vertex id");
  if (id < 0) at.fail("negative vertex id {}", id);
  if (one_based_ && id == 0) at.fail("vertex id 0, but ids are 1-based");
  return id;
}

vid_t VertexIds::find(std::int64_t id) const {
  if (!sorted_ids_.empty()) {
    const auto it = std::lower_bound(sorted_ids_.begin(), sorted_ids_.end(), id);
    return it != sorted_ids_.end() && *it == id ? static_cast<vid_t>(it - sorted_ids_.begin()) : -1;
  }
  const auto index = one_based_ ? id - 1 : id;
  return index >= 0 && index < count_ ? static_cast<vid_t>(index) : -1;
}

vid_t VertexIds::vertex(std::int64_t id, const TextReader& at) const {
  const auto found = find(id);
  if (found < 0 && !sorted_ids_.empty()) at.fail("vertex id {} does not occur in the edge list", id);
  if (found < 0) {
    const std::int64_t first = one_based_ ? 1 : 0;
    at.fail("vertex id {} is outside {}..{} (the graph has {} vertices)", id, first, first + count_ - 1, count_);
  }
  return found;
}

vid_t VertexIds::resolve(std::string_view field, const TextReader& at) const { return vertex(parse(field, at), at); }

std::int64_t for_each_edge_id(const std::string& path, const VertexIdOptions& options,
                              const std::function<void(std::int64_t, std::int64_t)>& edge) {
  NJ_REQUIRE(!(options.relabel && options.num_vertices >= 0),
             "a vertex count cannot be given with relabelled ids (the distinct ids define it)");
  // Until every id is seen, only a given vertex count can be checked, so ids are kept as written.
  const auto given = VertexIds::dense(std::max<std::int64_t>(options.num_vertices, 0), options.one_based);
  TextReader reader(path);
  std::string_view line;
  std::int64_t edges = 0;
  std::array<std::int64_t, 2> ends{};
  while (reader.next_record(line)) {
    Fields fields(line, kWhitespaceOrComma);
    std::string_view field;
    for (std::int64_t& id : ends) {
      if (!fields.next(field)) reader.fail("expected two vertex ids `src dst`, found '{}'", printable(line));
      id = given.parse(field, reader);
      if (options.num_vertices >= 0) given.vertex(id, reader);
    }
    edge(ends[0], ends[1]);
    ++edges;
  }
  NJ_REQUIRE(edges > 0 || options.num_vertices > 0, "{}: no edges found", path);
  return edges;
}

VertexIds dense_vertex_ids(const std::string& path, const VertexIdOptions& options, std::int64_t largest) {
  if (options.num_vertices >= 0) return VertexIds::dense(options.num_vertices, options.one_based);
  // Compared before adding 1, which would overflow for an id near the int64 maximum.
  NJ_REQUIRE(largest < kMaxVertices,
             "{}: vertex id {} is beyond the {} vertices this build supports; are the ids sparse names (--relabel)?",
             path, largest, kMaxVertices);
  const auto count = options.one_based ? largest : largest + 1;
  require_vertex_count(count, path);
  return VertexIds::dense(count, options.one_based);
}

SelfLoopPolicy self_loop_policy_of(SelfLoops self_loops) {
  switch (self_loops) {
    case SelfLoops::kKeep: return SelfLoopPolicy::kKept;
    case SelfLoops::kRemove: return SelfLoopPolicy::kRemoved;
    case SelfLoops::kAddMissing: return SelfLoopPolicy::kAdded;
  }
  NJ_EXPECTS(false, "unknown self-loop option {}", static_cast<int>(self_loops));
}

EdgeList read_edge_list(const std::string& path, const VertexIdOptions& options) {
  std::vector<std::int64_t> ends;  // src0, dst0, src1, dst1, ...
  for_each_edge_id(path, options, [&](std::int64_t src, std::int64_t dst) { ends.insert(ends.end(), {src, dst}); });
  EdgeList edges{VertexIds::dense(0, options.one_based), {}, {}};
  if (options.relabel) {
    edges.ids = VertexIds::relabelled(sorted_distinct(ends), options.one_based);
  } else {
    edges.ids = dense_vertex_ids(path, options, ends.empty() ? 0 : *std::max_element(ends.begin(), ends.end()));
  }
  const auto num_edges = ends.size() / 2;
  edges.src.resize(num_edges);
  edges.dst.resize(num_edges);
  for (std::size_t e = 0; e < num_edges; ++e) {
    edges.src[e] = edges.ids.find(ends[2 * e]);
    edges.dst[e] = edges.ids.find(ends[2 * e + 1]);
  }
  return edges;
}

void require_vertex_count(std::int64_t count, const std::string& where) {
  NJ_REQUIRE(count <= kMaxVertices, "{}: {} vertices are more than this build supports ({})", where, count,
             kMaxVertices);
  require_input_memory(count + 1, sizeof(eid_t), where, fmt::format("the offsets of a graph of {} vertices", count));
}

void set_graph(Dataset& dataset, const EdgeList& edges, const EdgeListOptions& options) {
  dataset.graph = build_csr(edges.ids.count(), edges.src, edges.dst, options);
  dataset.symmetrized = options.symmetrize || is_symmetric(dataset.graph);
  dataset.self_loops = self_loop_policy_of(options.self_loops);
}

}  // namespace nj
