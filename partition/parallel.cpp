#include "nj/partition/parallel.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>

#include "nj/comm/slice_messages.hpp"
#include "nj/core/bytes.hpp"
#include "nj/core/error.hpp"
#include "nj/core/host_memory.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/partition/label_propagation.hpp"
#include "scotch.hpp"
#include "training_balance.hpp"

namespace nj {
namespace {

namespace fs = std::filesystem;

// The slice's vertices in the simple undirected graph (symmetrised, without self-loops or repeats): what Scotch
// partitions and where the edge cut is counted, as simple_undirected_graph is for one process. Each in-edge s -> v
// read here lists s at v, and v at s on the rank whose slice holds s. Built in place, by counting each row's entries
// first: 8 bytes an entry beside the messages, where pairs of (row, neighbour) sorted took 16.
SliceAdjacency simple_adjacency(const DatasetRows& rows, const Slices& slices, Communicator& comm) {
  SliceAdjacency adjacency;
  adjacency.first = rows.first;
  adjacency.offsets.assign(static_cast<std::size_t>(rows.rows()) + 1, 0);
  std::vector<std::vector<gid_t>> reversed(static_cast<std::size_t>(slices.ranks()));  // (s, v) flattened
  const auto each_in_edge = [&](auto&& visit) {
    for (std::int64_t r = 0; r < rows.rows(); ++r) {
      for (auto e = rows.offsets[static_cast<std::size_t>(r)]; e < rows.offsets[static_cast<std::size_t>(r) + 1]; ++e) {
        const gid_t s = rows.sources[static_cast<std::size_t>(e)];
        if (s != rows.first + r) visit(static_cast<std::size_t>(r), s);
      }
    }
  };
  each_in_edge([&](std::size_t r, gid_t s) {
    ++adjacency.offsets[r + 1];
    auto& out = reversed[static_cast<std::size_t>(slices.owner(s))];
    out.push_back(s);
    out.push_back(rows.first + static_cast<gid_t>(r));
  });
  std::vector<Writer> writers(reversed.size());
  for (std::size_t q = 0; q < reversed.size(); ++q) {
    writers[q].put(reversed[q]);
    reversed[q] = {};
  }
  std::vector<std::vector<gid_t>> received;
  for (const auto& message : exchange(writers, comm)) received.push_back(Reader(message).take<gid_t>());
  for (const auto& flat : received) {
    for (std::size_t i = 0; i < flat.size(); i += 2)
      ++adjacency.offsets[static_cast<std::size_t>(flat[i] - rows.first) + 1];
  }
  std::partial_sum(adjacency.offsets.begin(), adjacency.offsets.end(), adjacency.offsets.begin());
  adjacency.neighbours.resize(static_cast<std::size_t>(adjacency.offsets.back()));
  std::vector<std::int64_t> cursor(adjacency.offsets.begin(), adjacency.offsets.end() - 1);
  const auto add = [&](std::size_t r, gid_t neighbour) {
    adjacency.neighbours[static_cast<std::size_t>(cursor[r]++)] = neighbour;
  };
  each_in_edge(add);
  for (auto& flat : received) {
    for (std::size_t i = 0; i < flat.size(); i += 2) add(static_cast<std::size_t>(flat[i] - rows.first), flat[i + 1]);
    flat = {};
  }
  // Each row's neighbours sorted without repeats, moved down over the repeats dropped before them.
  std::int64_t kept = 0;
  for (std::size_t r = 0; r + 1 < adjacency.offsets.size(); ++r) {
    const auto begin = adjacency.neighbours.begin() + adjacency.offsets[r];
    const auto end = adjacency.neighbours.begin() + adjacency.offsets[r + 1];
    std::sort(begin, end);
    const auto unique_end = std::unique(begin, end);
    adjacency.offsets[r] = kept;
    kept = std::copy(begin, unique_end, adjacency.neighbours.begin() + kept) - adjacency.neighbours.begin();
  }
  adjacency.offsets.back() = kept;
  adjacency.neighbours.resize(static_cast<std::size_t>(kept));
  adjacency.neighbours.shrink_to_fit();
  return adjacency;
}

// What a shard records of a vertex that only its owner's slice knows: its name, its part, its in-degree and whether
// it has a self-loop, as stored.
struct VertexFacts {
  std::vector<gid_t> name;  // its global id in the shards: the dataset's vertex id (Dataset::vertex_ids)
  std::vector<std::int32_t> part;
  std::vector<std::int64_t> in_degree;
  std::vector<std::uint8_t> self_loop;
};

VertexFacts facts_of_slice(const DatasetRows& rows, std::vector<std::int32_t> part) {
  VertexFacts facts;
  facts.part = std::move(part);
  for (std::int64_t r = 0; r < rows.rows(); ++r) {
    facts.name.push_back(rows.vertex_ids.empty() ? rows.first + r : rows.vertex_ids[static_cast<std::size_t>(r)]);
    const auto begin = rows.sources.begin() + rows.offsets[static_cast<std::size_t>(r)];
    const auto end = rows.sources.begin() + rows.offsets[static_cast<std::size_t>(r) + 1];
    facts.in_degree.push_back(end - begin);
    facts.self_loop.push_back(std::find(begin, end, rows.first + r) != end ? 1 : 0);
  }
  return facts;
}

// The facts of `ids` (ascending, without repeats), asked of the ranks whose slices hold them.
VertexFacts look_up(std::span<const gid_t> ids, const VertexFacts& mine, std::int64_t first, const Slices& slices,
                    Communicator& comm) {
  struct Fact {
    gid_t name;
    std::int64_t in_degree;
    std::int32_t part;
    std::uint8_t self_loop;
  };
  const std::vector<Fact> answers = ask_owners<Fact>(ids, slices, comm, [&](gid_t id) {
    const auto i = static_cast<std::size_t>(id - first);
    return Fact{mine.name[i], mine.in_degree[i], mine.part[i], mine.self_loop[i]};
  });
  VertexFacts facts;
  for (const Fact& fact : answers) {
    facts.name.push_back(fact.name);
    facts.part.push_back(fact.part);
    facts.in_degree.push_back(fact.in_degree);
    facts.self_loop.push_back(fact.self_loop);
  }
  return facts;
}

std::size_t index_in(std::span<const gid_t> sorted, gid_t id) {
  return static_cast<std::size_t>(std::lower_bound(sorted.begin(), sorted.end(), id) - sorted.begin());
}

// How heavy a cluster may grow, as a share of a part's mean weight. Lighter clusters split the generated graphs'
// communities, and Scotch then cut more edges: with 0.3, an earlier form of the propagation cut the 200k-vertex graph
// at 8 parts 25.4 % where METIS cuts 19.0 %, and with 0.6 19.0 %.
constexpr double kClusterShare = 0.6;

// PT-Scotch's parts of the slice's rows: the graph clustered and contracted (partition/label_propagation.hpp), its
// clusters cut into pieces no heavier than the imbalance allowed (3 % of a part's mean weight) so that Scotch can
// still balance the parts, partitioned, and the parts refined on the whole graph.
std::vector<std::int32_t> scotch_parts_through_clusters(const PartitionOptions& options,
                                                        const SliceAdjacency& adjacency,
                                                        std::span<const std::int64_t> weights, const Slices& slices,
                                                        Communicator& comm) {
  std::vector<std::int64_t> total{std::accumulate(weights.begin(), weights.end(), std::int64_t{0})};
  comm.all_reduce_sum(total);
  const double mean_part = static_cast<double>(total[0]) / options.parts;
  const auto at_least_one = [](double weight) { return std::max<std::int64_t>(1, static_cast<std::int64_t>(weight)); };
  const ClusterLimits limits{at_least_one(kClusterShare * mean_part), at_least_one(kPartImbalance * mean_part)};
  const SliceClusters clusters = cluster_slice(adjacency, weights, limits, options.seed, slices, comm);
  std::vector<std::int32_t> cluster_part;
  {
    const ClusterGraph graph = contract(adjacency, weights, clusters, slices, comm);
    spdlog::debug("rank {}: {} clusters with {} adjacency entries, from {} vertices with {}", comm.rank(),
                  clusters.count, graph.adjacency.neighbours.size(), adjacency.rows(), adjacency.neighbours.size());
    cluster_part = scotch_parts(graph.adjacency, graph.weights, options.parts, options.seed, comm.size());
  }
  std::vector<std::int32_t> part;
  part.reserve(clusters.of_row.size());
  for (const std::int32_t c : clusters.of_row) part.push_back(cluster_part[static_cast<std::size_t>(c)]);
  refine_parts(adjacency, weights, part, options.parts, at_least_one((1.0 + kPartImbalance) * mean_part), options.seed,
               slices, comm);
  return part;
}

std::vector<std::int32_t> slice_parts(const PartitionOptions& options, const DatasetRows& rows,
                                      const SliceAdjacency& adjacency, const Slices& slices, Communicator& comm) {
  const std::int64_t n = rows.header.num_vertices;
  if (options.parts == 1) return std::vector<std::int32_t>(static_cast<std::size_t>(rows.rows()), 0);
  if (options.method == PartitionMethod::kContiguous) {
    std::vector<std::int32_t> part;
    for (std::int64_t r = 0; r < rows.rows(); ++r) {
      part.push_back(static_cast<std::int32_t>((rows.first + r) * options.parts / n));
    }
    return part;
  }
  // One weight a vertex (Scotch balances one): a training vertex counts twice, so that the training vertices, and
  // with them the loss's work, spread with the rest.
  std::vector<std::int64_t> weights;
  for (const std::uint8_t training : rows.train_mask) weights.push_back(1 + training);
  return scotch_parts_through_clusters(options, adjacency, weights, slices, comm);
}

// The part of each entry of the adjacency's neighbours, asked of the ranks that hold them.
std::vector<std::int32_t> neighbour_parts(const SliceAdjacency& adjacency, const VertexFacts& facts,
                                          const Slices& slices, Communicator& comm) {
  const std::vector<gid_t> neighbours = sorted_unique(adjacency.neighbours);
  const VertexFacts theirs = look_up(neighbours, facts, adjacency.first, slices, comm);
  std::vector<std::int32_t> parts;
  parts.reserve(adjacency.neighbours.size());
  for (const gid_t neighbour : adjacency.neighbours) parts.push_back(theirs.part[index_in(neighbours, neighbour)]);
  return parts;
}

// The partition's counts that the slices hold: owned, training and in-edges per part, and the edge cut.
void count_slice(const DatasetRows& rows, const SliceAdjacency& adjacency, const VertexFacts& facts,
                 const Slices& slices, Communicator& comm, PartitionInfo& info) {
  const auto parts = static_cast<std::size_t>(info.parts);
  info.owned.assign(parts, 0);
  info.train.assign(parts, 0);
  info.in_edges.assign(parts, 0);
  for (std::size_t r = 0; r < facts.part.size(); ++r) {
    const auto p = static_cast<std::size_t>(facts.part[r]);
    ++info.owned[p];
    info.train[p] += rows.train_mask[r];
    info.in_edges[p] += facts.in_degree[r];
  }
  const std::vector<std::int32_t> neighbour_part = neighbour_parts(adjacency, facts, slices, comm);
  std::vector<std::int64_t> edges{0, 0};  // adjacency entries, and those between parts: twice the edges
  for (std::int64_t r = 0; r < adjacency.rows(); ++r) {
    for (auto e = adjacency.offsets[static_cast<std::size_t>(r)];
         e < adjacency.offsets[static_cast<std::size_t>(r) + 1]; ++e) {
      ++edges[0];
      edges[1] += neighbour_part[static_cast<std::size_t>(e)] != facts.part[static_cast<std::size_t>(r)] ? 1 : 0;
    }
  }
  for (auto* counts : {&info.owned, &info.train, &info.in_edges, &edges}) comm.all_reduce_sum(*counts);
  info.undirected_edges = edges[0] / 2;
  info.edge_cut = edges[1] / 2;
}

// The rows of one part, in ascending global id, as the rank that builds its shard receives them.
struct PartRows {
  int part = 0;
  std::vector<gid_t> ids;    // vertex indices in the dataset file
  std::vector<gid_t> names;  // their global ids in the shard
  std::vector<eid_t> offsets{0};
  std::vector<gid_t> sources;
  std::vector<std::int32_t> labels;
  std::vector<std::uint8_t> train_mask;
  std::vector<std::uint8_t> val_mask;
  std::vector<std::uint8_t> test_mask;
  std::vector<float> features;
};

// Sends every row of the slice to the rank that builds its part; returns the parts this rank builds.
std::vector<PartRows> gather_part_rows(const DatasetRows& rows, const Matrix& features, const VertexFacts& facts,
                                       int parts, Communicator& comm) {
  const int ranks = comm.size();
  struct Outgoing {
    std::vector<gid_t> ids;
    std::vector<gid_t> names;
    std::vector<std::int32_t> part;
    std::vector<std::int64_t> degree;
    std::vector<gid_t> sources;
    std::vector<std::int32_t> labels;
    std::vector<std::uint8_t> masks;  // train, val, test of each row
    std::vector<float> features;
  };
  std::vector<Outgoing> out(static_cast<std::size_t>(ranks));
  for (std::int64_t r = 0; r < rows.rows(); ++r) {
    const auto i = static_cast<std::size_t>(r);
    Outgoing& o = out[static_cast<std::size_t>(builder_of_part(facts.part[i], ranks))];
    o.ids.push_back(rows.first + r);
    o.names.push_back(facts.name[i]);
    o.part.push_back(facts.part[i]);
    o.degree.push_back(facts.in_degree[i]);
    o.sources.insert(o.sources.end(), rows.sources.begin() + rows.offsets[i],
                     rows.sources.begin() + rows.offsets[i + 1]);
    o.labels.push_back(rows.labels[i]);
    o.masks.insert(o.masks.end(), {rows.train_mask[i], rows.val_mask[i], rows.test_mask[i]});
    o.features.insert(o.features.end(), features.row(r), features.row(r) + features.cols());
  }
  std::vector<Writer> writers(out.size());
  for (std::size_t q = 0; q < out.size(); ++q) {
    Outgoing o = std::move(out[q]);
    writers[q].put(o.ids);
    writers[q].put(o.names);
    writers[q].put(o.part);
    writers[q].put(o.degree);
    writers[q].put(o.sources);
    writers[q].put(o.labels);
    writers[q].put(o.masks);
    writers[q].put(o.features);
  }
  std::vector<PartRows> built;
  for (int part = comm.rank(); part < parts; part += ranks) built.emplace_back().part = part;
  const auto width = static_cast<std::size_t>(features.cols());
  for (const auto& message : exchange(writers, comm)) {
    Reader reader(message);
    const auto ids = reader.take<gid_t>();
    const auto names = reader.take<gid_t>();
    const auto part = reader.take<std::int32_t>();
    const auto degree = reader.take<std::int64_t>();
    const auto sources = reader.take<gid_t>();
    const auto labels = reader.take<std::int32_t>();
    const auto masks = reader.take<std::uint8_t>();
    const auto feature_values = reader.take<float>();
    std::size_t edge = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      PartRows& into = built[static_cast<std::size_t>(part[i] / ranks)];
      into.ids.push_back(ids[i]);
      into.names.push_back(names[i]);
      into.sources.insert(into.sources.end(), sources.begin() + static_cast<std::ptrdiff_t>(edge),
                          sources.begin() + static_cast<std::ptrdiff_t>(edge) + degree[i]);
      edge += static_cast<std::size_t>(degree[i]);
      into.offsets.push_back(static_cast<eid_t>(into.sources.size()));
      into.labels.push_back(labels[i]);
      into.train_mask.push_back(masks[3 * i]);
      into.val_mask.push_back(masks[3 * i + 1]);
      into.test_mask.push_back(masks[3 * i + 2]);
      into.features.insert(into.features.end(), feature_values.begin() + static_cast<std::ptrdiff_t>(i * width),
                           feature_values.begin() + static_cast<std::ptrdiff_t>((i + 1) * width));
    }
  }
  return built;
}

// The in-neighbours of a part that another part owns, ascending.
std::vector<gid_t> mirrors_of(const PartRows& rows) {
  std::vector<gid_t> mirrors;
  for (const gid_t s : rows.sources) {
    if (!std::binary_search(rows.ids.begin(), rows.ids.end(), s)) mirrors.push_back(s);
  }
  return sorted_unique(std::move(mirrors));
}

// A part's local graph, as make_shard numbers it: owned vertices in ascending global id, then the mirrors grouped by
// owner (ascending part) and ascending within an owner; receive lists from the mirrors' owners. Send lists come later.
LocalGraph local_graph(const PartRows& rows, std::span<const gid_t> mirrors, const VertexFacts& mirror_facts) {
  LocalGraph local;
  local.num_owned = static_cast<vid_t>(rows.ids.size());
  std::vector<std::size_t> order(mirrors.size());  // mirrors by (owner, global id)
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return mirror_facts.part[a] < mirror_facts.part[b]; });
  std::vector<vid_t> mirror_local(mirrors.size());
  for (std::size_t j = 0; j < order.size(); ++j) mirror_local[order[j]] = local.num_owned + static_cast<vid_t>(j);
  auto local_of = [&](gid_t id) {
    const auto owned = std::lower_bound(rows.ids.begin(), rows.ids.end(), id);
    if (owned != rows.ids.end() && *owned == id) return static_cast<vid_t>(owned - rows.ids.begin());
    return mirror_local[index_in(mirrors, id)];
  };
  CsrGraph& graph = local.graph;
  for (std::size_t i = 0; i < rows.ids.size(); ++i) {
    const auto first = graph.sources.size();
    for (eid_t e = rows.offsets[i]; e < rows.offsets[i + 1]; ++e) {
      graph.sources.push_back(local_of(rows.sources[static_cast<std::size_t>(e)]));
    }
    std::sort(graph.sources.begin() + static_cast<std::ptrdiff_t>(first), graph.sources.end());
    graph.offsets.push_back(graph.num_edges());
    local.global_id.push_back(rows.names[i]);
    local.global_in_degree.push_back(rows.offsets[i + 1] - rows.offsets[i]);
    const auto sources = std::span(rows.sources)
                             .subspan(static_cast<std::size_t>(rows.offsets[i]),
                                      static_cast<std::size_t>(rows.offsets[i + 1] - rows.offsets[i]));
    local.global_self_loop.push_back(std::find(sources.begin(), sources.end(), rows.ids[i]) != sources.end() ? 1 : 0);
  }
  for (const std::size_t m : order) {
    graph.offsets.push_back(graph.num_edges());
    local.global_id.push_back(mirror_facts.name[m]);
    local.global_in_degree.push_back(mirror_facts.in_degree[m]);
    local.global_self_loop.push_back(mirror_facts.self_loop[m]);
    const int peer = mirror_facts.part[m];
    if (local.peers.empty() || local.peers.back().peer != peer) local.peers.push_back({peer, {}, {}});
    local.peers.back().receive.push_back(mirror_local[m]);
  }
  return local;
}

// Each part's send lists: the rows part q receives from part k are the rows k sends to q, so the builder of q tells
// the builder of k which they are.
void add_send_lists(std::vector<Shard>& shards, int ranks, Communicator& comm) {
  std::vector<Writer> writers(static_cast<std::size_t>(ranks));
  for (const Shard& shard : shards) {
    for (const PeerRows& peer : shard.local.peers) {
      std::vector<gid_t> ids;
      for (const vid_t v : peer.receive) ids.push_back(shard.local.global_id[static_cast<std::size_t>(v)]);
      Writer& to = writers[static_cast<std::size_t>(builder_of_part(peer.peer, ranks))];
      to.put(std::vector<std::int32_t>{peer.peer, shard.part});
      to.put(sorted_unique(std::move(ids)));
    }
  }
  for (const auto& message : exchange(writers, comm)) {
    Reader reader(message);
    while (!reader.done()) {
      const auto pair = reader.take<std::int32_t>();  // the sending part, and its peer
      const auto ids = reader.take<gid_t>();
      LocalGraph& local = shards[static_cast<std::size_t>(pair[0] / ranks)].local;
      const std::span<const gid_t> owned(local.global_id.data(), static_cast<std::size_t>(local.num_owned));
      std::vector<vid_t> send;
      for (const gid_t id : ids) send.push_back(static_cast<vid_t>(index_in(owned, id)));
      auto it =
          std::find_if(local.peers.begin(), local.peers.end(), [&](const PeerRows& p) { return p.peer >= pair[1]; });
      if (it == local.peers.end() || it->peer != pair[1]) it = local.peers.insert(it, PeerRows{pair[1], {}, {}});
      it->send = std::move(send);
    }
  }
}

Shard shard_of(PartRows rows, LocalGraph local, const DatasetHeader& header, const PartitionManifest& manifest) {
  Shard shard;
  shard.name = header.name;
  shard.part = rows.part;
  shard.partition = manifest.partition;
  shard.global_vertices = manifest.global_vertices;
  shard.global_edges = manifest.global_edges;
  shard.global_train = manifest.global_train;
  shard.local = std::move(local);
  shard.features = Matrix(static_cast<std::int64_t>(rows.ids.size()), header.feature_width, std::move(rows.features));
  shard.labels = std::move(rows.labels);
  shard.num_classes = header.num_classes;
  shard.train_mask = std::move(rows.train_mask);
  shard.val_mask = std::move(rows.val_mask);
  shard.test_mask = std::move(rows.test_mask);
  shard.symmetrized = header.symmetrized;
  shard.self_loops = header.self_loops;
  shard.features_stored_sparse = header.features_stored_sparse;
  return shard;
}

// Logs (at debug level) this rank's resident memory at the end of a phase of the partition.
void log_memory(const Communicator& comm, const char* phase) {
  const ResidentMemory memory = resident_memory();
  spdlog::debug("rank {}: after {}: resident {}, peak {}", comm.rank(), phase, format_bytes(memory.current),
                format_bytes(memory.peak));
}

// Reads the slice and assigns its vertices' parts; fills the manifest's partition and counts but the mirrors.
struct AssignedSlice {
  DatasetRows rows;
  VertexFacts facts;
};
AssignedSlice assign_slice(const std::string& path, const PartitionOptions& options, const Slices& slices,
                           Communicator& comm, PartitionManifest& manifest) {
  AssignedSlice slice{read_dataset_rows(path, slices.first(comm.rank()), slices.rows(comm.rank())), {}};
  const DatasetHeader& header = slice.rows.header;
  NJ_REQUIRE(options.parts >= 1 && options.parts <= header.num_vertices,
             "{}: cannot split {} vertices into {} parts (parts must be between 1 and the number of vertices)", path,
             header.num_vertices, options.parts);
  const auto start = std::chrono::steady_clock::now();
  log_memory(comm, "reading the slice");
  const SliceAdjacency adjacency = simple_adjacency(slice.rows, slices, comm);
  log_memory(comm, "the undirected graph");
  slice.facts = facts_of_slice(slice.rows, slice_parts(options, slice.rows, adjacency, slices, comm));
  if (options.method == PartitionMethod::kScotch && options.parts > 1) {
    balance_training_vertices(slice.facts.part, slice.rows.train_mask, adjacency,
                              neighbour_parts(adjacency, slice.facts, slices, comm), options.parts, comm);
  }
  log_memory(comm, "assigning parts");
  std::vector<double> seconds{seconds_since(start)};
  comm.all_reduce_max(seconds);
  PartitionInfo& info = manifest.partition;
  info.method = to_string(options.method);
  info.parts = options.parts;
  info.seed = options.seed;
  info.seconds = seconds[0];
  count_slice(slice.rows, adjacency, slice.facts, slices, comm, info);
  manifest.dataset_name = header.name;
  manifest.dataset_path = fs::absolute(path).lexically_normal().string();
  manifest.global_vertices = header.num_vertices;
  manifest.global_edges = header.num_edges;
  manifest.global_train = std::accumulate(info.train.begin(), info.train.end(), std::int64_t{0});
  NJ_REQUIRE(manifest.global_train > 0, "{}: the train split is empty", path);
  return slice;
}

}  // namespace

bool runs_in_parallel(PartitionMethod method) {
  return method == PartitionMethod::kScotch || method == PartitionMethod::kContiguous;
}

PartitionManifest partition_in_parallel(const std::string& dataset_path, const PartitionOptions& options,
                                        Communicator& comm, const std::function<void(Shard&&)>& take) {
  NJ_REQUIRE(runs_in_parallel(options.method) || options.parts == 1,
             "--method {} needs the whole graph in one process; partitioning in parallel takes scotch or contiguous",
             to_string(options.method));
  const Slices slices(read_dataset_header(dataset_path).num_vertices, comm.size());
  PartitionManifest manifest;
  AssignedSlice slice = assign_slice(dataset_path, options, slices, comm, manifest);
  const DatasetHeader header = slice.rows.header;
  std::vector<PartRows> parts;
  {
    const Matrix features = read_dataset_feature_rows(dataset_path, slice.rows.first, slice.rows.rows());
    parts = gather_part_rows(slice.rows, features, slice.facts, options.parts, comm);
  }
  log_memory(comm, "sending the rows");
  std::vector<std::vector<gid_t>> mirrors;
  std::vector<gid_t> all_mirrors;
  PartitionInfo& info = manifest.partition;
  info.mirrors.assign(static_cast<std::size_t>(options.parts), 0);
  for (const PartRows& part : parts) {
    mirrors.push_back(mirrors_of(part));
    info.mirrors[static_cast<std::size_t>(part.part)] = static_cast<std::int64_t>(mirrors.back().size());
    all_mirrors.insert(all_mirrors.end(), mirrors.back().begin(), mirrors.back().end());
  }
  comm.all_reduce_sum(info.mirrors);
  all_mirrors = sorted_unique(std::move(all_mirrors));
  const VertexFacts all_facts = look_up(all_mirrors, slice.facts, slice.rows.first, slices, comm);
  slice = {};
  std::vector<Shard> shards;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    VertexFacts facts;
    for (const gid_t id : mirrors[i]) {
      const std::size_t at = index_in(all_mirrors, id);
      facts.name.push_back(all_facts.name[at]);
      facts.part.push_back(all_facts.part[at]);
      facts.in_degree.push_back(all_facts.in_degree[at]);
      facts.self_loop.push_back(all_facts.self_loop[at]);
    }
    LocalGraph local = local_graph(parts[i], mirrors[i], facts);
    shards.push_back(shard_of(std::move(parts[i]), std::move(local), header, manifest));
  }
  add_send_lists(shards, comm.size(), comm);
  log_memory(comm, "building the shards");
  for (Shard& shard : shards) take(std::move(shard));
  return manifest;
}

PartitionManifest write_partition_in_parallel(const std::string& dataset_path, const PartitionOptions& options,
                                              Communicator& comm, const std::string& directory) {
  if (comm.rank() == 0) start_partition_folder(directory);
  std::vector<std::int64_t> done{0};
  comm.all_reduce_sum(done);  // the folder is there, without a manifest, before any rank writes into it
  PartitionManifest manifest = partition_in_parallel(dataset_path, options, comm, [&](Shard&& shard) {
    write_shard((fs::path(directory) / shard_file_name(shard.part)).string(), shard);
  });
  comm.all_reduce_sum(done);  // every shard written
  for (int part = 0; part < options.parts; ++part) manifest.shard_files.push_back(shard_file_name(part));
  manifest.directory = directory;
  if (comm.rank() == 0) finish_partition_folder(directory, manifest);
  const ResidentMemory memory = resident_memory();
  spdlog::info("rank {}: peak resident memory {}", comm.rank(), format_bytes(memory.peak));
  return manifest;
}

}  // namespace nj
