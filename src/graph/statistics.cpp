#include "nj/graph/statistics.hpp"

#include <algorithm>
#include <cmath>

namespace nj {

DegreeStatistics degree_statistics(const CsrGraph& graph) {
  DegreeStatistics stats;
  const vid_t n = graph.num_vertices();
  if (n == 0) return stats;
  std::vector<std::uint8_t> has_out_edge(static_cast<std::size_t>(n), 0);
  for (const vid_t s : graph.sources) has_out_edge[static_cast<std::size_t>(s)] = 1;
  stats.min_in_degree = graph.in_degree(0);
  for (vid_t v = 0; v < n; ++v) {
    const eid_t degree = graph.in_degree(v);
    stats.min_in_degree = std::min(stats.min_in_degree, degree);
    stats.max_in_degree = std::max(stats.max_in_degree, degree);
    if (degree == 0 && has_out_edge[static_cast<std::size_t>(v)] == 0) ++stats.isolated_vertices;
  }
  stats.mean_in_degree = static_cast<double>(graph.num_edges()) / static_cast<double>(n);
  return stats;
}

FeatureStatistics feature_statistics(const Matrix& features) {
  FeatureStatistics stats;
  if (features.size() == 0) return stats;
  std::int64_t nonzero = 0;
  double sum = 0.0;
  double sum_of_squares = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : nonzero, sum, sum_of_squares)
  for (std::int64_t r = 0; r < features.rows(); ++r) {
    for (const float x : std::span(features.row(r), static_cast<std::size_t>(features.cols()))) {
      nonzero += x != 0.0F ? 1 : 0;
      sum += x;
      sum_of_squares += static_cast<double>(x) * x;
    }
  }
  const auto size = static_cast<double>(features.size());
  stats.nonzero_fraction = static_cast<double>(nonzero) / size;
  stats.mean = sum / size;
  stats.stddev = std::sqrt(std::max(0.0, sum_of_squares / size - stats.mean * stats.mean));
  return stats;
}

double edge_homophily(const CsrGraph& graph, const std::vector<std::int32_t>& labels) {
  std::int64_t labelled = 0;
  std::int64_t same = 0;
  for (vid_t v = 0; v < graph.num_vertices(); ++v) {
    const auto label = labels[static_cast<std::size_t>(v)];
    if (label < 0) continue;
    for (const vid_t s : graph.in_neighbors(v)) {
      const auto source_label = labels[static_cast<std::size_t>(s)];
      if (source_label < 0) continue;
      ++labelled;
      same += source_label == label ? 1 : 0;
    }
  }
  return labelled == 0 ? 0.0 : static_cast<double>(same) / static_cast<double>(labelled);
}

DatasetStatistics dataset_statistics(const Dataset& dataset) {
  DatasetStatistics stats;
  stats.num_vertices = dataset.num_vertices();
  stats.num_edges = dataset.graph.num_edges();
  stats.feature_width = dataset.features.cols();
  stats.class_counts.assign(static_cast<std::size_t>(dataset.num_classes), 0);
  for (const auto label : dataset.labels) {
    if (label < 0) {
      ++stats.unlabelled;
    } else {
      ++stats.class_counts[static_cast<std::size_t>(label)];
    }
  }
  stats.train = count(dataset.train_mask);
  stats.val = count(dataset.val_mask);
  stats.test = count(dataset.test_mask);
  stats.degrees = degree_statistics(dataset.graph);
  stats.features = feature_statistics(dataset.features);
  stats.edge_homophily = edge_homophily(dataset.graph, dataset.labels);
  return stats;
}

}  // namespace nj
