#include "nj/graph/generate.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <span>
#include <tuple>

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

bool in_closed_unit_interval(double x) { return x >= 0.0 && x <= 1.0; }

}  // namespace

// Draws vertices with probability proportional to their weight, from one class or from all classes but one,
// in constant time: a class by binary search over the (few) class weights, then a vertex of that class from
// its alias table (Vose's method), which costs one memory access where a search over all vertices would
// miss the cache at every step.
class SyntheticModel::Sampler {
 public:
  Sampler(const std::vector<std::int32_t>& label, const std::vector<double>& weight, std::int32_t classes)
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

SyntheticModel::SyntheticModel(const GeneratorOptions& options) : options_(options) {
  validate(options_);
  const Draws draws(options_.seed);
  const auto n = static_cast<vid_t>(options_.vertices);
  labels_ = draw_classes(draws, n, options_.classes);
  sampler_ = std::make_unique<const Sampler>(labels_, draw_degree_weights(draws, n, options_.degree_exponent),
                                             options_.classes);
  class_means_ = draw_class_means(draws, options_);
}

SyntheticModel::~SyntheticModel() = default;

// Chung-Lu pairs with communities, one Philox block per endpoint: the source by weight over all vertices; the
// destination by weight inside the source's class with probability `homophily`, else in another class.
std::pair<vid_t, vid_t> SyntheticModel::pair(std::int64_t i) const {
  const Draws draws(options_.seed);
  const auto source = draws.block(Draw::kEdge, static_cast<std::uint64_t>(i), 0);
  const auto destination = draws.block(Draw::kEdge, static_cast<std::uint64_t>(i), 1);
  const vid_t s = sampler_->in_class(sampler_->any_class(source[0]), source[1], source[2]);
  const std::int32_t c = labels_[static_cast<std::size_t>(s)];
  const bool same_class = unit(source[3]) < options_.homophily;
  return {
      s, sampler_->in_class(same_class ? c : sampler_->other_class(c, destination[0]), destination[1], destination[2])};
}

Matrix SyntheticModel::features(std::int64_t first, std::int64_t rows) const {
  const Draws draws(options_.seed);
  Matrix features(rows, options_.features);
  const std::int64_t width = options_.features;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t v = first + r;
    float* row = features.row(r);
    const float* mean = class_means_.row(labels_[static_cast<std::size_t>(v)]);
    for (std::int64_t j = 0; j < width; j += 4) {
      const auto z =
          normals(draws.block(Draw::kNoise, static_cast<std::uint64_t>(v), static_cast<std::uint32_t>(j / 4)));
      for (std::int64_t k = j; k < std::min(j + 4, width); ++k) row[k] = mean[k] + z[static_cast<std::size_t>(k - j)];
    }
  }
  return features;
}

// The vertex id in the low bits makes keys distinct.
std::uint64_t SyntheticModel::split_key(std::int64_t v) const {
  const Draws draws(options_.seed);
  return (static_cast<std::uint64_t>(draws.block(Draw::kSplit, static_cast<std::uint64_t>(v))[0]) << 32U) |
         static_cast<std::uint64_t>(v);
}

std::int64_t SyntheticModel::train_size() const {
  return std::max<std::int64_t>(1, std::llround(options_.train_fraction * static_cast<double>(options_.vertices)));
}

std::int64_t SyntheticModel::val_size() const {
  return std::min(
      options_.vertices - train_size(),
      static_cast<std::int64_t>(std::llround(options_.val_fraction * static_cast<double>(options_.vertices))));
}

void validate(const GeneratorOptions& options) {
  NJ_USAGE(options.classes >= 2, "--classes must be at least 2, got {}", options.classes);
  NJ_USAGE(options.vertices >= options.classes && options.vertices <= std::numeric_limits<vid_t>::max(),
           "--vertices must be at least --classes ({}) and at most {}, got {}", options.classes,
           std::numeric_limits<vid_t>::max(), options.vertices);
  NJ_USAGE(options.edges >= 0 && options.edges <= options.vertices * (options.vertices - 1),
           "--edges must be in [0, vertices * (vertices - 1) = {}], got {}", options.vertices * (options.vertices - 1),
           options.edges);
  NJ_USAGE(options.features >= 1, "--features must be at least 1, got {}", options.features);
  NJ_USAGE(in_closed_unit_interval(options.homophily), "--homophily must be in [0, 1], got {}", options.homophily);
  NJ_USAGE(std::isfinite(options.signal) && options.signal >= 0.0, "--signal must be finite and non-negative, got {}",
           options.signal);
  NJ_USAGE(std::isfinite(options.degree_exponent) && options.degree_exponent > 1.0,
           "--degree-exponent must be finite and greater than 1, got {}", options.degree_exponent);
  NJ_USAGE(options.train_fraction > 0.0 && options.train_fraction <= 1.0, "--train-fraction must be in (0, 1], got {}",
           options.train_fraction);
  NJ_USAGE(in_closed_unit_interval(options.val_fraction), "--val-fraction must be in [0, 1], got {}",
           options.val_fraction);
  NJ_USAGE(options.train_fraction + options.val_fraction <= 1.0,
           "--train-fraction + --val-fraction must be at most 1, got {} + {}", options.train_fraction,
           options.val_fraction);
}

namespace {

CsrGraph draw_graph(const SyntheticModel& model, const ProgressCallback& progress) {
  const std::int64_t pairs = model.pairs();
  std::vector<vid_t> src(static_cast<std::size_t>(pairs));
  std::vector<vid_t> dst(static_cast<std::size_t>(pairs));
  ProgressTicks ticks(progress, "edges", pairs);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < pairs; ++i) {
    if (omp_get_thread_num() == 0) ticks.tick(i * omp_get_num_threads());
    std::tie(src[static_cast<std::size_t>(i)], dst[static_cast<std::size_t>(i)]) = model.pair(i);
  }
  ticks.finish();
  return build_csr(static_cast<vid_t>(model.options().vertices), src, dst,
                   {.symmetrize = true, .self_loops = SelfLoops::kRemove, .duplicates = Duplicates::kRemove});
}

void draw_splits(const SyntheticModel& model, Dataset& dataset) {
  const auto n = static_cast<std::size_t>(model.options().vertices);
  std::vector<std::uint64_t> key(n);
#pragma omp parallel for schedule(static)
  for (std::size_t v = 0; v < n; ++v) key[v] = model.split_key(static_cast<std::int64_t>(v));
  std::sort(key.begin(), key.end());
  const auto train = static_cast<std::size_t>(model.train_size());
  const auto val = static_cast<std::size_t>(model.val_size());
  dataset.train_mask.assign(n, 0);
  dataset.val_mask.assign(n, 0);
  dataset.test_mask.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    auto& mask = i < train ? dataset.train_mask : i < train + val ? dataset.val_mask : dataset.test_mask;
    mask[key[i] & 0xFFFFFFFFU] = 1;
  }
}

// Every vertex's features, a block of rows at a time, so that progress is heard as they are drawn.
Matrix draw_features(const SyntheticModel& model, const ProgressCallback& progress) {
  constexpr std::int64_t kRowsPerBlock = 4096;
  const std::int64_t n = model.options().vertices;
  Matrix features(n, model.options().features);
  ProgressTicks ticks(progress, "features", n);
  for (std::int64_t first = 0; first < n; first += kRowsPerBlock) {
    const Matrix block = model.features(first, std::min(kRowsPerBlock, n - first));
    std::copy(block.span().begin(), block.span().end(), features.row(first));
    ticks.tick(first + block.rows());
  }
  ticks.finish();
  return features;
}

}  // namespace

Dataset generate_dataset(const GeneratorOptions& options, const ProgressCallback& progress) {
  const SyntheticModel model(options);
  Dataset dataset;
  dataset.name = options.name;
  dataset.num_classes = options.classes;
  dataset.labels = model.labels();
  dataset.graph = draw_graph(model, progress);
  dataset.symmetrized = true;
  dataset.self_loops = SelfLoopPolicy::kRemoved;
  dataset.features = draw_features(model, progress);
  draw_splits(model, dataset);
  return dataset;
}

}  // namespace nj
