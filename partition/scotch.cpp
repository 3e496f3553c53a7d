#include "scotch.hpp"

#include <fmt/format.h>
#include <mpi.h>
// scotch.h and ptscotch.h are those of the 64-bit flavour (the build's include path): SCOTCH_Num is int64_t.
#include <scotch.h>
// ptscotch.h after scotch.h and mpi.h, which it needs.
#include <ptscotch.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "nj/core/error.hpp"

namespace nj {
namespace {

static_assert(std::is_same_v<SCOTCH_Num, std::int64_t>, "nj links Scotch's 64-bit flavour (scotch-int64)");

void check(int status, const char* call) { NJ_REQUIRE(status == 0, "{} failed (Scotch returned {})", call, status); }

// Scotch reads its input arrays without writing them, but takes them through pointers to non-const.
SCOTCH_Num* in(std::span<const std::int64_t> values) { return const_cast<SCOTCH_Num*>(values.data()); }

// A weight array for Scotch, never null: to Scotch a null array means no weights, and it must mean the same on every
// rank, also on one whose part of the array is empty (a slice without edges, or without rows), or the distributed
// graph is refused as inconsistent.
SCOTCH_Num* weights_in(std::span<const std::int64_t> values) {
  static SCOTCH_Num none = 0;
  return values.empty() ? &none : in(values);
}

// The vertices to which the ranks coarsen the distributed graph before each gathers it and bipartitions it alone.
// SCOTCH_stratDgraphMapBuild stops at max(2000 x ranks, 10000), at most 100000. Where edges barely merge as a graph
// coarsens (random graphs), the gathered graph keeps up to vert^2 / 2 edges, on every rank: 184 MiB on each of 4 ranks
// for the generated 1M-vertex graph, growing with the ranks. At 2000 vertices it is at most 2M edges whatever the
// ranks, and the cuts were as good on up to 4 ranks (docs/performance.md, "Partitioning on many ranks").
constexpr int kGatheredVertices = 2000;

// PT-Scotch's parallel mapping strategy for SCOTCH_STRATQUALITY, as SCOTCH_stratDgraphMapBuild makes it, but for the
// coarsest graph's size (kGatheredVertices), which that builder does not take. In Scotch's strategy language:
// recursive bipartitioning (r), each bipartition multilevel (m) over the ranks, refined in a band around the
// frontier (b) by diffusion (d), then by Fiduccia-Mattheyses on the band gathered onto every rank, the best kept
// (q, f), then made exact (x); the coarsest graph, and each part once it is on one rank, bipartitioned sequentially,
// twice (|), keeping the better.
std::string parallel_strategy() {
  const std::string balance = fmt::format("{:f}", kPartImbalance);
  const std::string refine = fmt::format("f{{bal={},move=80}}", balance);
  const std::string sequential =
      fmt::format("m{{vert=80,low=h{{pass=10}}{0},asc=b{{bnd=(d{{pass=40}}|){0},org={0}}}}}", refine);
  const std::string sequential_best = fmt::format("({0}|{0})", sequential);
  const std::string gathered_refine = fmt::format("q{{strat=f}}x{{bal={}}}", balance);
  const std::string parallel =
      fmt::format("m{{vert={},asc=b{{bnd=(d{{pass=40}}|){},org={}}},low=q{{strat={}}},seq=q{{strat={}}}}}",
                  kGatheredVertices, gathered_refine, gathered_refine, sequential_best, sequential_best);
  return fmt::format("r{{bal={0},sep={1},seq=r{{bal={0},poli=S,sep={2}}}}}", balance, parallel, sequential_best);
}

// Owns a strategy for `parts` on `ranks` processes (one: Scotch's sequential strategy), favouring the cut over speed.
// Its memory is that of its coarser graphs: where edges barely merge as a graph coarsens (random graphs), each level
// holds nearly as many as the graph itself (docs/performance.md, "Partitioning on many ranks").
class Strategy {
 public:
  Strategy(int parts, int ranks) {
    check(SCOTCH_stratInit(&strategy_), "SCOTCH_stratInit");
    if (ranks > 1) {
      check(SCOTCH_stratDgraphMap(&strategy_, parallel_strategy().c_str()), "SCOTCH_stratDgraphMap");
    } else {
      check(SCOTCH_stratGraphMapBuild(&strategy_, SCOTCH_STRATQUALITY, parts, kPartImbalance),
            "SCOTCH_stratGraphMapBuild");
    }
  }
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;
  ~Strategy() { SCOTCH_stratExit(&strategy_); }
  SCOTCH_Strat* get() { return &strategy_; }

 private:
  SCOTCH_Strat strategy_{};
};

// The threads a context of Scotch's runs on: as many as the cores (Scotch's default), or one.
enum class ScotchThreads { kCores, kOne };

// Owns a context of Scotch's with its own generator, seeded, and deterministic (the same result whatever the threads'
// timing): a graph bound to it partitions the same way every time for one seed (and number of ranks).
class Context {
 public:
  Context(std::uint64_t seed, ScotchThreads threads) {
    check(SCOTCH_contextInit(&context_), "SCOTCH_contextInit");
    if (threads == ScotchThreads::kOne) {
      check(SCOTCH_contextThreadSpawn(&context_, 1, nullptr), "SCOTCH_contextThreadSpawn");
    }
    check(SCOTCH_contextOptionSetNum(&context_, SCOTCH_OPTIONNUMDETERMINISTIC, 1), "SCOTCH_contextOptionSetNum");
    // A generator of the context's own, so that seeding it leaves the library's shared one alone.
    check(SCOTCH_contextRandomClone(&context_), "SCOTCH_contextRandomClone");
    SCOTCH_contextRandomSeed(&context_, static_cast<SCOTCH_Num>(seed & 0x7FFFFFFFFFFFFFFFULL));
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context() { SCOTCH_contextExit(&context_); }
  SCOTCH_Context* get() { return &context_; }

 private:
  SCOTCH_Context context_{};
};

// A Scotch graph object (SCOTCH_Graph or SCOTCH_Dgraph) freed with its exit function however the scope ends.
template <typename Graph, void (*Exit)(Graph*)>
struct Owned {
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (initialised) Exit(&graph);
  }
  Graph graph{};
  bool initialised = false;
};

// Isolated vertices that add up to `padding`, none heavier than `most`.
std::vector<SCOTCH_Num> fillers(std::int64_t padding, std::int64_t most) {
  std::vector<SCOTCH_Num> weights;
  const std::int64_t count = (padding + most - 1) / most;
  for (std::int64_t i = 0; i < count; ++i) weights.push_back(padding / count + (i < padding % count ? 1 : 0));
  return weights;
}

// A slice's vertex arrays, copied, and after them `fillers` (vertices without edges, of those weights): the vertex
// arrays of the graph Scotch partitions, with the slice's edges.
struct PaddedVertices {
  PaddedVertices(const SliceAdjacency& slice, std::span<const std::int64_t> weights,
                 std::span<const SCOTCH_Num> fillers) {
    offsets.reserve(slice.offsets.size() + fillers.size());
    loads.reserve(weights.size() + fillers.size() + 1);  // never null
    offsets.assign(slice.offsets.begin(), slice.offsets.end());
    loads.assign(weights.begin(), weights.end());
    for (const SCOTCH_Num filler : fillers) {
      offsets.push_back(offsets.back());
      loads.push_back(filler);
    }
  }
  SCOTCH_Num count() const { return static_cast<SCOTCH_Num>(loads.size()); }

  std::vector<SCOTCH_Num> offsets;
  std::vector<SCOTCH_Num> loads;
};

// This process's rank: 0 where it is the only one (MPI need not be up).
int this_rank(int ranks) {
  int rank = 0;
  if (ranks > 1) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Scotch's parts of the padded vertices, on one process or several.
std::vector<SCOTCH_Num> whole_graph_parts(const SliceAdjacency& slice, const PaddedVertices& padded, std::int64_t arcs,
                                          const ScotchTargets& targets, std::uint64_t seed) {
  Owned<SCOTCH_Graph, SCOTCH_graphExit> graph;
  Owned<SCOTCH_Graph, SCOTCH_graphExit> bound;
  Context context(seed, ScotchThreads::kCores);
  check(SCOTCH_graphInit(&graph.graph), "SCOTCH_graphInit");
  graph.initialised = true;
  check(SCOTCH_graphBuild(&graph.graph, 0, padded.count(), padded.offsets.data(), nullptr, padded.loads.data(), nullptr,
                          arcs, in(slice.neighbours), weights_in(slice.edge_weights)),
        "SCOTCH_graphBuild");
  check(SCOTCH_graphInit(&bound.graph), "SCOTCH_graphInit");
  bound.initialised = true;
  check(SCOTCH_contextBindGraph(context.get(), &graph.graph, &bound.graph), "SCOTCH_contextBindGraph");
  Strategy strategy(targets.parts, 1);
  std::vector<SCOTCH_Num> part(static_cast<std::size_t>(padded.count()));
  check(SCOTCH_graphPart(&bound.graph, targets.parts, strategy.get(), part.data()), "SCOTCH_graphPart");
  return part;
}

std::vector<SCOTCH_Num> distributed_parts(const SliceAdjacency& slice, const PaddedVertices& padded, std::int64_t arcs,
                                          const ScotchTargets& targets, std::uint64_t seed, int ranks) {
  Owned<SCOTCH_Dgraph, SCOTCH_dgraphExit> graph;
  Owned<SCOTCH_Dgraph, SCOTCH_dgraphExit> bound;
  // One thread: PT-Scotch's threads fold halves of the graph at once, each calling MPI, which nj initialises for its
  // main thread only (MPI_THREAD_FUNNELED). Two folds at once corrupted Open MPI's heap ("free(): invalid pointer" in
  // MPI_Waitall under dgraphFold2).
  Context context(seed, ScotchThreads::kOne);
  check(SCOTCH_dgraphInit(&graph.graph, MPI_COMM_WORLD), "SCOTCH_dgraphInit");
  graph.initialised = true;
  // A rank without edges passes arrays all the same (weights_in), and two of them: Scotch takes one array for both the
  // neighbours and their weights for no edge weights, which must be so on every rank or on none.
  static SCOTCH_Num no_neighbour = 0;
  check(
      SCOTCH_dgraphBuild(&graph.graph, 0, padded.count(), padded.count(), in(padded.offsets), nullptr, in(padded.loads),
                         nullptr, arcs, arcs, slice.neighbours.empty() ? &no_neighbour : in(slice.neighbours), nullptr,
                         weights_in(slice.edge_weights)),
      "SCOTCH_dgraphBuild");
  check(SCOTCH_dgraphInit(&bound.graph, MPI_COMM_WORLD), "SCOTCH_dgraphInit");
  bound.initialised = true;
  check(SCOTCH_contextBindDgraph(context.get(), &graph.graph, &bound.graph), "SCOTCH_contextBindDgraph");
  Strategy strategy(targets.parts, ranks);
  std::vector<SCOTCH_Num> part(static_cast<std::size_t>(padded.count()));
  check(SCOTCH_dgraphPart(&bound.graph, targets.parts, strategy.get(), part.data()), "SCOTCH_dgraphPart");
  return part;
}

}  // namespace

std::vector<std::int32_t> scotch_parts(const SliceAdjacency& slice, std::span<const std::int64_t> weights,
                                       const ScotchTargets& targets, std::uint64_t seed, int ranks) {
  NJ_EXPECTS(static_cast<std::int64_t>(weights.size()) == slice.rows(), "{} weights for {} vertices", weights.size(),
             slice.rows());
  NJ_EXPECTS(slice.edge_weights.size() == slice.neighbours.size(), "{} edge weights for {} adjacency entries",
             slice.edge_weights.size(), slice.neighbours.size());
  NJ_EXPECTS(targets.padding >= 0 && targets.most_filler > 0, "padding {} in fillers of at most {}", targets.padding,
             targets.most_filler);
  if (targets.parts <= 1) return std::vector<std::int32_t>(static_cast<std::size_t>(slice.rows()), 0);
  // The last rank adds the fillers, so that no other vertex's number changes.
  const PaddedVertices padded(
      slice, weights,
      this_rank(ranks) == ranks - 1 ? fillers(targets.padding, targets.most_filler) : std::vector<SCOTCH_Num>{});
  const auto arcs = static_cast<std::int64_t>(slice.neighbours.size());
  const std::vector<SCOTCH_Num> part = ranks > 1 ? distributed_parts(slice, padded, arcs, targets, seed, ranks)
                                                 : whole_graph_parts(slice, padded, arcs, targets, seed);
  return {part.begin(), part.begin() + slice.rows()};
}

}  // namespace nj
