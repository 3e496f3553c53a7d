#include "nj/partition/partition.hpp"

#include <metis.h>

#include <chrono>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>

#include "nj/core/enum_names.hpp"
#include "nj/core/error.hpp"

namespace nj {
namespace {

// The adjacency goes to METIS as it is, without a copy.
static_assert(std::is_same_v<idx_t, vid_t>, "METIS's idx_t must be vid_t (Debian's METIS is 32-bit)");

// Keeps the random assignment's stream apart from those that use the same seed elsewhere (features, splits).
constexpr std::uint32_t kPartitionPurpose = 3;

// How errors name the dataset.
std::string name_of(const Dataset& dataset) { return dataset.name.empty() ? "the dataset" : dataset.name; }

const char* metis_status(int status) {
  switch (status) {
    case METIS_ERROR_INPUT: return "METIS_ERROR_INPUT (the input graph is invalid)";
    case METIS_ERROR_MEMORY: return "METIS_ERROR_MEMORY (out of memory)";
    default: return "METIS_ERROR";
  }
}

// METIS k-way on the simple undirected graph. Vertex weights (1, is training vertex) make METIS balance the
// training vertices as well as all vertices, so that every rank has a similar share of the loss's work.
std::vector<std::int32_t> metis_parts(const Dataset& dataset, CsrGraph& simple, int parts, std::uint64_t seed) {
  const vid_t n = dataset.num_vertices();
  require_fits_metis(name_of(dataset), n, simple.num_edges());
  std::vector<idx_t> offsets(simple.offsets.begin(), simple.offsets.end());
  const bool has_training_vertex = count(dataset.train_mask) > 0;
  idx_t vertices = n;
  idx_t constraints = has_training_vertex ? 2 : 1;
  std::vector<idx_t> weights;
  if (has_training_vertex) {
    weights.reserve(2 * static_cast<std::size_t>(n));
    for (const std::uint8_t training : dataset.train_mask) {
      weights.push_back(1);
      weights.push_back(training != 0 ? 1 : 0);
    }
  }
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  // Fold the 64-bit seed into a non-negative idx_t; METIS reads -1 as "its own default seed".
  options[METIS_OPTION_SEED] = static_cast<idx_t>((seed ^ (seed >> 32U)) & 0x7FFFFFFFU);
  idx_t part_count = parts;
  idx_t cut = 0;
  std::vector<idx_t> part(static_cast<std::size_t>(n));
  idx_t no_edges = 0;  // METIS is given a valid pointer even for a graph without edges
  const int status = METIS_PartGraphKway(&vertices, &constraints, offsets.data(),
                                         simple.sources.empty() ? &no_edges : simple.sources.data(),
                                         weights.empty() ? nullptr : weights.data(), nullptr, nullptr, &part_count,
                                         nullptr, nullptr, options, &cut, part.data());
  NJ_REQUIRE(status == METIS_OK, "METIS_PartGraphKway failed on {} ({} parts): {}", name_of(dataset), parts,
             metis_status(status));
  return part;
}

// A seeded random permutation dealt round-robin: uniformly random, and every part gets floor(n/P) or
// ceil(n/P) vertices.
std::vector<std::int32_t> random_parts(vid_t n, int parts, std::uint64_t seed) {
  std::seed_seq sequence{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32U), kPartitionPurpose};
  std::mt19937_64 rng(sequence);
  std::vector<vid_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), vid_t{0});
  // Fisher-Yates with the generator's raw output, so the permutation does not depend on the standard library.
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  std::vector<std::int32_t> part(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < order.size(); ++i) {
    part[static_cast<std::size_t>(order[i])] = static_cast<std::int32_t>(i % static_cast<std::size_t>(parts));
  }
  return part;
}

std::vector<std::int32_t> contiguous_parts(vid_t n, int parts) {
  std::vector<std::int32_t> part(static_cast<std::size_t>(n));
  for (vid_t v = 0; v < n; ++v) {
    part[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(static_cast<std::int64_t>(v) * parts / n);
  }
  return part;
}

}  // namespace

constexpr EnumNames<PartitionMethod, 4> kPartitionMethodNames{"partition method",
                                                              {{{PartitionMethod::kMetis, "metis"},
                                                                {PartitionMethod::kRandom, "random"},
                                                                {PartitionMethod::kContiguous, "contiguous"},
                                                                {PartitionMethod::kScotch, "scotch"}}}};

const char* to_string(PartitionMethod method) { return kPartitionMethodNames.name(method); }
PartitionMethod parse_partition_method(const std::string& text) { return kPartitionMethodNames.parse(text); }

void require_fits_metis(const std::string& what, std::int64_t vertices, std::int64_t adjacency_entries) {
  constexpr std::int64_t kLimit = std::numeric_limits<idx_t>::max();
  NJ_REQUIRE(vertices <= kLimit && adjacency_entries <= kLimit,
             "{}: {} vertices and {} adjacency entries (twice the undirected edges) exceed METIS's 32-bit idx_t "
             "(at most {} each); use --method scotch",
             what, vertices, adjacency_entries, kLimit);
}

std::vector<std::int32_t> assign_parts(const Dataset& dataset, const PartitionOptions& options, PartitionInfo& info) {
  const vid_t n = dataset.num_vertices();
  NJ_EXPECTS(options.method != PartitionMethod::kScotch, "scotch partitions through partition_in_parallel");
  NJ_REQUIRE(options.parts >= 1 && options.parts <= n,
             "{}: cannot split {} vertices into {} parts (parts must be between 1 and the number of vertices)",
             name_of(dataset), n, options.parts);
  // The seconds cover what the method needs, METIS's undirected input graph included.
  const bool uses_metis = options.method == PartitionMethod::kMetis && options.parts > 1;
  const auto start = std::chrono::steady_clock::now();
  CsrGraph simple = uses_metis ? simple_undirected_graph(dataset.graph) : CsrGraph{};
  std::vector<std::int32_t> part_of;
  if (options.parts == 1) {
    part_of.assign(static_cast<std::size_t>(n), 0);
  } else if (uses_metis) {
    part_of = metis_parts(dataset, simple, options.parts, options.seed);
  } else if (options.method == PartitionMethod::kRandom) {
    part_of = random_parts(n, options.parts, options.seed);
  } else {
    part_of = contiguous_parts(n, options.parts);
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  if (!uses_metis) simple = simple_undirected_graph(dataset.graph);

  info = PartitionInfo{};
  info.method = to_string(options.method);
  info.parts = options.parts;
  info.seed = options.seed;
  info.seconds = elapsed.count();
  fill_part_counts(dataset, simple, part_of, info);
  return part_of;
}

}  // namespace nj
