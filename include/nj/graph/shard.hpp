#pragma once
// What one rank trains on: its part of the graph. A rank owns a set of vertices, renumbered contiguously, with
// all of their in-edges; the in-neighbours owned by other ranks are its mirrors, whose rows it receives from
// their owners between layers. A single process is the special case of one part: every vertex owned, no
// mirrors, global id = local id.
//
// Local ids: owned vertices [0, num_owned) in ascending global id, then mirrors [num_owned, num_local()),
// grouped by owner (ascending part) and in ascending global id within an owner.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nj/core/matrix.hpp"
#include "nj/graph/csr.hpp"
#include "nj/graph/dataset.hpp"

namespace nj {

// The rows one rank exchanges with one other rank. Both lists are in ascending global id, so that this rank's
// `send` to q and q's `receive` from this rank name the same vertices in the same order.
struct PeerRows {
  int peer = 0;
  std::vector<vid_t> send;     // owned local ids whose rows `peer` mirrors
  std::vector<vid_t> receive;  // mirror local ids that `peer` owns
};

// The graph as one rank sees it.
struct LocalGraph {
  // num_local() vertices; an owned vertex holds all of its in-edges (sources in local ids, ascending), a mirror
  // none.
  CsrGraph graph;
  vid_t num_owned = 0;
  std::vector<gid_t> global_id;                // per local vertex
  std::vector<std::int64_t> global_in_degree;  // per local vertex: its in-degree in the whole graph, as stored
  std::vector<std::uint8_t> global_self_loop;  // per local vertex: 1 if the whole graph has an edge v -> v
  std::vector<PeerRows> peers;                 // ascending peer; only peers with something to exchange

  vid_t num_local() const { return graph.num_vertices(); }
  vid_t num_mirrors() const { return num_local() - num_owned; }
  // Whether some in-edge of local vertex v comes from a mirror (its aggregation waits for the exchange).
  bool reads_mirror(vid_t v) const;
  // Owned vertices some peer mirrors, ascending and without repeats: the rows a rank sends forward and whose
  // gradients come back from the mirrors.
  std::vector<vid_t> boundary_rows() const;
  // Throws nj::InputError (prefixed with `where`) when the parts disagree.
  void validate(const std::string& where) const;
};

// A local graph of the whole graph: every vertex owned, global id = local id, no peers.
LocalGraph whole_local_graph(CsrGraph graph);

// A hash of the in-edges of `local`'s owned vertices, each edge hashed by its ends' global ids and the hashes added
// modulo 2^64. Every edge of a partitioned graph is one owner's in-edge and a sum does not depend on its order, so
// the parts' hashes add up to the whole graph's, whatever the partition, the vertex order or the number of ranks.
std::uint64_t owned_edges_hash(const LocalGraph& local);

// How a partition was made and what it cost; recorded in every shard and in the manifest.
struct PartitionInfo {
  std::string method = "none";  // metis, random, contiguous; none for the whole graph
  int parts = 1;
  std::uint64_t seed = 0;
  // On the symmetrised graph without self-loops or duplicates: undirected edges, and those whose ends lie in
  // different parts.
  std::int64_t undirected_edges = 0;
  std::int64_t edge_cut = 0;
  double seconds = 0.0;  // to compute the part of every vertex
  // Per part:
  std::vector<std::int64_t> owned;     // vertices owned
  std::vector<std::int64_t> mirrors;   // mirror vertices
  std::vector<std::int64_t> train;     // training vertices owned
  std::vector<std::int64_t> in_edges;  // in-edges of owned vertices, as stored

  double cut_fraction() const;
  // max over parts / mean over parts of owned vertices (1 = perfect balance); likewise of training vertices.
  double vertex_imbalance() const;
  double train_imbalance() const;
  // mirrors / owned of one part.
  double mirror_fraction(int part) const;
};

// One rank's data: its local graph and the rows of its owned vertices.
struct Shard {
  std::string name;  // the dataset's
  int part = 0;
  PartitionInfo partition;
  std::int64_t global_vertices = 0;
  std::int64_t global_edges = 0;
  std::int64_t global_train = 0;  // training vertices of the whole graph (the loss's normaliser)
  LocalGraph local;
  Matrix features;                   // num_owned rows
  std::vector<std::int32_t> labels;  // num_owned
  std::int32_t num_classes = 0;
  std::vector<std::uint8_t> train_mask;  // num_owned each
  std::vector<std::uint8_t> val_mask;
  std::vector<std::uint8_t> test_mask;
  bool symmetrized = false;
  SelfLoopPolicy self_loops = SelfLoopPolicy::kKept;
  bool features_stored_sparse = false;  // read from /features_sparse, or cut from a dataset read so
  // The dataset's stored community order, for the one shard of a whole graph (empty otherwise, and once
  // order_vertices has used it).
  std::vector<vid_t> community_order;

  vid_t num_owned() const { return local.num_owned; }
  // Throws nj::InputError (prefixed with `where`) when any part is inconsistent with another.
  void validate(const std::string& where) const;
};

// The whole dataset as the one shard of a single-process run.
Shard whole_graph_shard(Dataset dataset);

// Part `part`'s shard of `dataset`, where part_of[v] is the part owning vertex v. `info` is copied into the
// shard as it is (its per-part counts are the caller's; see fill_part_counts).
Shard make_shard(const Dataset& dataset, std::span<const std::int32_t> part_of, int part, const PartitionInfo& info);

// The graph symmetrised, without self-loops or duplicate edges: what METIS partitions and where the edge cut
// is counted.
CsrGraph simple_undirected_graph(const CsrGraph& graph);

// Fills info's per-part counts (owned, mirrors, train, in_edges) and edge cut for the given assignment.
void fill_part_counts(const Dataset& dataset, std::span<const std::int32_t> part_of, PartitionInfo& info);
// The same, given simple_undirected_graph(dataset.graph), for a caller that has built it already.
void fill_part_counts(const Dataset& dataset, const CsrGraph& simple, std::span<const std::int32_t> part_of,
                      PartitionInfo& info);

}  // namespace nj
