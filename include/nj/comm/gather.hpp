#pragma once
// Rows that the ranks hold by global vertex id, collected on one rank: what a command that writes one file of every
// vertex needs (nj infer).
#include <span>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/core/matrix.hpp"
#include "nj/core/types.hpp"

namespace nj {

// Rows in ascending order of their vertex ids, and those ids.
struct GatheredRows {
  std::vector<gid_t> ids;
  Matrix rows;
};

// Every rank's `rows`, row i that of vertex ids[i], collected on rank `root` in ascending order of id (empty
// elsewhere). Ids are any distinct non-negative 64-bit values, `total` of them over all ranks; for a dataset's
// vertices 0..n-1, row v is vertex v. Every rank's rows have the same width. A collective: every rank calls it.
// The root takes one rank's rows at a time and then orders them in place: at its peak it holds the result, the
// largest rank's rows, and 8 bytes and a bit per vertex to order them. A message carries at most `piece_floats`
// floats (MPI counts in int): larger arrays go in pieces (tests lower it).
inline constexpr std::size_t kGatherPieceFloats = std::size_t{1} << 28;
GatheredRows gather_rows(Communicator& comm, std::span<const gid_t> ids, ConstRows rows, std::int64_t total,
                         int root = 0, std::size_t piece_floats = kGatherPieceFloats);

}  // namespace nj
