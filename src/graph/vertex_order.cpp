#include "nj/graph/vertex_order.hpp"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <numeric>
#include <utility>

#include "nj/core/enum_names.hpp"
#include "nj/core/error.hpp"
#include "nj/core/huge_pages.hpp"
#include "nj/core/stopwatch.hpp"

namespace nj {
namespace {

// Rounds of label propagation: most vertices settle in the first two, and each round reads every edge once.
constexpr int kPropagationRounds = 3;

// A round sweeps chunks of this many consecutive vertices, a chunk to a thread at a time. Within its chunk a
// sweep sees its own moves at once, as a sequential sweep would; other chunks' labels it reads as they were when
// the round began. The chunks depend on the vertex count alone, so the communities do not depend on the threads
// (and a graph of one chunk is swept exactly as sequentially).
constexpr vid_t kChunkVertices = vid_t{1} << 16;

// A chunk's changes to community sizes in this round, by label. A move touches two labels, so a chunk touches at
// most 2 * kChunkVertices: an open-addressing table of twice that stays at most half full, 2 MiB a thread however
// large the graph (a count per label would be a graph-sized array per thread).
class SizeChanges {
 public:
  SizeChanges() : slots_(kSlots) {}
  void clear() { std::fill(slots_.begin(), slots_.end(), Slot{}); }
  vid_t find(vid_t label) const {
    for (std::size_t i = home(label);; i = (i + 1) & (kSlots - 1)) {
      if (slots_[i].label == label) return slots_[i].change;
      if (slots_[i].label < 0) return 0;
    }
  }
  void add(vid_t label, vid_t change) {
    std::size_t i = home(label);
    while (slots_[i].label >= 0 && slots_[i].label != label) i = (i + 1) & (kSlots - 1);
    slots_[i].label = label;
    slots_[i].change += change;
  }

 private:
  static constexpr std::size_t kSlots = 4 * static_cast<std::size_t>(kChunkVertices);
  static constexpr unsigned kShift = 32 - std::countr_zero(kSlots);
  struct Slot {
    vid_t label = -1;
    vid_t change = 0;
  };
  static std::size_t home(vid_t label) { return (static_cast<std::uint32_t>(label) * 0x9E3779B1U) >> kShift; }
  std::vector<Slot> slots_;
};

// One vertex's votes: a count per label of its in-neighbours, in an open-addressing table of more than twice its
// degree. A count per label over all vertices would be one more random access per edge (labels are still mostly
// distinct in the first round); a table the size of the degree stays in cache.
class Votes {
 public:
  explicit Votes(eid_t max_degree) : slots_(std::bit_ceil(2 * static_cast<std::size_t>(max_degree) + 2)) {
    voted_.reserve(static_cast<std::size_t>(max_degree));
  }
  void start(eid_t degree) {
    bits_ = static_cast<unsigned>(std::bit_width(2 * static_cast<std::size_t>(degree) + 1));
    mask_ = (std::size_t{1} << bits_) - 1;
  }
  void add(vid_t label) {
    Slot& slot = slots_[find(label)];
    if (slot.votes++ == 0) {
      slot.label = label;
      voted_.push_back(&slot - slots_.data());
    }
  }
  vid_t of(vid_t label) const { return slots_[find(label)].votes; }
  // Calls f(label, votes) for each label voted for.
  template <class F>
  void for_each(F&& f) const {
    for (const std::ptrdiff_t i : voted_)
      f(slots_[static_cast<std::size_t>(i)].label, slots_[static_cast<std::size_t>(i)].votes);
  }
  void clear() {
    for (const std::ptrdiff_t i : voted_) slots_[static_cast<std::size_t>(i)] = Slot{};
    voted_.clear();
  }

 private:
  struct Slot {
    vid_t label = -1;
    vid_t votes = 0;
  };
  std::size_t find(vid_t label) const {
    std::size_t i = (static_cast<std::uint32_t>(label) * 0x9E3779B97F4A7C15ULL) >> (64U - bits_);
    while (slots_[i].votes != 0 && slots_[i].label != label) i = (i + 1) & mask_;
    return i;
  }
  std::vector<Slot> slots_;
  std::vector<std::ptrdiff_t> voted_;
  unsigned bits_ = 0;
  std::size_t mask_ = 0;
};

// One thread's scratch, sized before the parallel region so that nothing in it allocates (or throws).
struct SweepScratch {
  explicit SweepScratch(eid_t max_degree) : votes(max_degree) {}
  SizeChanges changes;
  Votes votes;
};

// Sweeps vertices [begin, end) in id order: each joins the label most of its in-neighbours carry (its own wins a
// tie, then the smaller label), unless that community is full by the sizes at the round's start and this chunk's
// own moves. Writes only label[begin, end).
void sweep_chunk(const CsrGraph& g, vid_t n, vid_t begin, vid_t end, std::span<vid_t> label,
                 std::span<const vid_t> previous, std::span<const vid_t> size, SweepScratch& scratch) {
  // Which array holds a label is a coin toss where the chunks are few: chosen without a branch.
  const auto label_of = [&](vid_t s) -> const vid_t& {
    const bool here = static_cast<std::uint32_t>(s - begin) < static_cast<std::uint32_t>(end - begin);
    return (here ? label.data() : previous.data())[static_cast<std::size_t>(s)];
  };
  scratch.changes.clear();
  Votes& votes = scratch.votes;
  const auto full = [&](vid_t l) {
    return size[static_cast<std::size_t>(l)] + scratch.changes.find(l) >= kCommunityVertices;
  };
  for (vid_t v = begin; v < end; ++v) {
    // The labels are a random gather: ask for the next vertex's while this one votes.
    if (v + 1 < end) {
      for (const vid_t s : g.in_neighbors(v + 1)) {
        if (s < n) __builtin_prefetch(&label_of(s));
      }
    }
    votes.start(g.in_degree(v));
    for (const vid_t s : g.in_neighbors(v)) {
      if (s < n && s != v) votes.add(label_of(s));  // mirrors are not renumbered
    }
    // The label with the most votes, unless its community is full; the size is a random access, so only the
    // winner's is looked up first (in the first round, when every label is still distinct, each smaller label
    // that ties would be).
    const vid_t current = label[static_cast<std::size_t>(v)];
    const auto best_of = [&](bool unless_full) {
      vid_t best = current;
      vid_t best_votes = votes.of(current);
      votes.for_each([&](vid_t l, vid_t count) {
        if (l == current || count < best_votes || (count == best_votes && (best == current || l > best))) return;
        if (!unless_full || !full(l)) {
          best = l;
          best_votes = count;
        }
      });
      return best;
    };
    vid_t best = best_of(false);
    if (best != current && full(best)) best = best_of(true);
    votes.clear();
    if (best != current) {
      scratch.changes.add(current, -1);
      scratch.changes.add(best, 1);
      label[static_cast<std::size_t>(v)] = best;
    }
  }
}

}  // namespace

std::vector<vid_t> communities(const LocalGraph& local) {
  const vid_t n = local.num_owned;
  const CsrGraph& g = local.graph;
  // Every edge reads a label at random: the arrays sit on huge pages, where each read costs no page walk.
  HugeVector<vid_t> label(static_cast<std::size_t>(n));
  std::iota(label.begin(), label.end(), vid_t{0});
  HugeVector<vid_t> size(static_cast<std::size_t>(n), 1);
  HugeVector<vid_t> previous(static_cast<std::size_t>(n));
  eid_t max_degree = 0;
  for (vid_t v = 0; v < n; ++v) max_degree = std::max(max_degree, g.in_degree(v));
  const vid_t chunks = (n + kChunkVertices - 1) / kChunkVertices;
  const int threads = std::max(1, std::min(omp_get_max_threads(), static_cast<int>(chunks)));
  std::vector<SweepScratch> scratch;
  scratch.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) scratch.emplace_back(max_degree);
  for (int round = 0; round < kPropagationRounds; ++round) {
    const auto round_start = std::chrono::steady_clock::now();
    std::copy(label.begin(), label.end(), previous.begin());
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (vid_t c = 0; c < chunks; ++c) {
      sweep_chunk(g, n, c * kChunkVertices, std::min(n, (c + 1) * kChunkVertices), label, previous, size,
                  scratch[static_cast<std::size_t>(omp_get_thread_num())]);
    }
    // Chunks that filled the same community together may have overfilled it: the moves count in id order, and one
    // into a community already full is undone, so every community stays within the cap.
    eid_t moves = 0;
    for (vid_t v = 0; v < n; ++v) {
      const vid_t from = previous[static_cast<std::size_t>(v)];
      const vid_t to = label[static_cast<std::size_t>(v)];
      if (to == from) continue;
      if (size[static_cast<std::size_t>(to)] < kCommunityVertices) {
        --size[static_cast<std::size_t>(from)];
        ++size[static_cast<std::size_t>(to)];
        ++moves;
      } else {
        label[static_cast<std::size_t>(v)] = from;
      }
    }
    spdlog::debug("communities: round {} moved {} of {} vertices in {:.2f} s", round + 1, moves, n,
                  seconds_since(round_start));
    if (moves == 0) break;
  }
  return {label.begin(), label.end()};
}

namespace {

// Permutes rows [0, order.size()) of a row-major array in place: row i becomes old row order[i].
template <class T>
void permute_rows(T* data, std::int64_t cols, std::span<const vid_t> order) {
  std::vector<bool> placed(order.size(), false);
  std::vector<T> held(static_cast<std::size_t>(cols));
  for (std::size_t start = 0; start < order.size(); ++start) {
    if (placed[start]) continue;
    // Follow the cycle through start: each position takes the row its order names.
    std::copy_n(data + static_cast<std::int64_t>(start) * cols, cols, held.begin());
    std::size_t i = start;
    while (true) {
      placed[i] = true;
      const auto from = static_cast<std::size_t>(order[i]);
      if (from == start) {
        std::copy(held.begin(), held.end(), data + static_cast<std::int64_t>(i) * cols);
        break;
      }
      std::copy_n(data + static_cast<std::int64_t>(from) * cols, cols, data + static_cast<std::int64_t>(i) * cols);
      i = from;
    }
  }
}

// The same for one value per row, through a copy: following cycles is a chain of cache misses, while a copy's
// gathers are independent (and a few bytes per vertex).
template <class T>
void permute_prefix(std::vector<T>& values, std::span<const vid_t> order) {
  std::vector<T> permuted(order.size());
#pragma omp parallel for schedule(static) if (order.size() > (std::size_t{1} << 20))
  for (std::size_t i = 0; i < order.size(); ++i) permuted[i] = values[static_cast<std::size_t>(order[i])];
  std::copy(permuted.begin(), permuted.end(), values.begin());
}

}  // namespace

constexpr EnumNames<VertexOrder, 2> kVertexOrderNames{
    "vertex order", {{{VertexOrder::kCommunity, "community"}, {VertexOrder::kInput, "input"}}}};

const char* to_string(VertexOrder order) { return kVertexOrderNames.name(order); }
VertexOrder parse_vertex_order(const std::string& text) { return kVertexOrderNames.parse(text); }

std::vector<vid_t> owned_order(const LocalGraph& local, VertexOrder order) {
  std::vector<vid_t> result(static_cast<std::size_t>(local.num_owned));
  std::iota(result.begin(), result.end(), vid_t{0});
  if (order == VertexOrder::kInput) return result;
  const std::vector<vid_t> label = communities(local);
  // Communities in the order of their smallest vertex, then ascending ids within each: a counting sort by the
  // community's rank, stable as it places the vertices in id order.
  std::vector<vid_t> rank(label.size(), -1);
  std::vector<vid_t> next;  // per rank, where its next vertex goes; first its size
  for (const vid_t l : label) {
    vid_t& r = rank[static_cast<std::size_t>(l)];
    if (r < 0) {
      r = static_cast<vid_t>(next.size());
      next.push_back(0);
    }
    ++next[static_cast<std::size_t>(r)];
  }
  std::exclusive_scan(next.begin(), next.end(), next.begin(), vid_t{0});
  for (vid_t v = 0; v < local.num_owned; ++v) {
    const vid_t r = rank[static_cast<std::size_t>(label[static_cast<std::size_t>(v)])];
    result[static_cast<std::size_t>(next[static_cast<std::size_t>(r)]++)] = v;
  }
  return result;
}

void renumber_owned(LocalGraph& local, std::span<const vid_t> order) {
  const vid_t owned = local.num_owned;
  NJ_EXPECTS(static_cast<vid_t>(order.size()) == owned, "an order of {} vertices for {} owned", order.size(), owned);
  // Every in-edge gathers its source's new id at random (on huge pages: no page walk per gather).
  HugeVector<vid_t> new_of(static_cast<std::size_t>(local.num_local()), -1);
  for (vid_t i = 0; i < owned; ++i) {
    const vid_t old = order[static_cast<std::size_t>(i)];
    NJ_EXPECTS(old >= 0 && old < owned && new_of[static_cast<std::size_t>(old)] < 0,
               "the order is not a permutation of the owned vertices (at {})", i);
    new_of[static_cast<std::size_t>(old)] = i;
  }
  for (vid_t v = owned; v < local.num_local(); ++v) new_of[static_cast<std::size_t>(v)] = v;

  // Offsets first, so that each vertex's in-edges can then be renumbered and sorted on any thread.
  const CsrGraph& g = local.graph;
  CsrGraph renumbered;
  renumbered.offsets.assign(g.offsets.size(), 0);
  for (vid_t i = 0; i < g.num_vertices(); ++i) {
    const eid_t degree = i < owned ? g.in_degree(order[static_cast<std::size_t>(i)]) : 0;
    renumbered.offsets[static_cast<std::size_t>(i) + 1] = renumbered.offsets[static_cast<std::size_t>(i)] + degree;
  }
  renumbered.sources.resize(static_cast<std::size_t>(renumbered.offsets.back()));
  // In old id order: the old lists are read in one sweep and each lands, renumbered and sorted, at its new place,
  // a store the loop need not wait on. Read in new order instead, every list is a load it waits on.
#pragma omp parallel for schedule(dynamic, 4096) if (g.num_edges() > (eid_t{1} << 20))
  for (vid_t v = 0; v < owned; ++v) {
    vid_t* out =
        renumbered.sources.data() + renumbered.offsets[static_cast<std::size_t>(new_of[static_cast<std::size_t>(v)])];
    vid_t* end = out;
    for (const vid_t s : g.in_neighbors(v)) *end++ = new_of[static_cast<std::size_t>(s)];
    std::sort(out, end);
  }
  local.graph = std::move(renumbered);

  permute_prefix(local.global_id, order);
  permute_prefix(local.global_in_degree, order);
  permute_prefix(local.global_self_loop, order);
  for (PeerRows& peer : local.peers) {
    for (vid_t& v : peer.send) v = new_of[static_cast<std::size_t>(v)];
  }
}

void renumber_owned(Shard& shard, std::span<const vid_t> order) {
  renumber_owned(shard.local, order);
  permute_rows(shard.features.row(0), shard.features.cols(), order);
  permute_prefix(shard.labels, order);
  permute_prefix(shard.train_mask, order);
  permute_prefix(shard.val_mask, order);
  permute_prefix(shard.test_mask, order);
  // Last: `order` may be the shard's own stored order, whose ids are no longer the shard's.
  std::vector<vid_t>().swap(shard.community_order);
}

namespace {

// Renumbers by the stored order where there is one (checked to fit), else by the one searched for.
template <class Renumberable>
void renumber_in(Renumberable& target, const LocalGraph& local, VertexOrder order, std::span<const vid_t> stored) {
  if (order != VertexOrder::kCommunity || stored.empty()) {
    renumber_owned(target, owned_order(local, order));
    return;
  }
  NJ_REQUIRE(stored.size() == static_cast<std::size_t>(local.num_owned),
             "the given community order lists {} vertices, but {} are owned", stored.size(), local.num_owned);
  spdlog::debug("vertex order: the stored community order used");
  renumber_owned(target, stored);
}

}  // namespace

void order_vertices(LocalGraph& local, VertexOrder order, std::span<const vid_t> stored) {
  if (renumbers(order)) renumber_in(local, local, order, stored);
}

void order_vertices(Shard& shard, VertexOrder order) {
  // Used once: after this the shard's ids are no longer those the stored order lists.
  const std::vector<vid_t> stored = std::exchange(shard.community_order, {});
  if (renumbers(order)) renumber_in(shard, shard.local, order, stored);
}

void store_community_order(Dataset& dataset) {
  // The search needs the graph as a local one: lent to it and taken back, not copied.
  LocalGraph local = whole_local_graph(std::move(dataset.graph));
  dataset.community_order = owned_order(local, VertexOrder::kCommunity);
  dataset.graph = std::move(local.graph);
}

}  // namespace nj
