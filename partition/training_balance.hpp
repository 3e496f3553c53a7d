#pragma once
// Scotch balances one weight a vertex, so its parts may hold the training vertices unevenly (up to 1.5 times the mean
// on Cora at 8 parts), where METIS balances both counts. This evens them out afterwards: parts above the mean give
// training vertices to parts below it, each in exchange for a vertex outside the training split, so that the vertex
// counts stay as Scotch balanced them (training_exchanges, nj/partition/parallel.hpp, says which parts and how many).
// The vertices that move are those with the most neighbours on the side they go to.
#include <cstdint>
#include <span>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "scotch.hpp"

namespace nj {

// `part`: the parts of the slice's vertices, changed in place; `training`: each vertex's training flag;
// `neighbour_part`: the part of each entry of adjacency.neighbours. A collective of every rank.
void balance_training_vertices(std::vector<std::int32_t>& part, std::span<const std::uint8_t> training,
                               const SliceAdjacency& adjacency, std::span<const std::int32_t> neighbour_part, int parts,
                               Communicator& comm);

}  // namespace nj
