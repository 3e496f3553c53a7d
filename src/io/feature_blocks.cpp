#include "nj/io/feature_blocks.hpp"

#include <algorithm>
#include <cstring>

namespace nj {

std::int64_t feature_block_rows(std::int64_t cols) {
  return std::max<std::int64_t>(
      1, kFeatureBlockBytes / (static_cast<std::int64_t>(sizeof(float)) * std::max<std::int64_t>(cols, 1)));
}

FeatureBlocks blocks_of(const Matrix& features) {
  return {.rows = features.rows(),
          .cols = features.cols(),
          .for_each_block = [&features](std::int64_t block_rows, const FeatureBlockSink& sink) {
            for (std::int64_t first = 0; first < features.rows(); first += block_rows) {
              sink(first, features.view().slice(first, std::min(block_rows, features.rows() - first)));
            }
          }};
}

FeatureBlocks constant_blocks(std::int64_t rows, std::int64_t cols, float value) {
  return {.rows = rows,
          .cols = cols,
          .for_each_block =
              [rows, cols, value](std::int64_t block_rows, const FeatureBlockSink& sink) {
                const Matrix block(std::min(block_rows, rows), cols, value);
                for (std::int64_t first = 0; first < rows; first += block_rows) {
                  sink(first, block.view().slice(0, std::min(block_rows, rows - first)));
                }
              },
          .nonzeros = value != 0.0F ? rows * cols : 0};
}

Matrix gather(const FeatureBlocks& blocks) {
  Matrix features(blocks.rows, blocks.cols);
  blocks.for_each_block(feature_block_rows(blocks.cols), [&](std::int64_t first, ConstRows block) {
    if (block.size() > 0) {
      std::memcpy(features.row(first), block.data, static_cast<std::size_t>(block.size()) * sizeof(float));
    }
  });
  return features;
}

}  // namespace nj
