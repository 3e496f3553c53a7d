#pragma once
// Synthetic node-classification datasets: a degree-corrected contextual stochastic block model. Classes are
// communities, expected degrees follow a power law (hubs, as in real graphs), a chosen fraction of the edges
// joins vertices of the same class, and features are a class mean plus Gaussian noise. Every random number
// is a Philox draw addressed by what it is for, so the result depends only on the options, never on the
// number of threads.
#include <cstdint>
#include <string>

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

// Throws nj::InputError naming the offending flag of `nj generate`.
void validate(const GeneratorOptions& options);

// Validates the options and builds the dataset: symmetrized, without self-loops or duplicate edges, every
// vertex labelled, splits of exactly round(fraction * vertices) vertices (at least one in train).
// `progress` hears of the edges and the features as they are drawn.
Dataset generate_dataset(const GeneratorOptions& options, const ProgressCallback& progress = {});

}  // namespace nj
