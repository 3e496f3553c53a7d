#pragma once
// Rows that the ranks hold by global vertex id, collected on one rank: what a command that writes one file of every
// vertex needs (nj infer).
#include <span>

#include "nj/comm/communicator.hpp"
#include "nj/core/matrix.hpp"
#include "nj/core/types.hpp"

namespace nj {

// Every rank's `rows`, row i that of vertex ids[i], placed at row ids[i] of a matrix of `total` rows on rank `root`
// (an empty matrix elsewhere). Each id in [0, total) must come from exactly one rank, and every rank's rows have the
// same width. A collective: every rank calls it. The root takes one rank's rows at a time, so it holds the result
// and the largest rank's rows, never every rank's at once. A message carries at most `piece_floats` floats (MPI
// counts in int): larger arrays go in pieces (tests lower it).
inline constexpr std::size_t kGatherPieceFloats = std::size_t{1} << 28;
Matrix gather_rows(Communicator& comm, std::span<const gid_t> ids, ConstRows rows, std::int64_t total, int root = 0,
                   std::size_t piece_floats = kGatherPieceFloats);

}  // namespace nj
