#pragma once
// nj generate on ranks that each hold a slice of the vertices: the dataset one process writes (nj/graph/generate.hpp),
// every array equal, without any rank holding the edges of more than its slice. Each rank draws an equal share of the pairs, sends each
// pair's two directed edges to the ranks whose slices hold their destinations, builds its rows' in-edges from what it
// receives, draws its rows' features and splits, and writes them into the file in turn.
#include <cstdint>
#include <string>

#include "nj/comm/communicator.hpp"
#include "nj/graph/generate.hpp"

namespace nj {

// What the job wrote, the same on every rank.
struct GeneratedGraph {
  std::int64_t vertices = 0;
  std::int64_t edges = 0;  // directed: each pair that is kept, both ways
  double edge_homophily = 0.0;
  std::int64_t train = 0;
  std::int64_t val = 0;
  std::int64_t test = 0;
};

// Writes the dataset of `options` to `path` (through `path`.partial, renamed once whole), the features dense and
// without a community order. Every rank calls it.
GeneratedGraph generate_in_parallel(const GeneratorOptions& options, const std::string& path, Communicator& comm);

}  // namespace nj
