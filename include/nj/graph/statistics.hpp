#pragma once
// Summary statistics of a dataset, as `nj info` reports them.
#include <cstdint>
#include <vector>

#include "nj/graph/dataset.hpp"

namespace nj {

struct DegreeStatistics {
  eid_t min_in_degree = 0;
  double mean_in_degree = 0.0;
  eid_t max_in_degree = 0;
  std::int64_t isolated_vertices = 0;  // no in-edge and no out-edge
};

struct FeatureStatistics {
  double nonzero_fraction = 0.0;
  double mean = 0.0;
  double stddev = 0.0;
};

struct DatasetStatistics {
  std::int64_t num_vertices = 0;
  eid_t num_edges = 0;
  std::int64_t feature_width = 0;
  std::vector<std::int64_t> class_counts;  // vertices per class, num_classes entries
  std::int64_t unlabelled = 0;
  std::int64_t train = 0;
  std::int64_t val = 0;
  std::int64_t test = 0;
  DegreeStatistics degrees;
  FeatureStatistics features;
  double edge_homophily = 0.0;
};

DegreeStatistics degree_statistics(const CsrGraph& graph);
FeatureStatistics feature_statistics(const Matrix& features);
// Fraction of edges, among those whose endpoints both have a label, that join two vertices of the same class
// (the edge homophily ratio of Zhu et al., 2020); 0 when no edge qualifies.
double edge_homophily(const CsrGraph& graph, const std::vector<std::int32_t>& labels);
DatasetStatistics dataset_statistics(const Dataset& dataset);

}  // namespace nj
