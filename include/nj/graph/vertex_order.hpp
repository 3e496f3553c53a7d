#pragma once
// The order of a rank's owned vertices. Aggregation gathers the rows of a destination's in-neighbours; when
// vertices that share neighbours sit next to each other, those rows are still in cache for the next
// destination. Renumbering changes only local ids: every vertex keeps its global id, which addresses its
// dropout masks and its place in every output, so training under any order is the same training up to the
// order of floating-point sums.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nj/graph/shard.hpp"

namespace nj {

enum class VertexOrder {
  kInput,      // ascending global id, as stored
  kCommunity,  // communities of at most kCommunityVertices together, found by label propagation
};
const char* to_string(VertexOrder order);
// Whether loading in this order renumbers the owned vertices (every order but kInput), which the loading forecast
// counts (RankShape::renumbered).
constexpr bool renumbers(VertexOrder order) { return order != VertexOrder::kInput; }
// "input" or "community"; anything else is an InputError.
VertexOrder parse_vertex_order(const std::string& text);

// The largest community kCommunity forms: 8192 rows of 128 floats are 4 MiB, which the last level cache holds
// while its destinations gather them (on a 200k-vertex graph, 4096 left a third more of the gather time).
inline constexpr vid_t kCommunityVertices = 8192;

// The version of the community search that a stored order (store_community_order) records: raised whenever
// communities() or owned_order() would order a graph differently, so that a file's order from an older search is
// searched for again rather than used.
inline constexpr std::int64_t kCommunityOrderVersion = 1;

// The community of every owned vertex (a label: a vertex id its members share), each of at most
// kCommunityVertices vertices: size-capped label propagation over the edges between owned vertices, a few
// rounds in which each vertex joins the label most of its in-neighbours carry (ties to its own, then to the
// smaller label) unless that community is full. A round sweeps fixed chunks of consecutive ids on OpenMP's
// threads, each in id order; a chunk sees its own moves at once and the others' as of the round's start.
// Deterministic: the same communities for any number of threads.
std::vector<vid_t> communities(const LocalGraph& local);

// The owned vertices in `order`: result[new local id] = old local id. kCommunity lays the communities out in
// the order of their smallest vertex, and each one's vertices in ascending id.
std::vector<vid_t> owned_order(const LocalGraph& local, VertexOrder order);

// Renumbers the owned vertices so that new local id i is old local id order[i] (a permutation of the owned
// ids). Mirrors keep their ids; in-edge sources stay ascending; the rows each peer exchanges keep their order
// (ascending global id), so the ranks still agree.
void renumber_owned(LocalGraph& local, std::span<const vid_t> order);
// The same for a shard: its graph and the rows of its features, labels and masks.
void renumber_owned(Shard& shard, std::span<const vid_t> order);

// Renumbers the owned vertices in owned_order(order); kInput leaves them as they are. Where kCommunity's order is
// given (`stored`: the dataset file's, see store_community_order) it is used instead of searching for it; it must
// be a permutation of the owned vertices. The shard's own stored order is used, and then cleared.
void order_vertices(LocalGraph& local, VertexOrder order, std::span<const vid_t> stored = {});
void order_vertices(Shard& shard, VertexOrder order);

// Sets dataset.community_order to owned_order(kCommunity) of the whole graph, what a single-process run of it
// would compute (the same on any number of threads), for nj convert and nj generate to store with the file.
void store_community_order(Dataset& dataset);

}  // namespace nj
