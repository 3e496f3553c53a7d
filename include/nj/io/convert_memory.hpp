#pragma once
// The host memory nj convert holds at the peak of each of its phases, beyond what its process held before it read
// anything, where it streams an edge list (or an OGB folder) into the dataset file: the formulas it logs beside each
// phase's measured peak, and that `nj convert --forecast` evaluates for a graph that is not at hand. docs/convert.md
// ("What a conversion holds") explains each term.
#include <cstdint>
#include <vector>

#include "nj/core/phase_memory.hpp"

namespace nj {

struct ConvertCounts {
  std::int64_t vertices = 0;
  std::int64_t edges = 0;     // stored in the file, after --undirected, --self-loops and --duplicates
  std::int64_t run_keys = 0;  // the most edges a sorted run held (8 bytes each)
  std::int64_t runs = 0;      // sorted runs merged
  bool relabelled = false;    // --relabel: the distinct ids are held, and written
  std::int64_t id_run = 0;    // relabelled: the most ids read before they were made distinct again (8 bytes each)
  std::int64_t feature_width = 0;
  bool features_sparse = false;
  std::int64_t feature_entries = 0;  // the non-zero features, where they are stored sparse
  bool community_order = false;      // found: the whole graph was read back
};

// The counts of a graph of `vertices` vertices and `edges` stored edges converted within `memory_limit` (--memory):
// sorted in runs of half of it, with dense features, and the community order where finding it fits within the limit.
ConvertCounts convert_counts(std::int64_t vertices, std::int64_t edges, std::int64_t feature_width,
                             std::int64_t memory_limit, bool relabelled);

// What finding the community order holds (its phase below), whether or not it is found; and whether that fits within
// `memory_limit`, where nj convert finds it.
std::int64_t community_order_bytes(const ConvertCounts& counts);
bool community_order_fits(const ConvertCounts& counts, std::int64_t memory_limit);

// The phases in the order they run: finding the vertices, sorting the edges, merging the runs, reading the vertex
// data, the community order (where it is found), writing the vertex data.
std::vector<PhaseBytes> convert_phase_bytes(const ConvertCounts& counts);

}  // namespace nj
