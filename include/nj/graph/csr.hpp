#pragma once
// The graph in memory: in-edge CSR, destination-major. offsets[v]..offsets[v+1] index the sources of the
// edges that point at v. This is the layout GNN aggregation reads (one destination gathers its sources) and
// the layout stored in the dataset file.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nj/core/error.hpp"
#include "nj/core/types.hpp"

namespace nj {

struct CsrGraph {
  std::vector<eid_t> offsets{0};  // num_vertices + 1, non-decreasing, offsets[0] == 0
  std::vector<vid_t> sources;     // num_edges, each in [0, num_vertices)

  vid_t num_vertices() const { return static_cast<vid_t>(offsets.size() - 1); }
  eid_t num_edges() const { return static_cast<eid_t>(sources.size()); }
  eid_t in_degree(vid_t v) const { return offsets[v + 1] - offsets[v]; }
  std::span<const vid_t> in_neighbors(vid_t v) const {
    return {sources.data() + offsets[v], static_cast<std::size_t>(in_degree(v))};
  }
  // Throws nj::InputError (prefixed with `where`) on unsorted offsets or out-of-range sources.
  void validate(const std::string& where) const;
};

enum class SelfLoops { kKeep, kRemove, kAddMissing };
enum class Duplicates { kKeep, kRemove };

struct EdgeListOptions {
  bool symmetrize = false;  // add the reverse of every edge
  SelfLoops self_loops = SelfLoops::kKeep;
  Duplicates duplicates = Duplicates::kKeep;
};

// Builds the in-edge CSR of edges (src[i] -> dst[i]). Within a destination, sources come out sorted, so
// the result does not depend on the input order.
CsrGraph build_csr(vid_t num_vertices, std::span<const vid_t> src, std::span<const vid_t> dst,
                   const EdgeListOptions& options = {});

// The same graph with per-vertex self-loops arranged as a GNN layer wants them: kAddMissing adds one to each
// vertex that has none (PyG's add_remaining_self_loops, used by GCNConv); kRemove followed by adding one
// to every vertex is GATConv's rule, given by `exactly_one = true`. Only the first `rows` vertices are
// arranged (a rank's owned vertices; its mirrors are never aggregated and keep no edges).
CsrGraph with_self_loops(const CsrGraph& graph, bool exactly_one, vid_t rows);
inline CsrGraph with_self_loops(const CsrGraph& graph, bool exactly_one) {
  return with_self_loops(graph, exactly_one, graph.num_vertices());
}

// Out-edge view of an in-edge CSR: for each source, the destinations it feeds and the position of that edge
// in the in-edge arrays. Backward passes gather through it instead of scattering, so sums run in a fixed
// order without atomics.
struct CsrTranspose {
  std::vector<eid_t> offsets{0};     // num_sources + 1
  std::vector<vid_t> destinations;   // destination of each out-edge
  std::vector<eid_t> edge_position;  // index of that edge in the in-edge CSR
};
CsrTranspose transpose(std::span<const eid_t> offsets, std::span<const vid_t> sources, vid_t num_sources);

}  // namespace nj
