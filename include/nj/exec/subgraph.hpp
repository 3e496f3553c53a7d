#pragma once
// Subgraphs: sets of destination vertices with all of their in-edges, cut from a graph in a locality-preserving
// vertex order so that consecutive subgraphs share many source rows.
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "nj/graph/csr.hpp"
#include "nj/graph/sparse_block.hpp"

namespace nj {

struct Subgraph {
  std::vector<vid_t> sources;  // vertex ids of the local sources; the first block.num_dst() are the destinations
  SparseBlock block;           // local ids; src_gid: global ids

  vid_t num_dst() const { return block.num_dst(); }
  std::span<const vid_t> destinations() const { return {sources.data(), static_cast<std::size_t>(num_dst())}; }
};

// Whether some source of the subgraph is row `first_mirror` or later: on a rank, a mirror, whose row the exchange
// brings.
bool reads_mirror(const Subgraph& part, vid_t first_mirror);

// The block of destinations `dsts` with all their in-edges in `graph` (weighted by `weights` where it is not
// empty). Sources after the destinations come in ascending vertex id. The global id
// of vertex v is global_id[v], or global_id[vertex_of[v]] when `graph` is cut from a larger one.
Subgraph make_subgraph(const CsrGraph& graph, EdgeWeights weights, std::span<const vid_t> dsts,
                       std::span<const gid_t> global_id, std::span<const vid_t> vertex_of = {});

// make_subgraph for many subgraphs of one graph: its per-vertex scratch (bitmaps, and a local id for each
// destination) is kept between calls, so that each subgraph costs time linear in its own edges, plus one bit per
// graph vertex where that is less than sorting its sources. A step that runs a subgraph builds its block this way
// when the plan does not keep it. The arguments must outlive the builder.
class SubgraphBuilder {
 public:
  // A block of at least `parallel_edges` in-edges is built by OpenMP's threads (the same block as one thread
  // builds).
  SubgraphBuilder(const CsrGraph& graph, EdgeWeights weights, std::span<const gid_t> global_id,
                  std::span<const vid_t> vertex_of = {}, eid_t parallel_edges = eid_t{1} << 16);
  // `dsts` must be distinct.
  Subgraph build(std::span<const vid_t> dsts);
  // The same into `out`, reusing its arrays' memory.
  void build(std::span<const vid_t> dsts, Subgraph& out);
  // Only the sources of the subgraph (what its block's src_gid lists), in the same order, from the destinations'
  // one-hop closure (they and their in-neighbours, each once, in any order) as partition_in_order hands it over:
  // without reading their in-edges again. Returns the subgraph's in-edges.
  eid_t list_sources(std::span<const vid_t> dsts, std::span<const vid_t> closure, std::vector<vid_t>& sources);

 private:
  // Lists the sources into `sources` and leaves what numbers them: local_ for the destinations (and for the other
  // sources where they were sorted), the bitmap and its prefix counts otherwise; copies the in-edges' sources into
  // `in_edges`. Returns the number of in-edges.
  eid_t number_sources(std::span<const vid_t> dsts, std::vector<vid_t>& sources, std::vector<vid_t>& in_edges);
  // Marks the destinations (and numbers them); returns their in-edges.
  eid_t mark_destinations(std::span<const vid_t> dsts);
  // Notes s as a source: a new one that is no destination joins others_.
  void note_source(vid_t s) {
    const std::size_t word = static_cast<std::size_t>(s) / 64;
    const std::uint64_t bit = std::uint64_t{1} << (static_cast<std::size_t>(s) % 64);
    if (((is_dst_[word] | seen_[word]) & bit) != 0) return;
    seen_[word] |= bit;
    others_.push_back(s);
  }
  // Lists the destinations, then others_ in ascending id, and numbers the others.
  void list_marked(std::span<const vid_t> dsts, std::vector<vid_t>& sources);
  void forget(std::span<const vid_t> dsts, std::span<const vid_t> sources);
  vid_t local_of(vid_t v, vid_t num_dst) const;
  void build_in_parallel(std::span<const vid_t> dsts, Subgraph& out, int threads);
  // The out-edge view, out-edge weights and global ids of a block whose in-edge arrays are set.
  void finish_block(Subgraph& out, int threads);

  const CsrGraph& graph_;
  EdgeWeights weights_;
  std::span<const gid_t> global_id_;
  std::span<const vid_t> vertex_of_;
  std::vector<vid_t> local_;           // per vertex: its local id, where numbered through it
  std::vector<std::uint64_t> is_dst_;  // per vertex: one bit, set for the destinations
  std::vector<std::uint64_t> seen_;    // per vertex: one bit, set for the other sources
  std::vector<std::uint32_t> rank_;    // per bitmap word: the other sources in the words before it
  bool ranked_ = false;                // the other sources are numbered by seen_ and rank_, not local_
  std::vector<vid_t> others_;          // scratch: the non-destination sources
  eid_t parallel_edges_;
  std::vector<std::vector<std::uint64_t>> thread_seen_;  // scratch: each further thread's bitmap of sources
  std::vector<std::vector<eid_t>> thread_cursor_;        // scratch: per thread, the next out-edge of each source
};

// Reverse Cuthill-McKee-style order: breadth-first over in-neighbours, lower degree first, one component after
// another, starting each from its lowest-degree unvisited vertex. Neighbouring vertices get nearby positions.
std::vector<vid_t> locality_order(const CsrGraph& graph);

// The size of a candidate subgraph's k-hop in-closure: vertices[0] are its destinations, vertices[k] the
// vertices within k in-hops of them (a closure includes every vertex of the smaller ones), edges[k] the
// in-edges of the vertices of closure k. One hop is what a layer-by-layer step reads; L hops is what a subgraph
// pushed through all L layers at once (the recompute baseline) reads.
struct ClosureSize {
  std::vector<std::int64_t> vertices;
  std::vector<std::int64_t> edges;
};
using SubgraphCost = std::function<std::int64_t(const ClosureSize&)>;

// Cuts `order` into consecutive runs, each as long as cost(closure of the run) <= limit allows. A single
// vertex that already exceeds the limit throws nj::InputError with describe_minimum(the smallest limit that
// would work) as the message; without describe_minimum, it makes a run of its own. With one hop, `on_run` (where
// given) is called as each run closes, with the run and its one-hop closure (its vertices and their
// in-neighbours, each once), which the cut has marked anyway.
using RunClosure = std::function<void(std::span<const vid_t> run, std::span<const vid_t> closure)>;
std::vector<std::vector<vid_t>> partition_in_order(const CsrGraph& graph, std::span<const vid_t> order, int hops,
                                                   const SubgraphCost& cost, std::int64_t limit,
                                                   const std::function<std::string(std::int64_t)>& describe_minimum,
                                                   const RunClosure& on_run = {});

// The largest cost(closure of one vertex) over `vertices`: the smallest limit partition_in_order accepts.
std::int64_t largest_single_vertex_cost(const CsrGraph& graph, std::span<const vid_t> vertices, int hops,
                                        const SubgraphCost& cost);

namespace detail {
class ClosureTracker;
}  // namespace detail

// Lists the vertices of the `hops`-hop in-closure of destination sets, ordered so that every closure level is
// a prefix: the destinations first, then the vertices one hop away, and so on. Its per-vertex marks are kept
// between calls, so listing many small closures of a large graph costs only their own size.
class ClosureLister {
 public:
  ClosureLister(const CsrGraph& graph, int hops);
  ~ClosureLister();
  ClosureLister(const ClosureLister&) = delete;
  ClosureLister& operator=(const ClosureLister&) = delete;
  // Returns the order; level_sizes[k] is the size of closure k (a prefix of the order).
  std::vector<vid_t> list(std::span<const vid_t> dsts, std::vector<std::int64_t>& level_sizes);

 private:
  std::unique_ptr<detail::ClosureTracker> tracker_;
  std::vector<std::vector<vid_t>> added_;
};

}  // namespace nj
