#include <gtest/gtest.h>

#include "nj/graph/statistics.hpp"

namespace nj {
namespace {

// Vertices 0..4: edges 0->1, 1->0, 2->1, 3->3; vertex 4 has no edge at all, vertex 2 only an out-edge.
Dataset tiny_dataset() {
  Dataset d;
  d.graph.offsets = {0, 1, 3, 3, 4, 4};
  d.graph.sources = {1, 0, 2, 3};
  d.num_classes = 3;
  d.labels = {0, 0, 1, -1, 1};
  d.features = Matrix(5, 2);
  d.features(0, 0) = 2.0F;
  d.features(1, 1) = -2.0F;
  d.train_mask = {1, 1, 0, 0, 0};
  d.val_mask = {0, 0, 1, 0, 0};
  d.test_mask = {0, 0, 0, 0, 1};
  return d;
}

TEST(Statistics, CountsDegreesClassesAndSplits) {
  const auto stats = dataset_statistics(tiny_dataset());
  EXPECT_EQ(stats.num_vertices, 5);
  EXPECT_EQ(stats.num_edges, 4);
  EXPECT_EQ(stats.feature_width, 2);
  EXPECT_EQ(stats.degrees.min_in_degree, 0);
  EXPECT_EQ(stats.degrees.max_in_degree, 2);
  EXPECT_DOUBLE_EQ(stats.degrees.mean_in_degree, 0.8);
  EXPECT_EQ(stats.degrees.isolated_vertices, 1);
  EXPECT_EQ(stats.class_counts, (std::vector<std::int64_t>{2, 2, 0}));
  EXPECT_EQ(stats.unlabelled, 1);
  EXPECT_EQ(stats.train, 2);
  EXPECT_EQ(stats.val, 1);
  EXPECT_EQ(stats.test, 1);
}

TEST(Statistics, SummarisesFeatures) {
  const auto stats = feature_statistics(tiny_dataset().features);
  EXPECT_DOUBLE_EQ(stats.nonzero_fraction, 0.2);
  EXPECT_DOUBLE_EQ(stats.mean, 0.0);
  EXPECT_DOUBLE_EQ(stats.stddev, std::sqrt(0.8));
}

TEST(Statistics, EdgeHomophilySkipsUnlabelledEndpoints) {
  const auto d = tiny_dataset();
  // Labelled edges: 1->0 and 0->1 join class 0 twice, 2->1 joins classes 1 and 0; 3->3 is unlabelled.
  EXPECT_DOUBLE_EQ(edge_homophily(d.graph, d.labels), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(edge_homophily(CsrGraph{}, {}), 0.0);
}

}  // namespace
}  // namespace nj
