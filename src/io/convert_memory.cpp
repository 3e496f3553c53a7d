#include "nj/io/convert_memory.hpp"

#include <algorithm>

#include "nj/io/feature_blocks.hpp"

namespace nj {
namespace {

constexpr std::int64_t kKeyBytes = 8;                  // an edge in a sorted run
constexpr std::int64_t kMergeBufferBytes = 512 << 10;  // a run's read buffer while merging
// The merged sources' buffer, and the one that copies them to the file.
constexpr std::int64_t kMergeWriteBytes = (256 + 4096) << 10;
constexpr std::int64_t kTextReaderBytes = 192 << 10;  // a text file's read and gzip buffers
// What HDF5 allocates to write a chunk of /graph/indices, or of sparse features.
constexpr std::int64_t kChunkBytes = 4 << 20;

// What the later phases hold throughout: the offsets, and the relabelled ids to write them; while the vertex data is
// read, the ids to look them up too.
std::int64_t held_per_vertex(const ConvertCounts& c, bool looking_up = false) {
  return 8 * (c.vertices + 1) + (c.relabelled ? (looking_up ? 16 : 8) * c.vertices : 0);
}

std::int64_t finding_vertices(const ConvertCounts& c) {
  // Relabelled: the distinct ids with a run of ids read since they were last made distinct, and the distinct ids again
  // as they are copied out of the run's room.
  return kTextReaderBytes + (c.relabelled ? 8 * (2 * c.vertices + c.id_run) : 0);
}

std::int64_t sorting(const ConvertCounts& c) {
  return kTextReaderBytes + kKeyBytes * c.run_keys + (c.relabelled ? 8 * c.vertices : 0);
}

std::int64_t merging(const ConvertCounts& c) {
  return held_per_vertex(c) + c.runs * kMergeBufferBytes + kMergeWriteBytes + kChunkBytes;
}

// The labels and masks (7 bytes a vertex), with the labelled vertices a random split shuffles (4 bytes each).
std::int64_t reading_vertex_data(const ConvertCounts& c) {
  return held_per_vertex(c, true) + kTextReaderBytes + 11 * c.vertices;
}

// One block of feature rows, and where they are stored sparse its entries (8 bytes each) and row offsets.
std::int64_t writing_vertex_data(const ConvertCounts& c) {
  const std::int64_t rows = std::min(feature_block_rows(c.feature_width), c.vertices);
  std::int64_t block = 4 * rows * c.feature_width + kTextReaderBytes;
  if (c.features_sparse && c.vertices > 0) {
    // A block's entries and row offsets, and the chunk HDF5 reads back to write part of it (indices, then values).
    block += 8 * rows + 8 * (c.feature_entries * rows / c.vertices) + kChunkBytes;
  }
  return held_per_vertex(c) + 7 * c.vertices + (c.community_order ? 4 * c.vertices : 0) + block;
}

}  // namespace

ConvertCounts convert_counts(std::int64_t vertices, std::int64_t edges, std::int64_t feature_width,
                             std::int64_t memory_limit, bool relabelled) {
  const std::int64_t run_keys = std::max<std::int64_t>(memory_limit / 2 / kKeyBytes, 2);
  ConvertCounts counts{.vertices = vertices,
                       .edges = edges,
                       .run_keys = std::min(run_keys, edges),
                       .runs = (edges + run_keys - 1) / run_keys,
                       .relabelled = relabelled,
                       .id_run = relabelled ? std::min(run_keys, edges) : 0,
                       .feature_width = feature_width};
  counts.community_order = community_order_fits(counts, memory_limit);
  return counts;
}

// The graph read back (4 bytes an edge), the whole graph's degrees, self-loops and ids (17 bytes a vertex), and label
// propagation's labels, sizes and previous labels with the order and its copy (20 bytes a vertex); the first three lie
// on huge pages, each rounded up to 2 MiB.
std::int64_t community_order_bytes(const ConvertCounts& c) {
  constexpr std::int64_t kHugePageRounding = 3 * (2 << 20);
  return held_per_vertex(c) + 7 * c.vertices + 4 * c.edges + 37 * c.vertices + kHugePageRounding;
}

bool community_order_fits(const ConvertCounts& counts, std::int64_t memory_limit) {
  return community_order_bytes(counts) <= memory_limit;
}

std::vector<PhaseBytes> convert_phase_bytes(const ConvertCounts& counts) {
  std::vector<PhaseBytes> phases = {{"finding the vertices", finding_vertices(counts)},
                                    {"sorting the edges", sorting(counts)},
                                    {"merging the runs", merging(counts)},
                                    {"reading the vertex data", reading_vertex_data(counts)}};
  if (counts.community_order) phases.push_back({"the community order", community_order_bytes(counts)});
  phases.push_back({"writing the vertex data", writing_vertex_data(counts)});
  return phases;
}

}  // namespace nj
