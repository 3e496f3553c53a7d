#include "nj/graph/generate.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <span>

#include "nj/core/error.hpp"
#include "nj/core/philox.hpp"
#include "nj/core/progress.hpp"

namespace nj {
namespace {

// What a draw is for. It is the stream word of the Philox key, so draws made for different purposes never
// share a counter.
enum class Draw : std::uint32_t { kClass = 1, kDegree, kEdge, kClassMean, kNoise, kSplit };

// The generator takes all four words of a Philox block at once, from the stream
// RandomStream{seed, RandomPurpose::kGenerator, layer = draw, epoch = 0}.
class Draws {
 public:
  explicit Draws(std::uint64_t seed) : seed_(seed) {}

  std::array<std::uint32_t, 4> block(Draw draw, std::uint64_t index, std::uint32_t word = 0) const {
    const RandomStream stream{seed_, RandomPurpose::kGenerator, static_cast<std::uint32_t>(draw), 0};
    std::array<std::uint32_t, 4> words{};
    stream.block(static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32U), word, words.data());
    return words;
  }

 private:
  std::uint64_t seed_;
};

// Uniform in [0, 1) with all 32 bits of the word.
double unit(std::uint32_t bits) { return static_cast<double>(bits) * 0x1p-32; }

// Uniform integer in [0, n) for n <= 2^32, by multiply-shift rather than the biased bits % n.
std::int64_t below(std::uint32_t bits, std::int64_t n) {
  return static_cast<std::int64_t>((static_cast<std::uint64_t>(bits) * static_cast<std::uint64_t>(n)) >> 32U);
}

// Four standard normals from one block, by Box-Muller on its two pairs of words.
std::array<float, 4> normals(const std::array<std::uint32_t, 4>& words) {
  std::array<float, 4> out{};
  for (std::size_t k = 0; k < 4; k += 2) {
    const double radius = std::sqrt(-2.0 * std::log((static_cast<double>(words[k]) + 1.0) * 0x1p-32));
    const double angle = 2.0 * std::numbers::pi * unit(words[k + 1]);
    out[k] = static_cast<float>(radius * std::cos(angle));
    out[k + 1] = static_cast<float>(radius * std::sin(angle));
  }
  return out;
}

std::vector<std::int32_t> draw_classes(const Draws& draws, vid_t n, std::int32_t classes) {
  std::vector<std::int32_t> label(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static)
  for (vid_t v = 0; v < n; ++v) {
    label[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(below(draws.block(Draw::kClass, v)[0], classes));
  }
  return label;
}

// Expected-degree weights from a power law truncated at sqrt(n): inverse-CDF sampling of a Pareto
// distribution restricted to [1, cap], so that hubs exist but none dwarfs the graph.
std::vector<double> draw_degree_weights(const Draws& draws, vid_t n, double exponent) {
  const double tail = exponent - 1.0;
  const double cap = std::max(1.0, std::sqrt(static_cast<double>(n)));
  const double mass = 1.0 - std::pow(cap, -tail);
  std::vector<double> weight(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static)
  for (vid_t v = 0; v < n; ++v) {
    const double u = unit(draws.block(Draw::kDegree, v)[0]);
    weight[static_cast<std::size_t>(v)] = std::pow(1.0 - u * mass, -1.0 / tail);
  }
  return weight;
}

// Draws vertices with probability proportional to their weight, from one class or from all classes but one,
// in constant time: a class by binary search over the (few) class weights, then a vertex of that class from
// its alias table (Vose's method), which costs one memory access where a search over all vertices would
// miss the cache at every step.
class EndpointSampler {
 public:
  EndpointSampler(const std::vector<std::int32_t>& label, const std::vector<double>& weight, std::int32_t classes)
      : class_begin_(static_cast<std::size_t>(classes) + 1, 0),
        class_cumulative_(static_cast<std::size_t>(classes) + 1, 0.0),
        slots_(label.size()) {
    for (const auto c : label) ++class_begin_[static_cast<std::size_t>(c) + 1];
    for (std::size_t c = 0; c < static_cast<std::size_t>(classes); ++c) class_begin_[c + 1] += class_begin_[c];
    std::vector<vid_t> members(label.size());
    std::vector<std::size_t> cursor(class_begin_.begin(), class_begin_.end() - 1);
    for (std::size_t v = 0; v < label.size(); ++v) {
      members[cursor[static_cast<std::size_t>(label[v])]++] = static_cast<vid_t>(v);
    }
    for (std::size_t c = 0; c < static_cast<std::size_t>(classes); ++c) {
      double total = 0.0;
      for (std::size_t i = class_begin_[c]; i < class_begin_[c + 1]; ++i) total += weight[members[i]];
      class_cumulative_[c + 1] = class_cumulative_[c] + total;
    }
#pragma omp parallel for schedule(dynamic)
    for (std::int32_t c = 0; c < classes; ++c) {
      const auto [first, last] = range(c);
      build_alias_table(std::span(members).subspan(first, last - first), weight,
                        std::span(slots_).subspan(first, last - first));
    }
  }

  std::int32_t any_class(std::uint32_t bits) const {
    return pick_class(unit(bits) * class_cumulative_.back(), 0, num_classes());
  }

  // A class other than c, by weight; c itself when no other class has any weight.
  std::int32_t other_class(std::int32_t c, std::uint32_t bits) const {
    const auto i = static_cast<std::size_t>(c);
    const double before = class_cumulative_[i];
    const double after = class_cumulative_.back() - class_cumulative_[i + 1];
    if (before + after <= 0.0) return c;
    const double t = unit(bits) * (before + after);
    return t < before ? pick_class(t, 0, c) : pick_class(class_cumulative_[i + 1] + (t - before), c + 1, num_classes());
  }

  // A vertex of class c (which must have one), by weight: a uniform slot, then its vertex or its alias.
  vid_t in_class(std::int32_t c, std::uint32_t slot_bits, std::uint32_t coin_bits) const {
    const auto [first, last] = range(c);
    const Slot& slot =
        slots_[first + static_cast<std::size_t>(below(slot_bits, static_cast<std::int64_t>(last - first)))];
    return unit(coin_bits) < slot.keep ? slot.vertex : slot.alias;
  }

 private:
  struct Slot {
    float keep = 1.0F;  // probability that the slot yields its own vertex rather than the alias
    vid_t vertex = 0;
    vid_t alias = 0;
  };

  static void build_alias_table(std::span<const vid_t> members, const std::vector<double>& weight,
                                std::span<Slot> slots) {
    double total = 0.0;
    for (const vid_t v : members) total += weight[static_cast<std::size_t>(v)];
    std::vector<double> scaled(members.size());
    std::vector<std::size_t> small;
    std::vector<std::size_t> large;
    for (std::size_t i = 0; i < members.size(); ++i) {
      scaled[i] = weight[static_cast<std::size_t>(members[i])] * static_cast<double>(members.size()) / total;
      (scaled[i] < 1.0 ? small : large).push_back(i);
      slots[i] = {1.0F, members[i], members[i]};
    }
    while (!small.empty() && !large.empty()) {
      const std::size_t s = small.back();
      const std::size_t l = large.back();
      small.pop_back();
      slots[s].keep = static_cast<float>(scaled[s]);
      slots[s].alias = members[l];
      scaled[l] -= 1.0 - scaled[s];
      if (scaled[l] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
  }

  std::int32_t num_classes() const { return static_cast<std::int32_t>(class_begin_.size() - 1); }

  std::pair<std::size_t, std::size_t> range(std::int32_t c) const {
    const auto i = static_cast<std::size_t>(c);
    return {class_begin_[i], class_begin_[i + 1]};
  }

  // The class in [first, last) whose cumulative-weight interval holds t. Holding t below the range's end
  // means rounding can never select a class without weight (one without vertices).
  std::int32_t pick_class(double t, std::int32_t first, std::int32_t last) const {
    const auto begin = class_cumulative_.begin() + 1;
    const double held = std::min(t, std::nextafter(class_cumulative_[static_cast<std::size_t>(last)], 0.0));
    return static_cast<std::int32_t>(std::upper_bound(begin + first, begin + last, held) - begin);
  }

  std::vector<std::size_t> class_begin_;
  std::vector<double> class_cumulative_;
  std::vector<Slot> slots_;  // grouped by class, in class_begin_ order
};

// Chung-Lu pairs with communities, one Philox block per endpoint: the source by weight over all vertices;
// the destination by weight inside the source's class with probability `homophily`, else in another class.
// The edge list lives only in this function, so its memory is gone before the features are made.
CsrGraph draw_graph(const Draws& draws, const GeneratorOptions& options, const std::vector<std::int32_t>& label,
                    const ProgressCallback& progress) {
  const auto n = static_cast<vid_t>(options.vertices);
  const EndpointSampler sampler(label, draw_degree_weights(draws, n, options.degree_exponent), options.classes);
  const std::int64_t pairs = options.edges / 2;
  std::vector<vid_t> src(static_cast<std::size_t>(pairs));
  std::vector<vid_t> dst(static_cast<std::size_t>(pairs));
  ProgressTicks ticks(progress, "edges", pairs);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < pairs; ++i) {
    if (omp_get_thread_num() == 0) ticks.tick(i * omp_get_num_threads());
    const auto source = draws.block(Draw::kEdge, static_cast<std::uint64_t>(i), 0);
    const auto destination = draws.block(Draw::kEdge, static_cast<std::uint64_t>(i), 1);
    const vid_t s = sampler.in_class(sampler.any_class(source[0]), source[1], source[2]);
    const std::int32_t c = label[static_cast<std::size_t>(s)];
    const bool same_class = unit(source[3]) < options.homophily;
    src[static_cast<std::size_t>(i)] = s;
    dst[static_cast<std::size_t>(i)] =
        sampler.in_class(same_class ? c : sampler.other_class(c, destination[0]), destination[1], destination[2]);
  }
  ticks.finish();
  return build_csr(n, src, dst,
                   {.symmetrize = true, .self_loops = SelfLoops::kRemove, .duplicates = Duplicates::kRemove});
}

// Class means with unit expected norm, so that `signal` alone sets how far apart the classes are.
Matrix draw_class_means(const Draws& draws, const GeneratorOptions& options) {
  Matrix means(options.classes, options.features);
  const double scale = options.signal / std::sqrt(static_cast<double>(options.features));
  for (std::int64_t c = 0; c < means.rows(); ++c) {
    for (std::int64_t j = 0; j < means.cols(); j += 4) {
      const auto z =
          normals(draws.block(Draw::kClassMean, static_cast<std::uint64_t>(c), static_cast<std::uint32_t>(j / 4)));
      for (std::int64_t k = j; k < std::min(j + 4, means.cols()); ++k) {
        means(c, k) = static_cast<float>(scale * z[static_cast<std::size_t>(k - j)]);
      }
    }
  }
  return means;
}

Matrix draw_features(const Draws& draws, const GeneratorOptions& options, const std::vector<std::int32_t>& label,
                     const ProgressCallback& progress) {
  const Matrix means = draw_class_means(draws, options);
  Matrix features(options.vertices, options.features);
  const std::int64_t width = options.features;
  ProgressTicks ticks(progress, "features", features.rows());
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < features.rows(); ++v) {
    if (omp_get_thread_num() == 0) ticks.tick(v * omp_get_num_threads());
    float* row = features.row(v);
    const float* mean = means.row(label[static_cast<std::size_t>(v)]);
    for (std::int64_t j = 0; j < width; j += 4) {
      const auto z =
          normals(draws.block(Draw::kNoise, static_cast<std::uint64_t>(v), static_cast<std::uint32_t>(j / 4)));
      for (std::int64_t k = j; k < std::min(j + 4, width); ++k) row[k] = mean[k] + z[static_cast<std::size_t>(k - j)];
    }
  }
  ticks.finish();
  return features;
}

// Splits of exact sizes: vertices ordered by a random key (ties impossible, the id is in the low bits).
void draw_splits(const Draws& draws, const GeneratorOptions& options, Dataset& dataset) {
  const auto n = static_cast<std::size_t>(options.vertices);
  std::vector<std::uint64_t> key(n);
#pragma omp parallel for schedule(static)
  for (std::size_t v = 0; v < n; ++v) key[v] = (static_cast<std::uint64_t>(draws.block(Draw::kSplit, v)[0]) << 32U) | v;
  std::sort(key.begin(), key.end());
  const auto train =
      std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(options.train_fraction * static_cast<double>(n))));
  const auto val =
      std::min(n - train, static_cast<std::size_t>(std::llround(options.val_fraction * static_cast<double>(n))));
  dataset.train_mask.assign(n, 0);
  dataset.val_mask.assign(n, 0);
  dataset.test_mask.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    auto& mask = i < train ? dataset.train_mask : i < train + val ? dataset.val_mask : dataset.test_mask;
    mask[key[i] & 0xFFFFFFFFU] = 1;
  }
}

bool in_closed_unit_interval(double x) { return x >= 0.0 && x <= 1.0; }

}  // namespace

void validate(const GeneratorOptions& options) {
  NJ_REQUIRE(options.classes >= 2, "--classes must be at least 2, got {}", options.classes);
  NJ_REQUIRE(options.vertices >= options.classes && options.vertices <= std::numeric_limits<vid_t>::max(),
             "--vertices must be at least --classes ({}) and at most {}, got {}", options.classes,
             std::numeric_limits<vid_t>::max(), options.vertices);
  NJ_REQUIRE(options.edges >= 0 && options.edges <= options.vertices * (options.vertices - 1),
             "--edges must be in [0, vertices * (vertices - 1) = {}], got {}",
             options.vertices * (options.vertices - 1), options.edges);
  NJ_REQUIRE(options.features >= 1, "--features must be at least 1, got {}", options.features);
  NJ_REQUIRE(in_closed_unit_interval(options.homophily), "--homophily must be in [0, 1], got {}", options.homophily);
  NJ_REQUIRE(std::isfinite(options.signal) && options.signal >= 0.0, "--signal must be finite and non-negative, got {}",
             options.signal);
  NJ_REQUIRE(std::isfinite(options.degree_exponent) && options.degree_exponent > 1.0,
             "--degree-exponent must be finite and greater than 1, got {}", options.degree_exponent);
  NJ_REQUIRE(options.train_fraction > 0.0 && options.train_fraction <= 1.0,
             "--train-fraction must be in (0, 1], got {}", options.train_fraction);
  NJ_REQUIRE(in_closed_unit_interval(options.val_fraction), "--val-fraction must be in [0, 1], got {}",
             options.val_fraction);
  NJ_REQUIRE(options.train_fraction + options.val_fraction <= 1.0,
             "--train-fraction + --val-fraction must be at most 1, got {} + {}", options.train_fraction,
             options.val_fraction);
}

Dataset generate_dataset(const GeneratorOptions& options, const ProgressCallback& progress) {
  validate(options);
  const Draws draws(options.seed);
  Dataset dataset;
  dataset.name = options.name;
  dataset.num_classes = options.classes;
  dataset.labels = draw_classes(draws, static_cast<vid_t>(options.vertices), options.classes);
  dataset.graph = draw_graph(draws, options, dataset.labels, progress);
  dataset.symmetrized = true;
  dataset.self_loops = SelfLoopPolicy::kRemoved;
  dataset.features = draw_features(draws, options, dataset.labels, progress);
  draw_splits(draws, options, dataset);
  return dataset;
}

}  // namespace nj
