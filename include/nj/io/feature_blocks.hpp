#pragma once
// Feature rows passed on a block at a time, so that a writer never holds them all: nj convert streams a feature file,
// or the random features it draws, into the dataset file this way (docs/convert.md, "What a conversion holds").
#include <cstdint>
#include <functional>

#include "nj/core/matrix.hpp"

namespace nj {

// Takes rows [first_row, first_row + block.rows) of the whole.
using FeatureBlockSink = std::function<void(std::int64_t first_row, ConstRows block)>;

// Feature rows whose shape is known before any row is made. `for_each_block` gives every row once, in order, in blocks
// of at most `block_rows` rows (at least 1), valid only during the call; every pass gives the same values, so that a
// writer may pass over them twice.
struct FeatureBlocks {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::function<void(std::int64_t block_rows, const FeatureBlockSink& sink)> for_each_block;
  // The entries that are not zero, where the source knows them without a pass over its rows; -1 where it does not.
  std::int64_t nonzeros = -1;
};

// What a block of rows may take, 16 MiB: large enough that writing it costs little beside the rows themselves.
inline constexpr std::int64_t kFeatureBlockBytes = std::int64_t{16} << 20;
// The rows of `cols` floats that kFeatureBlockBytes holds, at least one.
std::int64_t feature_block_rows(std::int64_t cols);

// The rows of a matrix, which must outlive the blocks.
FeatureBlocks blocks_of(const Matrix& features);
// `rows` x `cols` entries of `value`.
FeatureBlocks constant_blocks(std::int64_t rows, std::int64_t cols, float value);
// Every row in one matrix, filled a block at a time: a source that makes its blocks holds one beside it.
Matrix gather(const FeatureBlocks& blocks);

}  // namespace nj
