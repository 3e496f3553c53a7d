#pragma once
// A node-classification dataset in memory: the graph, features, labels, splits and what is known of them.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nj/core/matrix.hpp"
#include "nj/graph/csr.hpp"

namespace nj {

// How self-loops were treated when the graph was built; recorded so that a model can tell what it reads.
enum class SelfLoopPolicy { kKept, kRemoved, kAdded };
const char* to_string(SelfLoopPolicy policy);
SelfLoopPolicy parse_self_loop_policy(const std::string& text);

struct Dataset {
  std::string name;
  CsrGraph graph;
  Matrix features;                   // num_vertices x feature width
  std::vector<std::int32_t> labels;  // num_vertices; -1 = unlabelled (allowed only outside every split)
  std::int32_t num_classes = 0;
  std::vector<std::uint8_t> train_mask;  // num_vertices each, 0 or 1
  std::vector<std::uint8_t> val_mask;
  std::vector<std::uint8_t> test_mask;
  bool symmetrized = false;
  SelfLoopPolicy self_loops = SelfLoopPolicy::kKept;
  bool features_stored_sparse = false;  // read from /features_sparse (nj/io/feature_storage.hpp)
  // The vertices in community order (owned_order of the whole graph, nj/graph/vertex_order.hpp), as nj convert
  // and nj generate store it so that a single-process run reads it instead of searching for it; empty if the
  // file holds none. A permutation of the vertices.
  std::vector<vid_t> community_order;
  // The ids the input named the vertices by, where they were relabelled 0..n-1 (nj convert --relabel): ascending, so
  // that they order the vertices as their indices do, and 64-bit (ids above 2^32 stay as they were). Every shard's
  // global ids are these, and so are inference's vertex ids. Empty: the vertices are named 0..n-1.
  std::vector<gid_t> vertex_ids;

  vid_t num_vertices() const { return graph.num_vertices(); }
  // The name of vertex v: vertex_ids[v], or v.
  gid_t vertex_id(vid_t v) const { return vertex_ids.empty() ? v : vertex_ids[static_cast<std::size_t>(v)]; }
  // Throws nj::InputError (prefixed with `where`) when any part is inconsistent with another.
  void validate(const std::string& where) const;
  // The same for all but the features (for a dataset read without their values).
  void validate_all_but_features(const std::string& where) const;
  // The labels, masks and community order against the vertex count (graph.offsets), the graph's edges unchecked (a
  // graph streamed to the file rather than held).
  void validate_vertex_data(const std::string& where) const;
};

// Count of set entries in a mask.
std::int64_t count(std::span<const std::uint8_t> mask);

// Divides every feature row by its sum of absolute values (PyG's NormalizeFeatures); zero rows stay zero.
void row_normalize(Matrix& features);

// Throws InputError naming `where`, the first vertex (its id in `vertex_ids`, else its row) and column whose feature
// is NaN or infinite: training on them would reach chance accuracy without a word.
// Rows given apart from the whole (a block of them) without their ids are named by their row plus `first_row`.
void require_finite_features(ConstRows features, const std::string& where, std::span<const gid_t> vertex_ids = {},
                             std::int64_t first_row = 0);
inline void require_finite_features(const Matrix& features, const std::string& where,
                                    std::span<const gid_t> vertex_ids = {}) {
  require_finite_features(features.view(), where, vertex_ids);
}

}  // namespace nj
