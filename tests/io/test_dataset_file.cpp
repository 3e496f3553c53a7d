#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <numeric>

#include "nj/graph/vertex_order.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/feature_storage.hpp"
#include "nj/io/hdf5.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

class DatasetFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dataset_ = test::random_dataset(40, 120, 6, 3, 11);
    dataset_.name = "round trip";
    write_dataset(path_, dataset_);
  }

  // Deletes one object of the written file with the C API; nj::hdf5::File deliberately offers no way to.
  void remove(const std::string& object) const {
    const hid_t file = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    EXPECT_GE(H5Ldelete(file, object.c_str(), H5P_DEFAULT), 0) << object;
    H5Fclose(file);
  }

  template <typename T>
  void replace(const std::string& object, const std::vector<T>& values, const std::vector<hsize_t>& shape) const {
    remove(object);
    hdf5::File::open_write(path_).write<T>(object, values, shape);
  }

  // The message of the nj::InputError that reading the file throws, checked to name the file and each of
  // `fragments` (the object and what is wrong with it); unless the fault is in the feature values, reading it
  // without them throws the same.
  void expect_rejected(std::initializer_list<std::string> fragments, bool in_feature_values = false) const {
    const auto expect_throws = [&](const char* reader, auto&& read) {
      try {
        read();
        ADD_FAILURE() << reader << " accepted a bad file";
      } catch (const InputError& e) {
        const std::string message = e.what();
        EXPECT_EQ(message.rfind(path_, 0), 0U) << reader << ": " << message;
        for (const auto& fragment : fragments)
          EXPECT_NE(message.find(fragment), std::string::npos) << reader << ": " << message;
      }
    };
    expect_throws("read_dataset", [&] { read_dataset(path_); });
    if (!in_feature_values)
      expect_throws("read_dataset_without_features", [&] { read_dataset_without_features(path_); });
  }

  hsize_t num_vertices() const { return static_cast<hsize_t>(dataset_.num_vertices()); }

  test::TempDir dir_;
  std::string path_ = dir_.file("dataset.h5");
  Dataset dataset_;
};

TEST_F(DatasetFile, RoundTripIsExact) {
  const Dataset read = read_dataset(path_);
  EXPECT_EQ(read.name, dataset_.name);
  test::expect_same_dataset(read, dataset_);
}

// Planning reads the features' width only: everything else is what read_dataset reads.
TEST_F(DatasetFile, WithoutFeaturesReadsAllButTheirValues) {
  DatasetWithoutFeatures read = read_dataset_without_features(path_);
  EXPECT_EQ(read.feature_width, dataset_.features.cols());
  EXPECT_EQ(read.dataset.features.size(), 0);
  EXPECT_EQ(read.dataset.name, dataset_.name);
  read.dataset.features = dataset_.features;
  test::expect_same_dataset(read.dataset, dataset_);
}

// Bag-of-words features: most entries zero. Stored sparse by default, dense where asked, and read back alike.
class SparseFeatures : public DatasetFile {
 protected:
  void SetUp() override {
    DatasetFile::SetUp();
    float* values = dataset_.features.data();
    for (std::int64_t i = 0; i < dataset_.features.size(); ++i) {
      if (i % 17 != 3) values[i] = 0.0F;  // about 6 % non-zero
    }
    write_dataset(path_, dataset_);
  }
  bool has(const std::string& object) const { return hdf5::File::open_read(path_).exists(object); }
};

TEST_F(SparseFeatures, AreStoredSparseByDefaultAndReadBackExactly) {
  EXPECT_TRUE(has("/features_sparse"));
  EXPECT_FALSE(has("/features"));
  const StoredFeatures stored = stored_features(hdf5::File::open_read(path_));
  EXPECT_TRUE(stored.sparse);
  EXPECT_EQ(stored.nonzeros, std::count_if(dataset_.features.span().begin(), dataset_.features.span().end(),
                                           [](float x) { return x != 0.0F; }));
  test::expect_same_dataset(read_dataset(path_), dataset_);
  EXPECT_EQ(read_dataset_without_features(path_).feature_width, dataset_.features.cols());
  // Forced either way, the same dataset.
  for (const FeatureStorage storage : {FeatureStorage::kDense, FeatureStorage::kSparse}) {
    write_dataset(path_, dataset_, storage);
    EXPECT_EQ(has("/features"), storage == FeatureStorage::kDense);
    test::expect_same_dataset(read_dataset(path_), dataset_);
  }
}

// Auto stores sparse where the compressed rows (8 bytes an entry) take at most half the dense bytes (4 a cell): under
// a quarter of the entries non-zero, on either side of which these lie.
TEST_F(DatasetFile, AutoStoresSparseWhereAtMostAQuarterOfTheEntriesAreNonZero) {
  EXPECT_TRUE(hdf5::File::open_read(path_).exists("/features"));
  EXPECT_FALSE(stores_sparse(dataset_.features, FeatureStorage::kAuto));
  for (const auto& [kept_every, sparse] : {std::pair{2, false}, std::pair{3, false}, std::pair{5, true}}) {
    Matrix features(40, 60, 1.0F);  // wide enough that the row offsets weigh little
    for (std::int64_t i = 0; i < features.size(); ++i) {
      if (i % kept_every != 0) features.data()[i] = 0.0F;
    }
    EXPECT_EQ(stores_sparse(features, FeatureStorage::kAuto), sparse) << "one entry in " << kept_every;
  }
}

TEST_F(SparseFeatures, RejectsColumnsOutOfRangeOrOutOfOrder) {
  const auto indices = hdf5::File::open_read(path_).read<std::int32_t>("/features_sparse/indices").values;
  std::vector<std::int32_t> bad = indices;
  bad[0] = static_cast<std::int32_t>(dataset_.features.cols());
  replace<std::int32_t>("/features_sparse/indices", bad, {bad.size()});
  expect_rejected({"/features_sparse/indices", "columns must be ascending"}, true);
}

TEST_F(SparseFeatures, RejectsOffsetsThatDoNotAddUp) {
  auto indptr = hdf5::File::open_read(path_).read<std::int64_t>("/features_sparse/indptr").values;
  indptr.back() += 1;
  replace<std::int64_t>("/features_sparse/indptr", indptr, {indptr.size()});
  expect_rejected({"/features_sparse/indptr", "must start at 0 and end at the"}, true);
}

TEST_F(SparseFeatures, RejectsAFileWithBothStorages) {
  hdf5::File::open_write(path_).write<float>("/features", dataset_.features.span(),
                                             {num_vertices(), static_cast<hsize_t>(dataset_.features.cols())});
  expect_rejected({"holds both /features and /features_sparse"});
}

TEST_F(SparseFeatures, RejectsARowCountDifferentFromVertexCount) {
  replace<std::int64_t>("/features_sparse/shape", {dataset_.num_vertices() - 1, dataset_.features.cols()}, {2});
  expect_rejected({"/features_sparse", "rows but the graph has"});
}

TEST_F(DatasetFile, RejectsMissingFile) {
  std::filesystem::remove(path_);
  expect_rejected({"no such file"});
}

TEST_F(DatasetFile, RejectsTruncatedFile) {
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) / 2);
  expect_rejected({"truncated"});
}

TEST_F(DatasetFile, RejectsFeatureRowCountDifferentFromVertexCount) {
  const auto cols = static_cast<hsize_t>(dataset_.features.cols());
  replace<float>("/features", std::vector<float>((num_vertices() - 1) * cols, 1.0F), {num_vertices() - 1, cols});
  expect_rejected({"/features", "rows"});
}

TEST_F(DatasetFile, RejectsFeaturesStoredAsIntegers) {
  const auto cols = static_cast<hsize_t>(dataset_.features.cols());
  replace<std::int32_t>("/features", std::vector<std::int32_t>(num_vertices() * cols, 1), {num_vertices(), cols});
  expect_rejected({"/features", "expected float"});
}

// h5py writes NumPy's bool as an HDF5 enum over int8 (FALSE = 0, TRUE = 1), and a Python str as a variable-length
// UTF-8 string: masks and attributes written so read as those nj writes.
TEST_F(DatasetFile, AcceptsMasksAndAttributesAsH5pyWritesThem) {
  const hid_t file = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const hid_t boolean = H5Tenum_create(H5T_NATIVE_INT8);
  for (const auto& [name, value] : {std::pair{"FALSE", std::int8_t{0}}, std::pair{"TRUE", std::int8_t{1}}}) {
    H5Tenum_insert(boolean, name, &value);
  }
  const hsize_t n = num_vertices();
  const hid_t vertices = H5Screate_simple(1, &n, nullptr);
  for (const auto& [name, mask] :
       {std::pair{"/masks/train", &dataset_.train_mask}, std::pair{"/masks/val", &dataset_.val_mask},
        std::pair{"/masks/test", &dataset_.test_mask}}) {
    ASSERT_GE(H5Ldelete(file, name, H5P_DEFAULT), 0) << name;
    const std::vector<std::int8_t> values(mask->begin(), mask->end());
    const hid_t stored = H5Dcreate2(file, name, boolean, vertices, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(H5Dwrite(stored, boolean, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0) << name;
    H5Dclose(stored);
  }
  const hid_t scalar = H5Screate(H5S_SCALAR);
  H5Adelete(file, "symmetrized");
  const hid_t symmetrized = H5Acreate2(file, "symmetrized", boolean, scalar, H5P_DEFAULT, H5P_DEFAULT);
  const std::int8_t yes = 1;
  EXPECT_GE(H5Awrite(symmetrized, boolean, &yes), 0);
  H5Aclose(symmetrized);
  const hid_t text = H5Tcopy(H5T_C_S1);
  H5Tset_size(text, H5T_VARIABLE);
  H5Tset_cset(text, H5T_CSET_UTF8);
  for (const auto& [key, value] : {std::pair{"name", "h5py \u2603"}, std::pair{"self_loops", "removed"}}) {
    H5Adelete(file, key);
    const hid_t attribute = H5Acreate2(file, key, text, scalar, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(H5Awrite(attribute, text, &value), 0) << key;
    H5Aclose(attribute);
  }
  H5Tclose(text);
  H5Sclose(scalar);
  H5Sclose(vertices);
  H5Tclose(boolean);
  H5Fclose(file);

  ASSERT_TRUE(dataset_.symmetrized);
  ASSERT_EQ(dataset_.self_loops, SelfLoopPolicy::kRemoved);
  const Dataset read = read_dataset(path_);
  EXPECT_EQ(read.name, "h5py \u2603");
  test::expect_same_dataset(read, dataset_);
}

TEST_F(DatasetFile, StoredCommunityOrderRoundTrips) {
  EXPECT_TRUE(read_dataset(path_).community_order.empty());  // none written, none read
  dataset_.community_order.resize(static_cast<std::size_t>(dataset_.num_vertices()));
  std::iota(dataset_.community_order.rbegin(), dataset_.community_order.rend(), vid_t{0});
  write_dataset(path_, dataset_);
  EXPECT_EQ(read_dataset(path_).community_order, dataset_.community_order);
  EXPECT_EQ(read_dataset_without_features(path_).dataset.community_order, dataset_.community_order);
}

// An order another version of the search stored is not this build's: read as none, so that runs search again.
TEST_F(DatasetFile, ACommunityOrderOfAnotherVersionIsNotUsed) {
  dataset_.community_order.resize(static_cast<std::size_t>(dataset_.num_vertices()));
  std::iota(dataset_.community_order.begin(), dataset_.community_order.end(), vid_t{0});
  write_dataset(path_, dataset_);
  ASSERT_FALSE(read_dataset(path_).community_order.empty());
  hdf5::File::open_write(path_).set_attribute("community_order_version", kCommunityOrderVersion + 1);
  EXPECT_TRUE(read_dataset(path_).community_order.empty());
}

TEST_F(DatasetFile, RejectsACommunityOrderThatIsNotAPermutation) {
  std::vector<vid_t> order(static_cast<std::size_t>(dataset_.num_vertices()));
  std::iota(order.begin(), order.end(), vid_t{0});
  order[7] = order[3];
  {
    auto file = hdf5::File::open_write(path_);
    file.write<vid_t>("/graph/community_order", order, {order.size()});
    file.set_attribute("community_order_version", kCommunityOrderVersion);
  }
  expect_rejected({"/graph/community_order", "entry 7", "listed twice"});
  order[7] = dataset_.num_vertices();
  replace<vid_t>("/graph/community_order", order, {order.size()});
  expect_rejected({"/graph/community_order", "entry 7", "not a vertex"});
  order.pop_back();
  replace<vid_t>("/graph/community_order", order, {order.size()});
  expect_rejected({"/graph/community_order"});
}

// Ranks read the file a slice each (read_dataset_rows): a slice checks its first vertex id against the one before it,
// so ids that fall back at a slice's start are refused there, as a whole file's are.
TEST_F(DatasetFile, ASliceRefusesVertexIdsThatFallBackAtItsStart) {
  ASSERT_TRUE(dataset_.vertex_ids.empty()) << "the random dataset names no vertices";
  std::vector<gid_t> ids(num_vertices());
  for (std::size_t v = 0; v < ids.size(); ++v) ids[v] = v < 20 ? static_cast<gid_t>(100 + v) : static_cast<gid_t>(v);
  hdf5::File::open_write(path_).write<gid_t>("/graph/vertex_ids", ids, {num_vertices()});
  EXPECT_EQ(read_dataset_rows(path_, 0, 20).vertex_ids, std::vector<gid_t>(ids.begin(), ids.begin() + 20));
  EXPECT_EQ(read_dataset_rows(path_, 21, 19).vertex_ids, std::vector<gid_t>(ids.begin() + 21, ids.end()));
  EXPECT_TRUE(read_dataset_rows(path_, 20, 0).vertex_ids.empty());
  try {
    read_dataset_rows(path_, 20, 20);
    ADD_FAILURE() << "a slice whose first id is below the one before it was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/graph/vertex_ids: entry 20 is 20"), std::string::npos) << e.what();
  }
  expect_rejected({"/graph/vertex_ids", "ascending"});
}

TEST_F(DatasetFile, RejectsEdgeEndpointOutOfRange) {
  auto sources = dataset_.graph.sources;
  sources.back() = dataset_.num_vertices();
  replace<vid_t>("/graph/indices", sources, {sources.size()});
  expect_rejected({"/graph", "outside"});
}

TEST_F(DatasetFile, RejectsDecreasingOffsets) {
  auto offsets = dataset_.graph.offsets;
  std::swap(offsets[1], offsets[2]);
  ASSERT_NE(offsets[1], offsets[2]) << "the random graph should give vertices 0 and 1 in-edges";
  replace<eid_t>("/graph/indptr", offsets, {offsets.size()});
  expect_rejected({"/graph", "offsets decrease"});
}

TEST_F(DatasetFile, RejectsLabelNotBelowNumClasses) {
  auto labels = dataset_.labels;
  labels[5] = dataset_.num_classes;
  replace<std::int32_t>("/labels", labels, {labels.size()});
  expect_rejected({"vertex 5", "label 3"});
}

// A NaN or an infinity in the features would train to chance accuracy without a word.
TEST_F(DatasetFile, RejectsNonFiniteFeaturesNamingTheVertexAndColumn) {
  for (const float poison : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> features(dataset_.features.span().begin(), dataset_.features.span().end());
    features[static_cast<std::size_t>(7 * dataset_.features.cols() + 4)] = poison;
    features[static_cast<std::size_t>(9 * dataset_.features.cols() + 1)] = poison;  // only the first is named
    replace<float>("/features", features, {num_vertices(), static_cast<hsize_t>(dataset_.features.cols())});
    expect_rejected({"/features", "vertex 7, column 4", "must be finite"}, /*in_feature_values=*/true);
    EXPECT_NO_THROW(read_dataset_without_features(path_)) << "planning reads no feature values";
  }
  Dataset poisoned = dataset_;
  poisoned.features(2, 0) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(write_dataset(dir_.file("poisoned.h5"), poisoned), InputError) << "nor is such a dataset written";
}

TEST_F(DatasetFile, RejectsNumClassesBeyond32Bits) {
  hdf5::File::open_write(path_).set_attribute("num_classes", (std::int64_t{1} << 32) + 3);  // 3 once narrowed
  expect_rejected({"num_classes", "4294967299"});
}

TEST_F(DatasetFile, RejectsMissingSplit) {
  remove("/masks/test");
  expect_rejected({"/masks/test", "missing"});
}

}  // namespace
}  // namespace nj
