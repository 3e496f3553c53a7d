#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <functional>

#include "nj/graph/generate.hpp"
#include "nj/graph/statistics.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

GeneratorOptions small_options() {
  GeneratorOptions options;
  options.vertices = 3'000;
  options.edges = 40'000;
  options.features = 10;  // not a multiple of four, so the last block of normals is cut
  options.classes = 5;
  options.seed = 7;
  return options;
}

void expect_identical(const Dataset& a, const Dataset& b) {
  EXPECT_EQ(a.name, b.name);
  test::expect_same_dataset(a, b);
}

TEST(Generate, SameSeedGivesTheSameDatasetAndAnotherSeedDoesNot) {
  const auto options = small_options();
  expect_identical(generate_dataset(options), generate_dataset(options));
  auto other = options;
  other.seed = 8;
  const auto a = generate_dataset(options);
  const auto b = generate_dataset(other);
  EXPECT_NE(a.graph.sources, b.graph.sources);
  EXPECT_NE(a.labels, b.labels);
}

TEST(Generate, ResultDoesNotDependOnThreadCount) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto serial = generate_dataset(small_options());
  for (const int count : {2, 3, 8}) {
    omp_set_num_threads(count);
    expect_identical(serial, generate_dataset(small_options()));
  }
  omp_set_num_threads(threads);
}

TEST(Generate, HonoursRequestedSizes) {
  const auto options = small_options();
  const auto d = generate_dataset(options);
  EXPECT_NO_THROW(d.validate("generated"));
  EXPECT_EQ(d.num_vertices(), options.vertices);
  // Duplicate pairs and self-loops are dropped, so a few percent fewer edges than asked for.
  EXPECT_LE(d.graph.num_edges(), options.edges);
  EXPECT_GE(d.graph.num_edges(), options.edges * 9 / 10);
  EXPECT_EQ(d.features.cols(), options.features);
  EXPECT_EQ(d.num_classes, options.classes);
  EXPECT_EQ(count(d.train_mask), 300);
  EXPECT_EQ(count(d.val_mask), 300);
  EXPECT_EQ(count(d.test_mask), 2'400);
  for (std::size_t v = 0; v < d.labels.size(); ++v) {
    EXPECT_EQ(d.train_mask[v] + d.val_mask[v] + d.test_mask[v], 1) << "vertex " << v;
  }
  const auto stats = dataset_statistics(d);
  EXPECT_EQ(stats.unlabelled, 0);
  EXPECT_TRUE(std::ranges::all_of(stats.class_counts, [](std::int64_t n) { return n > 400; }));
  // A power law has hubs far above the mean degree.
  EXPECT_GT(static_cast<double>(stats.degrees.max_in_degree), 5.0 * stats.degrees.mean_in_degree);
}

TEST(Generate, GraphIsSymmetricWithoutSelfLoopsOrDuplicates) {
  const auto d = generate_dataset(small_options());
  EXPECT_TRUE(d.symmetrized);
  EXPECT_EQ(d.self_loops, SelfLoopPolicy::kRemoved);
  const auto out = transpose(d.graph.offsets, d.graph.sources, d.num_vertices());
  EXPECT_EQ(out.offsets, d.graph.offsets);
  EXPECT_EQ(out.destinations, d.graph.sources);
  for (vid_t v = 0; v < d.num_vertices(); ++v) {
    const auto sources = d.graph.in_neighbors(v);
    EXPECT_TRUE(std::ranges::adjacent_find(sources, std::greater_equal<>()) == sources.end()) << "vertex " << v;
    EXPECT_FALSE(std::ranges::binary_search(sources, v)) << "vertex " << v;
  }
}

TEST(Generate, EdgeHomophilyFollowsTheOption) {
  for (const double homophily : {0.0, 0.3, 0.8, 1.0}) {
    auto options = small_options();
    options.homophily = homophily;
    const auto d = generate_dataset(options);
    EXPECT_NEAR(edge_homophily(d.graph, d.labels), homophily, 0.03) << "--homophily " << homophily;
  }
}

// Test accuracy of the nearest class mean, the means taken over the train split.
double nearest_mean_accuracy(const Dataset& d, const Matrix& features) {
  Matrix means(d.num_classes, features.cols());
  std::vector<double> members(static_cast<std::size_t>(d.num_classes), 0.0);
  for (vid_t v = 0; v < d.num_vertices(); ++v) {
    if (d.train_mask[static_cast<std::size_t>(v)] == 0) continue;
    const auto c = d.labels[static_cast<std::size_t>(v)];
    members[static_cast<std::size_t>(c)] += 1.0;
    for (std::int64_t j = 0; j < features.cols(); ++j) means(c, j) += features(v, j);
  }
  for (std::int64_t c = 0; c < means.rows(); ++c) {
    for (std::int64_t j = 0; j < means.cols(); ++j) {
      means(c, j) = static_cast<float>(means(c, j) / members[static_cast<std::size_t>(c)]);
    }
  }
  std::int64_t correct = 0;
  for (vid_t v = 0; v < d.num_vertices(); ++v) {
    if (d.test_mask[static_cast<std::size_t>(v)] == 0) continue;
    std::int32_t best = 0;
    double best_distance = std::numeric_limits<double>::infinity();
    for (std::int32_t c = 0; c < d.num_classes; ++c) {
      double distance = 0.0;
      for (std::int64_t j = 0; j < features.cols(); ++j) distance += std::pow(features(v, j) - means(c, j), 2);
      if (distance < best_distance) {
        best_distance = distance;
        best = c;
      }
    }
    correct += best == d.labels[static_cast<std::size_t>(v)] ? 1 : 0;
  }
  return static_cast<double>(correct) / static_cast<double>(count(d.test_mask));
}

// Each vertex's features averaged with its neighbours', the aggregation a GNN layer makes.
Matrix neighbour_mean(const Dataset& d) {
  Matrix out(d.features.rows(), d.features.cols());
  for (vid_t v = 0; v < d.num_vertices(); ++v) {
    const auto sources = d.graph.in_neighbors(v);
    for (std::int64_t j = 0; j < out.cols(); ++j) {
      double sum = d.features(v, j);
      for (const vid_t s : sources) sum += d.features(s, j);
      out(v, j) = static_cast<float>(sum / static_cast<double>(sources.size() + 1));
    }
  }
  return out;
}

TEST(Generate, LabelsAreLearnableFromFeaturesAndMoreSoFromNeighbourhoods) {
  auto options = small_options();
  options.signal = 1.0;
  const auto d = generate_dataset(options);
  const double chance = 1.0 / options.classes;
  const double own = nearest_mean_accuracy(d, d.features);
  const double aggregated = nearest_mean_accuracy(d, neighbour_mean(d));
  EXPECT_GT(own, chance + 0.1);
  EXPECT_GT(aggregated, own + 0.2);
  EXPECT_LT(aggregated, 1.0);

  options.signal = 0.0;
  const auto noise = generate_dataset(options);
  EXPECT_NEAR(nearest_mean_accuracy(noise, noise.features), chance, 0.05);
}

TEST(Generate, RejectsBadOptions) {
  const std::vector<std::pair<const char*, std::function<void(GeneratorOptions&)>>> cases = {
      {"--classes", [](GeneratorOptions& o) { o.classes = 1; }},
      {"--vertices", [](GeneratorOptions& o) { o.vertices = o.classes - 1; }},
      {"--edges", [](GeneratorOptions& o) { o.edges = -1; }},
      {"--edges", [](GeneratorOptions& o) { o.edges = o.vertices * o.vertices; }},
      {"--features", [](GeneratorOptions& o) { o.features = 0; }},
      {"--homophily", [](GeneratorOptions& o) { o.homophily = 1.5; }},
      {"--signal", [](GeneratorOptions& o) { o.signal = -1.0; }},
      {"--degree-exponent", [](GeneratorOptions& o) { o.degree_exponent = 1.0; }},
      {"--train-fraction", [](GeneratorOptions& o) { o.train_fraction = 0.0; }},
      {"--val-fraction", [](GeneratorOptions& o) { o.val_fraction = -0.1; }},
      {"--train-fraction + --val-fraction", [](GeneratorOptions& o) { o.train_fraction = o.val_fraction = 0.6; }},
  };
  for (const auto& [flag, spoil] : cases) {
    auto options = small_options();
    spoil(options);
    try {
      generate_dataset(options);
      ADD_FAILURE() << "accepted a bad " << flag;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(flag, 0), 0U) << e.what();
    }
  }
}

}  // namespace
}  // namespace nj
