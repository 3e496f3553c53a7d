#include "nj/graph/shard.hpp"

#include <algorithm>
#include <numeric>

#include "nj/core/mix64.hpp"

namespace nj {
namespace {

// A linear search: a dataset file may list a vertex's sources in any order.
bool has_self_loop(const CsrGraph& graph, vid_t v) {
  const auto sources = graph.in_neighbors(v);
  return std::find(sources.begin(), sources.end(), v) != sources.end();
}

double max_over_mean(const std::vector<std::int64_t>& values) {
  if (values.empty()) return 1.0;
  const double total = std::accumulate(values.begin(), values.end(), 0.0);
  if (total <= 0.0) return 1.0;
  return static_cast<double>(*std::max_element(values.begin(), values.end())) * static_cast<double>(values.size()) /
         total;
}

template <typename T>
std::vector<T> rows_of(const std::vector<T>& values, std::span<const vid_t> vertices) {
  std::vector<T> out;
  out.reserve(vertices.size());
  for (const vid_t v : vertices) out.push_back(values[static_cast<std::size_t>(v)]);
  return out;
}

}  // namespace

std::uint64_t owned_edges_hash(const LocalGraph& local) {
  std::uint64_t sum = 0;
  // Unsigned sums wrap exactly: any split among threads adds up to the same value.
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (vid_t v = 0; v < local.num_owned; ++v) {
    // Destination and source hashed in turn, so that an edge and its reverse hash apart.
    const std::uint64_t destination = mix64(static_cast<std::uint64_t>(local.global_id[static_cast<std::size_t>(v)]));
    for (const vid_t s : local.graph.in_neighbors(v)) {
      sum += mix64(destination ^ static_cast<std::uint64_t>(local.global_id[static_cast<std::size_t>(s)]));
    }
  }
  return sum;
}

std::vector<vid_t> LocalGraph::boundary_rows() const {
  std::vector<vid_t> rows;
  for (const auto& p : peers) rows.insert(rows.end(), p.send.begin(), p.send.end());
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

bool LocalGraph::reads_mirror(vid_t v) const {
  const auto sources = graph.in_neighbors(v);
  return std::any_of(sources.begin(), sources.end(), [&](vid_t s) { return s >= num_owned; });
}

void LocalGraph::validate(const std::string& where) const {
  graph.validate(where + ": graph");
  const auto n = static_cast<std::size_t>(num_local());
  NJ_REQUIRE(num_owned >= 0 && num_owned <= num_local(), "{}: {} owned vertices of {} local ones", where, num_owned,
             num_local());
  NJ_REQUIRE(global_id.size() == n && global_in_degree.size() == n && global_self_loop.size() == n,
             "{}: per-vertex arrays have {}, {} and {} entries for {} local vertices", where, global_id.size(),
             global_in_degree.size(), global_self_loop.size(), n);
  for (vid_t v = num_owned; v < num_local(); ++v) {
    NJ_REQUIRE(graph.in_degree(v) == 0, "{}: mirror {} (global {}) has in-edges", where, v,
               global_id[static_cast<std::size_t>(v)]);
  }
  std::int64_t received = 0;
  int previous = -1;
  for (const auto& p : peers) {
    NJ_REQUIRE(p.peer > previous, "{}: peers are not in ascending order", where);
    previous = p.peer;
    for (const vid_t v : p.send) {
      NJ_REQUIRE(v >= 0 && v < num_owned, "{}: row {} sent to part {} is not owned", where, v, p.peer);
    }
    for (const vid_t v : p.receive) {
      NJ_REQUIRE(v >= num_owned && v < num_local(), "{}: row {} received from part {} is not a mirror", where, v,
                 p.peer);
    }
    received += static_cast<std::int64_t>(p.receive.size());
  }
  NJ_REQUIRE(received == num_mirrors(), "{}: {} mirrors but {} rows received", where, num_mirrors(), received);
}

LocalGraph whole_local_graph(CsrGraph graph) {
  LocalGraph local;
  local.num_owned = graph.num_vertices();
  const auto n = static_cast<std::size_t>(graph.num_vertices());
  local.global_id.resize(n);
  std::iota(local.global_id.begin(), local.global_id.end(), gid_t{0});
  local.global_in_degree.resize(n);
  local.global_self_loop.resize(n);
  for (vid_t v = 0; v < graph.num_vertices(); ++v) {
    local.global_in_degree[static_cast<std::size_t>(v)] = graph.in_degree(v);
    local.global_self_loop[static_cast<std::size_t>(v)] = has_self_loop(graph, v) ? 1 : 0;
  }
  local.graph = std::move(graph);
  return local;
}

double PartitionInfo::cut_fraction() const {
  return undirected_edges > 0 ? static_cast<double>(edge_cut) / static_cast<double>(undirected_edges) : 0.0;
}
double PartitionInfo::vertex_imbalance() const { return max_over_mean(owned); }
double PartitionInfo::train_imbalance() const { return max_over_mean(train); }
double PartitionInfo::mirror_fraction(int part) const {
  const auto p = static_cast<std::size_t>(part);
  return owned.at(p) > 0 ? static_cast<double>(mirrors.at(p)) / static_cast<double>(owned.at(p)) : 0.0;
}

void Shard::validate(const std::string& where) const {
  local.validate(where);
  const auto n = static_cast<std::size_t>(num_owned());
  NJ_REQUIRE(static_cast<std::size_t>(features.rows()) == n, "{}: /features has {} rows for {} owned vertices", where,
             features.rows(), n);
  NJ_REQUIRE(labels.size() == n && train_mask.size() == n && val_mask.size() == n && test_mask.size() == n,
             "{}: labels and masks must have one entry per owned vertex ({})", where, n);
  NJ_REQUIRE(num_classes > 0, "{}: number of classes must be positive, got {}", where, num_classes);
  for (std::size_t v = 0; v < n; ++v) {
    NJ_REQUIRE(labels[v] >= -1 && labels[v] < num_classes, "{}: /labels: vertex {} has label {} outside [0, {})", where,
               local.global_id[v], labels[v], num_classes);
  }
  NJ_REQUIRE(part >= 0 && part < partition.parts, "{}: part {} of {}", where, part, partition.parts);
  if (!partition.owned.empty()) {  // the counts recorded for the partition must be this shard's own
    const auto p = static_cast<std::size_t>(part);
    NJ_REQUIRE(partition.owned.size() == static_cast<std::size_t>(partition.parts) &&
                   partition.mirrors.size() == partition.owned.size(),
               "{}: the partition records counts for {} parts of {}", where, partition.owned.size(), partition.parts);
    NJ_REQUIRE(partition.owned[p] == num_owned() && partition.mirrors[p] == local.num_mirrors(),
               "{}: the partition records {} owned vertices and {} mirrors for part {}, the shard holds {} and {}",
               where, partition.owned[p], partition.mirrors[p], part, num_owned(), local.num_mirrors());
  }
  NJ_REQUIRE(global_train > 0, "{}: the whole graph has no training vertex", where);
}

Shard whole_graph_shard(Dataset dataset) {
  Shard shard;
  shard.name = std::move(dataset.name);
  shard.global_vertices = dataset.num_vertices();
  shard.global_edges = dataset.graph.num_edges();
  shard.global_train = count(dataset.train_mask);
  shard.partition.owned = {shard.global_vertices};
  shard.partition.mirrors = {0};
  shard.partition.train = {shard.global_train};
  shard.partition.in_edges = {shard.global_edges};
  shard.local = whole_local_graph(std::move(dataset.graph));
  if (!dataset.vertex_ids.empty()) shard.local.global_id = std::move(dataset.vertex_ids);
  shard.features = std::move(dataset.features);
  shard.labels = std::move(dataset.labels);
  shard.num_classes = dataset.num_classes;
  shard.train_mask = std::move(dataset.train_mask);
  shard.val_mask = std::move(dataset.val_mask);
  shard.test_mask = std::move(dataset.test_mask);
  shard.symmetrized = dataset.symmetrized;
  shard.features_stored_sparse = dataset.features_stored_sparse;
  shard.self_loops = dataset.self_loops;
  shard.community_order = std::move(dataset.community_order);
  return shard;
}

Shard make_shard(const Dataset& dataset, std::span<const std::int32_t> part_of, int part, const PartitionInfo& info) {
  const CsrGraph& g = dataset.graph;
  const vid_t n = g.num_vertices();
  NJ_EXPECTS(static_cast<vid_t>(part_of.size()) == n, "{} parts for {} vertices", part_of.size(), n);
  auto owner = [&](vid_t v) { return part_of[static_cast<std::size_t>(v)]; };

  std::vector<vid_t> local_of(static_cast<std::size_t>(n), -1);
  std::vector<vid_t> vertices;  // global id of each local vertex (vid_t: the whole graph fits 32 bits)
  for (vid_t v = 0; v < n; ++v) {
    if (owner(v) == part) {
      local_of[static_cast<std::size_t>(v)] = static_cast<vid_t>(vertices.size());
      vertices.push_back(v);
    }
  }
  const auto num_owned = static_cast<vid_t>(vertices.size());
  std::vector<vid_t> mirrors;
  for (vid_t i = 0; i < num_owned; ++i) {
    for (const vid_t s : g.in_neighbors(vertices[static_cast<std::size_t>(i)])) {
      if (local_of[static_cast<std::size_t>(s)] == -1) {
        local_of[static_cast<std::size_t>(s)] = -2;  // seen
        mirrors.push_back(s);
      }
    }
  }
  std::sort(mirrors.begin(), mirrors.end(),
            [&](vid_t a, vid_t b) { return owner(a) != owner(b) ? owner(a) < owner(b) : a < b; });
  for (const vid_t s : mirrors) {
    local_of[static_cast<std::size_t>(s)] = static_cast<vid_t>(vertices.size());
    vertices.push_back(s);
  }

  Shard shard;
  shard.name = dataset.name;
  shard.part = part;
  shard.partition = info;
  shard.global_vertices = n;
  shard.global_edges = g.num_edges();
  shard.global_train = count(dataset.train_mask);
  LocalGraph& local = shard.local;
  local.num_owned = num_owned;
  local.graph.offsets.assign(vertices.size() + 1, 0);
  for (vid_t i = 0; i < num_owned; ++i) {
    const auto sources = g.in_neighbors(vertices[static_cast<std::size_t>(i)]);
    const auto first = local.graph.sources.size();
    for (const vid_t s : sources) local.graph.sources.push_back(local_of[static_cast<std::size_t>(s)]);
    std::sort(local.graph.sources.begin() + static_cast<std::ptrdiff_t>(first), local.graph.sources.end());
    local.graph.offsets[static_cast<std::size_t>(i) + 1] = local.graph.num_edges();
  }
  std::fill(local.graph.offsets.begin() + num_owned + 1, local.graph.offsets.end(), local.graph.num_edges());
  for (const vid_t v : vertices) {
    local.global_id.push_back(dataset.vertex_id(v));
    local.global_in_degree.push_back(g.in_degree(v));
    local.global_self_loop.push_back(has_self_loop(g, v) ? 1 : 0);
  }

  // Receive lists: the mirrors, already grouped by owner in ascending global id.
  for (std::size_t i = 0; i < mirrors.size(); ++i) {
    const int peer = owner(mirrors[i]);
    if (local.peers.empty() || local.peers.back().peer != peer) local.peers.push_back({peer, {}, {}});
    local.peers.back().receive.push_back(num_owned + static_cast<vid_t>(i));
  }
  // Send lists: owned vertices read by an in-edge of a vertex another part owns.
  std::vector<std::vector<vid_t>> send(static_cast<std::size_t>(info.parts));
  for (vid_t u = 0; u < n; ++u) {
    const int q = owner(u);
    NJ_EXPECTS(q >= 0 && q < info.parts, "vertex {} in part {} of {}", u, q, info.parts);
    if (q == part) continue;
    for (const vid_t s : g.in_neighbors(u)) {
      if (owner(s) == part) send[static_cast<std::size_t>(q)].push_back(local_of[static_cast<std::size_t>(s)]);
    }
  }
  for (int q = 0; q < info.parts; ++q) {
    auto& rows = send[static_cast<std::size_t>(q)];
    if (rows.empty()) continue;
    std::sort(rows.begin(), rows.end());  // local order of owned vertices is ascending global id
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    auto it = std::find_if(local.peers.begin(), local.peers.end(), [&](const PeerRows& p) { return p.peer >= q; });
    if (it == local.peers.end() || it->peer != q) it = local.peers.insert(it, PeerRows{q, {}, {}});
    it->send = std::move(rows);
  }

  const std::span<const vid_t> owned(vertices.data(), static_cast<std::size_t>(num_owned));
  shard.features = Matrix(num_owned, dataset.features.cols());
  for (vid_t i = 0; i < num_owned; ++i) {
    const float* row = dataset.features.row(owned[static_cast<std::size_t>(i)]);
    std::copy(row, row + dataset.features.cols(), shard.features.row(i));
  }
  shard.labels = rows_of(dataset.labels, owned);
  shard.num_classes = dataset.num_classes;
  shard.train_mask = rows_of(dataset.train_mask, owned);
  shard.val_mask = rows_of(dataset.val_mask, owned);
  shard.test_mask = rows_of(dataset.test_mask, owned);
  shard.symmetrized = dataset.symmetrized;
  shard.features_stored_sparse = dataset.features_stored_sparse;
  shard.self_loops = dataset.self_loops;
  return shard;
}

CsrGraph simple_undirected_graph(const CsrGraph& graph) {
  std::vector<vid_t> destinations(graph.sources.size());
  for (vid_t v = 0; v < graph.num_vertices(); ++v) {
    std::fill(destinations.begin() + graph.offsets[static_cast<std::size_t>(v)],
              destinations.begin() + graph.offsets[static_cast<std::size_t>(v) + 1], v);
  }
  return build_csr(graph.num_vertices(), graph.sources, destinations,
                   {.symmetrize = true, .self_loops = SelfLoops::kRemove, .duplicates = Duplicates::kRemove});
}

void fill_part_counts(const Dataset& dataset, std::span<const std::int32_t> part_of, PartitionInfo& info) {
  fill_part_counts(dataset, simple_undirected_graph(dataset.graph), part_of, info);
}

void fill_part_counts(const Dataset& dataset, const CsrGraph& simple, std::span<const std::int32_t> part_of,
                      PartitionInfo& info) {
  const CsrGraph& g = dataset.graph;
  const vid_t n = g.num_vertices();
  NJ_EXPECTS(static_cast<vid_t>(part_of.size()) == n && simple.num_vertices() == n,
             "{} parts and a simple graph of {} vertices for {} vertices", part_of.size(), simple.num_vertices(), n);
  const auto parts = static_cast<std::size_t>(info.parts);
  info.owned.assign(parts, 0);
  info.mirrors.assign(parts, 0);
  info.train.assign(parts, 0);
  info.in_edges.assign(parts, 0);
  for (vid_t v = 0; v < n; ++v) {
    const auto p = static_cast<std::size_t>(part_of[static_cast<std::size_t>(v)]);
    NJ_EXPECTS(p < parts, "vertex {} in part {} of {}", v, p, parts);
    ++info.owned[p];
    info.train[p] += dataset.train_mask[static_cast<std::size_t>(v)] != 0 ? 1 : 0;
    info.in_edges[p] += g.in_degree(v);
  }
  // A vertex is a mirror of every other part that owns one of its out-neighbours: count distinct (source,
  // part) pairs through the out-edge view.
  const CsrTranspose out = transpose(g.offsets, g.sources, n);
  std::vector<vid_t> stamp(parts, -1);
  for (vid_t s = 0; s < n; ++s) {
    const auto home = part_of[static_cast<std::size_t>(s)];
    for (eid_t e = out.offsets[static_cast<std::size_t>(s)]; e < out.offsets[static_cast<std::size_t>(s) + 1]; ++e) {
      const auto p = part_of[static_cast<std::size_t>(out.destinations[static_cast<std::size_t>(e)])];
      if (p == home || stamp[static_cast<std::size_t>(p)] == s) continue;
      stamp[static_cast<std::size_t>(p)] = s;
      ++info.mirrors[static_cast<std::size_t>(p)];
    }
  }
  // Each undirected edge {u, v} is stored as u -> v and v -> u.
  info.undirected_edges = simple.num_edges() / 2;
  std::int64_t cut = 0;
  for (vid_t v = 0; v < n; ++v) {
    for (const vid_t s : simple.in_neighbors(v)) {
      if (part_of[static_cast<std::size_t>(s)] != part_of[static_cast<std::size_t>(v)]) ++cut;
    }
  }
  info.edge_cut = cut / 2;
}

}  // namespace nj
