#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "nj/core/error.hpp"
#include "nj/io/feature_blocks.hpp"
#include "nj/io/feature_storage.hpp"
#include "nj/io/hdf5.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

// More rows than one block holds (kFeatureBlockBytes), one entry in `kept_every` non-zero.
Matrix wide_features(std::int64_t kept_every) {
  const std::int64_t cols = 700;
  Matrix features(feature_block_rows(cols) * 2 + 5, cols);
  for (std::int64_t i = 0; i < features.size(); i += kept_every) {
    features.data()[i] = static_cast<float>(i % 97) - 48.5F;
  }
  return features;
}

// Written a block at a time, the features read back as the matrix they came from, in either storage.
TEST(FeatureBlocks, WrittenBlockByBlockTheyReadBackWhole) {
  const test::TempDir dir;
  for (const auto storage : {FeatureStorage::kDense, FeatureStorage::kSparse, FeatureStorage::kAuto}) {
    for (const std::int64_t kept_every : {3, 50}) {
      const Matrix features = wide_features(kept_every);
      const std::string path = dir.file("features.h5");
      {
        auto file = hdf5::File::create(path);
        const bool sparse = write_features(file, blocks_of(features), storage, 4096, path);
        EXPECT_EQ(sparse, stores_sparse(features, storage)) << to_string(storage) << ", 1 in " << kept_every;
      }
      const Matrix read = read_features(hdf5::File::open_read(path));
      ASSERT_EQ(read.rows(), features.rows());
      EXPECT_TRUE(std::equal(read.span().begin(), read.span().end(), features.span().begin()))
          << to_string(storage) << ", 1 in " << kept_every;
    }
  }
}

TEST(FeatureBlocks, AValueNotFiniteIsNamedByItsRowInTheWhole) {
  const test::TempDir dir;
  Matrix features = wide_features(3);
  const std::int64_t row = feature_block_rows(features.cols()) + 2;  // in the second block
  features(row, 4) = std::numeric_limits<float>::quiet_NaN();
  for (const auto storage : {FeatureStorage::kDense, FeatureStorage::kSparse}) {
    auto file = hdf5::File::create(dir.file(std::string(to_string(storage)) + ".h5"));
    try {
      write_features(file, blocks_of(features), storage, 4096, "out.h5");
      ADD_FAILURE() << "a NaN was written " << to_string(storage);
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                "out.h5: /features: vertex " + std::to_string(row) + ", column 4 is nan (features must be finite)");
    }
  }
}

TEST(FeatureBlocks, ConstantBlocksGiveEveryRowTheValue) {
  const Matrix ones = gather(constant_blocks(7, 2, 1.0F));
  EXPECT_EQ(ones.rows(), 7);
  EXPECT_TRUE(std::all_of(ones.span().begin(), ones.span().end(), [](float x) { return x == 1.0F; }));
}

}  // namespace
}  // namespace nj
