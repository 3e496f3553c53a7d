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
#include "nj/core/phase_memory.hpp"
#include "nj/core/release.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/partition/partition_memory.hpp"
#include "scotch_parts.hpp"
#include "training_balance.hpp"

namespace nj {
namespace {

namespace fs = std::filesystem;

// An edge as it travels to the rank that holds its source.
struct EdgeEnds {
  gid_t source;
  gid_t destination;
};

// The slice's vertices in the simple undirected graph (symmetrised, without self-loops or repeats): what Scotch
// partitions and where the edge cut is counted, as simple_undirected_graph is for one process. Each in-edge s -> v
// read here lists s at v, and v at s on the rank whose slice holds s. Built in place, by counting each row's entries
// first: 8 bytes an entry beside the messages, where pairs of (row, neighbour) sorted took 16.
SliceAdjacency simple_adjacency(const DatasetRows& rows, const Slices& slices, Communicator& comm,
                                PartitionRankCounts& counts) {
  SliceAdjacency adjacency;
  adjacency.first = rows.first;
  adjacency.offsets.assign(static_cast<std::size_t>(rows.rows()) + 1, 0);
  const auto each_in_edge = [&](auto&& visit) {
    for (std::int64_t r = 0; r < rows.rows(); ++r) {
      for (auto e = rows.offsets[static_cast<std::size_t>(r)]; e < rows.offsets[static_cast<std::size_t>(r) + 1]; ++e) {
        const gid_t s = rows.sources[static_cast<std::size_t>(e)];
        if (s != rows.first + r) visit(static_cast<std::size_t>(r), s);
      }
    }
  };
  // Each in-edge s -> v as the pair (s, v), to the rank that holds s, written in place: pairs_to[q] of them to q.
  std::vector<std::size_t> pairs_to(static_cast<std::size_t>(slices.ranks()), 0);
  each_in_edge([&](std::size_t r, gid_t s) {
    ++adjacency.offsets[r + 1];
    ++pairs_to[static_cast<std::size_t>(slices.owner(s))];
  });
  std::vector<Writer> writers(pairs_to.size());
  for (std::size_t q = 0; q < pairs_to.size(); ++q) {
    writers[q].reserve(Writer::bytes_of_array<EdgeEnds>(pairs_to[q]));
    writers[q].start_array<EdgeEnds>(pairs_to[q]);
  }
  each_in_edge([&](std::size_t r, gid_t s) {
    writers[static_cast<std::size_t>(slices.owner(s))].add(EdgeEnds{s, rows.first + static_cast<gid_t>(r)});
  });
  std::vector<std::vector<std::byte>> messages = exchange(writers, comm);
  std::vector<PackedArray<EdgeEnds>> received;
  for (const auto& message : messages) {
    received.push_back(Reader(message).next<EdgeEnds>());
    counts.reversed += static_cast<std::int64_t>(received.back().size());
  }
  for (const PackedArray<EdgeEnds>& edges : received) {
    for (std::size_t i = 0; i < edges.size(); ++i)
      ++adjacency.offsets[static_cast<std::size_t>(edges[i].source - rows.first) + 1];
  }
  std::partial_sum(adjacency.offsets.begin(), adjacency.offsets.end(), adjacency.offsets.begin());
  adjacency.neighbours.resize(static_cast<std::size_t>(adjacency.offsets.back()));
  std::vector<std::int64_t> cursor(adjacency.offsets.begin(), adjacency.offsets.end() - 1);
  const auto add = [&](std::size_t r, gid_t neighbour) {
    adjacency.neighbours[static_cast<std::size_t>(cursor[r]++)] = neighbour;
  };
  each_in_edge(add);
  for (const PackedArray<EdgeEnds>& edges : received) {
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const EdgeEnds edge = edges[i];
      add(static_cast<std::size_t>(edge.source - rows.first), edge.destination);
    }
  }
  received.clear();
  release_vector(messages);
  release_vector(cursor);
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
  counts.adjacency = kept;
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
  facts.name.reserve(answers.size());
  facts.part.reserve(answers.size());
  facts.in_degree.reserve(answers.size());
  facts.self_loop.reserve(answers.size());
  for (const Fact& fact : answers) {
    facts.name.push_back(fact.name);
    facts.part.push_back(fact.part);
    facts.in_degree.push_back(fact.in_degree);
    facts.self_loop.push_back(fact.self_loop);
  }
  return facts;
}

std::vector<std::int32_t> slice_parts(const PartitionOptions& options, const DatasetRows& rows,
                                      const SliceAdjacency& adjacency, const Slices& slices, Communicator& comm,
                                      PartitionRankCounts& counts) {
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
  return scotch_slice_parts(options, adjacency, weights, rows.train_mask, slices, comm, counts);
}

// The partition's counts that the slices hold: owned, training and in-edges per part, and the edge cut.
void count_slice(const DatasetRows& rows, const SliceAdjacency& adjacency, const VertexFacts& facts,
                 const Slices& slices, Communicator& comm, PartitionInfo& info, PartitionRankCounts& counts) {
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
  const NeighbourParts neighbour_part = neighbour_parts(adjacency, facts.part, slices, comm);
  counts.outside = neighbour_part.outside;
  counts.outside_entries = std::count_if(adjacency.neighbours.begin(), adjacency.neighbours.end(),
                                         [&](gid_t v) { return !adjacency.holds(v); });
  std::vector<std::int64_t> edges{0, 0};  // adjacency entries, and those between parts: twice the edges
  for (std::int64_t r = 0; r < adjacency.rows(); ++r) {
    for (auto e = adjacency.offsets[static_cast<std::size_t>(r)];
         e < adjacency.offsets[static_cast<std::size_t>(r) + 1]; ++e) {
      ++edges[0];
      edges[1] +=
          neighbour_part.of_entry[static_cast<std::size_t>(e)] != facts.part[static_cast<std::size_t>(r)] ? 1 : 0;
    }
  }
  for (auto* summed : {&info.owned, &info.train, &info.in_edges, &edges}) comm.all_reduce_sum(*summed);
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

// How many rows, with how many in-edges, go to a rank or a part.
struct RowsTo {
  std::size_t rows = 0;
  std::size_t edges = 0;
};

// The bytes of a message of `rows` rows with `edges` in-edges and `width` features each.
std::size_t message_bytes(std::size_t rows, std::size_t edges, std::size_t width) {
  return 2 * Writer::bytes_of_array<gid_t>(rows) + 2 * Writer::bytes_of_array<std::int32_t>(rows) +
         Writer::bytes_of_array<std::int64_t>(rows) + Writer::bytes_of_array<std::uint8_t>(3 * rows) +
         Writer::bytes_of_array<gid_t>(edges) + Writer::bytes_of_array<float>(rows * width);
}

// The arrays of one message of rows, in the order gather_part_rows writes them.
struct SentRows {
  PackedArray<gid_t> ids;
  PackedArray<gid_t> names;
  PackedArray<std::int32_t> part;
  PackedArray<std::int64_t> in_degree;
  PackedArray<std::int32_t> labels;
  PackedArray<std::uint8_t> masks;
  PackedArray<gid_t> sources;
  PackedArray<float> features;
};
SentRows sent_rows(std::span<const std::byte> message) {
  Reader reader(message);
  auto ids = reader.next<gid_t>();
  auto names = reader.next<gid_t>();
  auto part = reader.next<std::int32_t>();
  auto in_degree = reader.next<std::int64_t>();
  auto labels = reader.next<std::int32_t>();
  auto masks = reader.next<std::uint8_t>();
  auto sources = reader.next<gid_t>();
  return {ids, names, part, in_degree, labels, masks, sources, reader.next<float>()};
}

// The parts this rank builds, filled from the messages of rows, each array sized before it is filled.
std::vector<PartRows> part_rows_of(std::vector<std::vector<std::byte>> messages, std::size_t width, int parts,
                                   Communicator& comm) {
  const int ranks = comm.size();
  std::vector<PartRows> built;
  for (int part = comm.rank(); part < parts; part += ranks) built.emplace_back().part = part;
  std::vector<SentRows> received;
  for (const auto& message : messages) received.push_back(sent_rows(message));
  std::vector<RowsTo> sizes(built.size());
  for (const SentRows& sent : received) {
    for (std::size_t i = 0; i < sent.part.size(); ++i) {
      RowsTo& size = sizes[static_cast<std::size_t>(sent.part[i] / ranks)];
      ++size.rows;
      size.edges += static_cast<std::size_t>(sent.in_degree[i]);
    }
  }
  for (std::size_t k = 0; k < built.size(); ++k) {
    PartRows& into = built[k];
    for (auto* ids : {&into.ids, &into.names}) ids->reserve(sizes[k].rows);
    into.offsets.reserve(sizes[k].rows + 1);
    into.sources.reserve(sizes[k].edges);
    into.labels.reserve(sizes[k].rows);
    for (auto* mask : {&into.train_mask, &into.val_mask, &into.test_mask}) mask->reserve(sizes[k].rows);
    into.features.reserve(sizes[k].rows * width);
  }
  for (const SentRows& sent : received) {
    std::size_t edge = 0;
    for (std::size_t i = 0; i < sent.ids.size(); ++i) {
      PartRows& into = built[static_cast<std::size_t>(sent.part[i] / ranks)];
      into.ids.push_back(sent.ids[i]);
      into.names.push_back(sent.names[i]);
      const auto degree = static_cast<std::size_t>(sent.in_degree[i]);
      into.sources.resize(into.sources.size() + degree);
      sent.sources.copy_to(edge, degree, into.sources.data() + into.sources.size() - degree);
      edge += degree;
      into.offsets.push_back(static_cast<eid_t>(into.sources.size()));
      into.labels.push_back(sent.labels[i]);
      into.train_mask.push_back(sent.masks[3 * i]);
      into.val_mask.push_back(sent.masks[3 * i + 1]);
      into.test_mask.push_back(sent.masks[3 * i + 2]);
      into.features.resize(into.features.size() + width);
      sent.features.copy_to(i * width, width, into.features.data() + into.features.size() - width);
    }
  }
  return built;
}

// Sends every row of the slice to the rank that builds its part and returns the parts this rank builds: per row its
// id, name, part, in-degree, label and three masks, then its in-edges and its features, one array per field. The
// slice's in-edges and features go once packed: what a rank holds at once is its messages out and in, then the messages
// in and the parts they fill.
std::vector<PartRows> gather_part_rows(DatasetRows& rows, Matrix features, const VertexFacts& facts, int parts,
                                       Communicator& comm) {
  const int ranks = comm.size();
  const auto width = static_cast<std::size_t>(features.cols());
  std::vector<std::size_t> builder(static_cast<std::size_t>(rows.rows()));
  std::vector<RowsTo> to(static_cast<std::size_t>(ranks));
  for (std::size_t i = 0; i < builder.size(); ++i) {
    builder[i] = static_cast<std::size_t>(builder_of_part(facts.part[i], ranks));
    ++to[builder[i]].rows;
    to[builder[i]].edges += static_cast<std::size_t>(facts.in_degree[i]);
  }
  std::vector<Writer> writers(to.size());
  for (std::size_t q = 0; q < to.size(); ++q) {
    writers[q].reserve(message_bytes(to[q].rows, to[q].edges, width));
  }
  // One array per field: `count(q)` values to each builder q, `put(writer, i)` adding row i's.
  const auto field = [&]<typename T>(T /*type*/, auto count, auto put) {
    for (std::size_t q = 0; q < to.size(); ++q) writers[q].start_array<T>(count(to[q]));
    for (std::size_t i = 0; i < builder.size(); ++i) put(writers[builder[i]], i);
  };
  const auto per_row = [](const RowsTo& t) { return t.rows; };
  const auto first = rows.first;
  field(gid_t{}, per_row, [&](Writer& w, std::size_t i) { w.add(first + static_cast<gid_t>(i)); });
  field(gid_t{}, per_row, [&](Writer& w, std::size_t i) { w.add(facts.name[i]); });
  field(std::int32_t{}, per_row, [&](Writer& w, std::size_t i) { w.add(facts.part[i]); });
  field(std::int64_t{}, per_row, [&](Writer& w, std::size_t i) { w.add(facts.in_degree[i]); });
  field(std::int32_t{}, per_row, [&](Writer& w, std::size_t i) { w.add(rows.labels[i]); });
  field(
      std::uint8_t{}, [](const RowsTo& t) { return 3 * t.rows; },
      [&](Writer& w, std::size_t i) {
        w.add(rows.train_mask[i]);
        w.add(rows.val_mask[i]);
        w.add(rows.test_mask[i]);
      });
  field(
      gid_t{}, [](const RowsTo& t) { return t.edges; },
      [&](Writer& w, std::size_t i) {
        w.add_values(
            std::span<const gid_t>(rows.sources)
                .subspan(static_cast<std::size_t>(rows.offsets[i]), static_cast<std::size_t>(facts.in_degree[i])));
      });
  field(
      float{}, [&](const RowsTo& t) { return t.rows * width; },
      [&](Writer& w, std::size_t i) {
        w.add_values(std::span<const float>(features.row(static_cast<std::int64_t>(i)), width));
      });
  release_vector(rows.sources);
  features = Matrix();
  std::vector<std::vector<std::byte>> messages = exchange(writers, comm);
  return part_rows_of(std::move(messages), width, parts, comm);
}
// The in-neighbours of a part that another part owns, ascending.
std::vector<gid_t> mirrors_of(const PartRows& rows) {
  return sorted_unique_where(std::span<const gid_t>(rows.sources),
                             [&](gid_t s) { return !std::binary_search(rows.ids.begin(), rows.ids.end(), s); });
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
    return mirror_local[index_of(mirrors, id)];
  };
  CsrGraph& graph = local.graph;
  const std::size_t vertices = rows.ids.size() + mirrors.size();
  graph.sources.reserve(rows.sources.size());
  graph.offsets.reserve(vertices + 1);
  local.global_id.reserve(vertices);
  local.global_in_degree.reserve(vertices);
  local.global_self_loop.reserve(vertices);
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
      for (const gid_t id : ids) send.push_back(static_cast<vid_t>(index_of(owned, id)));
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

// Reads the slice and assigns its vertices' parts; fills the manifest's partition and counts but the mirrors.
struct AssignedSlice {
  DatasetRows rows;
  VertexFacts facts;
  PartitionRankCounts counts;
};
AssignedSlice assign_slice(const std::string& path, const PartitionOptions& options, const Slices& slices,
                           Communicator& comm, PartitionManifest& manifest, PhaseMemory& memory) {
  AssignedSlice slice{read_dataset_rows(path, slices.first(comm.rank()), slices.rows(comm.rank())), {}, {}};
  const DatasetHeader& header = slice.rows.header;
  NJ_REQUIRE(options.parts >= 1 && options.parts <= header.num_vertices,
             "{}: cannot split {} vertices into {} parts (parts must be between 1 and the number of vertices)", path,
             header.num_vertices, options.parts);
  PartitionRankCounts& counts = slice.counts;
  counts.ranks = comm.size();
  counts.rows = slice.rows.rows();
  counts.in_edges = static_cast<std::int64_t>(slice.rows.sources.size());
  for (std::int64_t r = 0; r < counts.rows; ++r) {
    const auto in = std::span(slice.rows.sources)
                        .subspan(static_cast<std::size_t>(slice.rows.offsets[static_cast<std::size_t>(r)]),
                                 static_cast<std::size_t>(slice.rows.offsets[static_cast<std::size_t>(r) + 1] -
                                                          slice.rows.offsets[static_cast<std::size_t>(r)]));
    counts.self_loops += std::count(in.begin(), in.end(), slice.rows.first + r);
  }
  counts.named = !slice.rows.vertex_ids.empty();
  counts.feature_width = header.feature_width;
  const auto start = std::chrono::steady_clock::now();
  memory.end_phase();  // reading the slice
  const SliceAdjacency adjacency = simple_adjacency(slice.rows, slices, comm, counts);
  memory.end_phase();  // the undirected graph
  slice.facts = facts_of_slice(slice.rows, slice_parts(options, slice.rows, adjacency, slices, comm, counts));
  if (options.method == PartitionMethod::kScotch && options.parts > 1) {
    balance_training_vertices(slice.facts.part, slice.rows.train_mask, adjacency,
                              neighbour_parts(adjacency, slice.facts.part, slices, comm).of_entry, options.parts, comm);
  }
  std::vector<double> seconds{seconds_since(start)};
  comm.all_reduce_max(seconds);
  PartitionInfo& info = manifest.partition;
  info.method = to_string(options.method);
  info.parts = options.parts;
  info.seed = options.seed;
  info.seconds = seconds[0];
  count_slice(slice.rows, adjacency, slice.facts, slices, comm, info, counts);
  memory.end_phase();  // assigning parts
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
  PhaseMemory memory;
  AssignedSlice slice = assign_slice(dataset_path, options, slices, comm, manifest, memory);
  const DatasetHeader header = slice.rows.header;
  std::vector<PartRows> parts =
      gather_part_rows(slice.rows, read_dataset_feature_rows(dataset_path, slice.rows.first, slice.rows.rows()),
                       slice.facts, options.parts, comm);
  memory.end_phase();  // sending the rows
  PartitionRankCounts counts = slice.counts;
  counts.parts_built = static_cast<std::int64_t>(parts.size());
  for (const PartRows& part : parts) {
    counts.rows_in += static_cast<std::int64_t>(part.ids.size());
    counts.edges_in += static_cast<std::int64_t>(part.sources.size());
  }
  std::vector<std::vector<gid_t>> mirrors;
  std::vector<gid_t> all_mirrors;
  PartitionInfo& info = manifest.partition;
  info.mirrors.assign(static_cast<std::size_t>(options.parts), 0);
  for (const PartRows& part : parts) {
    mirrors.push_back(mirrors_of(part));
    info.mirrors[static_cast<std::size_t>(part.part)] = static_cast<std::int64_t>(mirrors.back().size());
    counts.mirrors += static_cast<std::int64_t>(mirrors.back().size());
  }
  all_mirrors.reserve(std::accumulate(mirrors.begin(), mirrors.end(), std::size_t{0},
                                      [](std::size_t sum, const std::vector<gid_t>& m) { return sum + m.size(); }));
  for (const std::vector<gid_t>& part_mirrors : mirrors) {
    all_mirrors.insert(all_mirrors.end(), part_mirrors.begin(), part_mirrors.end());
  }
  comm.all_reduce_sum(info.mirrors);
  all_mirrors = sorted_unique(std::move(all_mirrors));
  const VertexFacts all_facts = look_up(all_mirrors, slice.facts, slice.rows.first, slices, comm);
  slice = {};
  std::vector<Shard> shards;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    VertexFacts facts;
    facts.name.reserve(mirrors[i].size());
    facts.part.reserve(mirrors[i].size());
    facts.in_degree.reserve(mirrors[i].size());
    facts.self_loop.reserve(mirrors[i].size());
    for (const gid_t id : mirrors[i]) {
      const std::size_t at = index_of(all_mirrors, id);
      facts.name.push_back(all_facts.name[at]);
      facts.part.push_back(all_facts.part[at]);
      facts.in_degree.push_back(all_facts.in_degree[at]);
      facts.self_loop.push_back(all_facts.self_loop[at]);
    }
    LocalGraph local = local_graph(parts[i], mirrors[i], facts);
    shards.push_back(shard_of(std::move(parts[i]), std::move(local), header, manifest));
  }
  add_send_lists(shards, comm.size(), comm);
  for (Shard& shard : shards) take(std::move(shard));
  memory.end_phase();  // building the shards
  memory.log(partition_phase_bytes(counts), fmt::format("rank {}", comm.rank()), "partitioning");
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
