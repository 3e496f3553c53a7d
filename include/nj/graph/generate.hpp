#pragma once
// Synthetic node-classification datasets: a degree-corrected contextual stochastic block model. Classes are
// communities, expected degrees follow a power law (hubs, as in real graphs), a chosen fraction of the edges
// joins vertices of the same class, and features are a class mean plus Gaussian noise. Every random number
// is a Philox draw addressed by what it is for, so the result depends only on the options, never on the
// number of threads.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nj/core/progress.hpp"
#include "nj/graph/dataset.hpp"

namespace nj {

struct GeneratorOptions {
  std::string name = "synthetic";
  std::int64_t vertices = 10'000;
  // Directed edges wanted after symmetrization; the result has somewhat fewer, since duplicate pairs and
  // self-loops are dropped.
  std::int64_t edges = 200'000;
  std::int64_t features = 32;
  std::int32_t classes = 8;
  std::uint64_t seed = 0;
  // Expected fraction of edges whose endpoints share a class; the others always join two different classes.
  double homophily = 0.8;
  // Scale of the class means against unit noise: two class means lie about signal * sqrt(2) noise standard
  // deviations apart, whatever the feature width.
  double signal = 0.5;
  // Exponent of the power law P(degree = d) ~ d^-exponent, truncated at sqrt(vertices) times the minimum.
  double degree_exponent = 2.5;
  double train_fraction = 0.1;
  double val_fraction = 0.1;  // the rest is the test split
};

// Throws nj::UsageError naming the offending flag of `nj generate`.
void validate(const GeneratorOptions& options);

// The model's draws, each addressed by what it is for: what one process builds the whole dataset from, and what each
// rank of several builds its slice from (nj/run/parallel_generate.hpp), so that both write the same file. It holds
// every vertex's class and its slot in the sampling tables (16 bytes a vertex), never the edges.
class SyntheticModel {
 public:
  // Validates the options; draws every vertex's class and expected degree.
  explicit SyntheticModel(const GeneratorOptions& options);
  ~SyntheticModel();
  SyntheticModel(const SyntheticModel&) = delete;
  SyntheticModel& operator=(const SyntheticModel&) = delete;

  const GeneratorOptions& options() const { return options_; }
  const std::vector<std::int32_t>& labels() const { return labels_; }
  // Pairs drawn: each is an edge the graph holds both ways, unless it is a self-loop or repeats another.
  std::int64_t pairs() const { return options_.edges / 2; }
  // Pair i's endpoints (source, destination).
  std::pair<vid_t, vid_t> pair(std::int64_t i) const;
  // Feature rows [first, first + rows).
  Matrix features(std::int64_t first, std::int64_t rows) const;
  // Vertex v's place in the random order that deals out the splits: the train split is the vertices with the
  // train_size() smallest keys, the validation split the val_size() next. Keys are distinct.
  std::uint64_t split_key(std::int64_t v) const;
  std::int64_t train_size() const;
  std::int64_t val_size() const;

 private:
  class Sampler;
  GeneratorOptions options_;
  std::vector<std::int32_t> labels_;
  std::unique_ptr<const Sampler> sampler_;
  Matrix class_means_;
};

// Validates the options and builds the dataset: symmetrized, without self-loops or duplicate edges, every
// vertex labelled, splits of exactly round(fraction * vertices) vertices (at least one in train).
// `progress` hears of the edges and the features as they are drawn.
Dataset generate_dataset(const GeneratorOptions& options, const ProgressCallback& progress = {});

}  // namespace nj
