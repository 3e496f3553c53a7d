#include "nj/graph/mean_part.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "nj/core/error.hpp"

namespace nj {
namespace {

// In-edges spread evenly over the owned vertices, their sources drawn, then every mirror placed once.
CsrGraph part_graph(const PartShape& shape, std::uint64_t seed) {
  const std::int64_t local = shape.owned + shape.mirrors;
  CsrGraph graph;
  graph.offsets.resize(static_cast<std::size_t>(local) + 1, shape.in_edges);
  for (std::int64_t v = 0; v <= shape.owned; ++v) {
    graph.offsets[static_cast<std::size_t>(v)] =
        v * (shape.in_edges / shape.owned) + std::min(v, shape.in_edges % shape.owned);
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<vid_t> any(0, static_cast<vid_t>(local - 1));
  graph.sources.resize(static_cast<std::size_t>(shape.in_edges));
  for (vid_t& source : graph.sources) source = any(rng);
  // Mirror k is the source of edge k * in_edges / mirrors: spread over the owned vertices.
  for (std::int64_t k = 0; k < shape.mirrors; ++k) {
    graph.sources[static_cast<std::size_t>(k * shape.in_edges / shape.mirrors)] = static_cast<vid_t>(shape.owned + k);
  }
  for (std::int64_t v = 0; v < shape.owned; ++v) {
    std::sort(graph.sources.begin() + graph.offsets[static_cast<std::size_t>(v)],
              graph.sources.begin() + graph.offsets[static_cast<std::size_t>(v) + 1]);
  }
  return graph;
}

// Mirror k is owned by peer k mod peers; peer i mirrors as many owned rows, every (owned / count)-th from i on.
std::vector<PeerRows> part_peers(const PartShape& shape) {
  std::vector<PeerRows> peers(static_cast<std::size_t>(shape.mirrors > 0 ? shape.peers : 0));
  for (std::size_t i = 0; i < peers.size(); ++i) {
    PeerRows& peer = peers[i];
    peer.peer = static_cast<int>(i) + 1;
    for (std::int64_t k = static_cast<std::int64_t>(i); k < shape.mirrors; k += shape.peers) {
      peer.receive.push_back(static_cast<vid_t>(shape.owned + k));
    }
    const auto count = static_cast<std::int64_t>(peer.receive.size());
    for (std::int64_t j = 0; j < count; ++j) {
      peer.send.push_back(static_cast<vid_t>((j * shape.owned / count + static_cast<std::int64_t>(i)) % shape.owned));
    }
    std::sort(peer.send.begin(), peer.send.end());
    peer.send.erase(std::unique(peer.send.begin(), peer.send.end()), peer.send.end());
  }
  return peers;
}

}  // namespace

LocalGraph mean_part_graph(const PartShape& shape, std::uint64_t seed) {
  NJ_REQUIRE(shape.owned > 0 && shape.mirrors >= 0 && shape.in_edges >= shape.mirrors &&
                 shape.owned + shape.mirrors <= std::numeric_limits<vid_t>::max(),
             "a part of {} vertices, {} mirrors and {} in-edges: it needs a vertex, at most {} vertices in all, and "
             "an in-edge for each mirror",
             shape.owned, shape.mirrors, shape.in_edges, std::numeric_limits<vid_t>::max());
  NJ_REQUIRE(shape.mirrors == 0 || shape.peers >= 1, "a part with {} mirrors needs a peer to own them", shape.mirrors);
  LocalGraph local;
  local.graph = part_graph(shape, seed);
  local.num_owned = static_cast<vid_t>(shape.owned);
  const auto n = static_cast<std::size_t>(local.num_local());
  local.global_id.resize(n);
  std::iota(local.global_id.begin(), local.global_id.end(), gid_t{0});
  local.global_in_degree.assign(n, shape.in_edges / shape.owned);
  for (vid_t v = 0; v < local.num_owned; ++v)
    local.global_in_degree[static_cast<std::size_t>(v)] = local.graph.in_degree(v);
  local.global_self_loop.assign(n, 0);
  local.peers = part_peers(shape);
  return local;
}

}  // namespace nj
