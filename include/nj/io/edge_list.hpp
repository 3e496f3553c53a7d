#pragma once
// Edge-list files (SNAP style and plain): one edge `src dst` per line, separated by tabs, spaces or a comma;
// further columns are ignored; `#` and `%` lines are comments; blank lines are skipped; `.gz` is read as is.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "nj/core/types.hpp"
#include "nj/graph/dataset.hpp"
#include "nj/io/text_reader.hpp"

namespace nj {

struct VertexIdOptions {
  bool one_based = false;  // ids in the files start at 1
  bool relabel = false;    // ids are arbitrary names: the distinct ids of the edge list, sorted, become 0..N-1
  // Dense ids only: the number of vertices, so that ids at or beyond it are errors; < 0 takes the largest id.
  std::int64_t num_vertices = -1;
};

// Maps the vertex ids written in the input files to the graph's 0-based vertices. Every file that names
// vertices (edges, `vertex label` pairs, splits) goes through it, so they all follow the same options.
class VertexIds {
 public:
  // Ids first..first+count-1, with first 0 or 1.
  static VertexIds dense(std::int64_t count, bool one_based);
  // The given distinct ids, sorted ascending; vertex i is the i-th.
  static VertexIds relabelled(std::vector<std::int64_t> sorted_ids, bool one_based);

  vid_t count() const { return static_cast<vid_t>(count_); }
  // The relabelled ids, ascending (vertex i's is the i-th); empty for dense ids.
  const std::vector<std::int64_t>& relabelled_ids() const { return sorted_ids_; }
  // Parses an id as written (a non-negative integer, or positive with one_based ids) without looking it up.
  std::int64_t parse(std::string_view field, const TextReader& at) const;
  // The vertex an id names, or -1 when it names none.
  vid_t find(std::int64_t id) const;
  // The vertex an id names; throws naming file:line when it names none.
  vid_t vertex(std::int64_t id, const TextReader& at) const;
  // parse, then vertex.
  vid_t resolve(std::string_view field, const TextReader& at) const;

 private:
  VertexIds(std::int64_t count, bool one_based, std::vector<std::int64_t> sorted_ids);

  std::int64_t count_ = 0;
  bool one_based_ = false;
  std::vector<std::int64_t> sorted_ids_;  // relabelled ids only
};

struct EdgeList {
  VertexIds ids;
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
};

EdgeList read_edge_list(const std::string& path, const VertexIdOptions& options);

// Calls `edge(src, dst)` with the ids of every edge of the file as written (parsed, and checked against a given vertex
// count); returns the number of edges. Every reader of edge lists goes through it.
std::int64_t for_each_edge_id(const std::string& path, const VertexIdOptions& options,
                              const std::function<void(std::int64_t, std::int64_t)>& edge);
// The vertex ids of a dense edge list once its largest id is known: `options.num_vertices` where given, else up to the
// largest; InputError, naming `path`, beyond this build's vertex ids.
VertexIds dense_vertex_ids(const std::string& path, const VertexIdOptions& options, std::int64_t largest);
// The distinct ids, ascending: what relabelled ids are numbered by.
std::vector<std::int64_t> sorted_distinct(std::vector<std::int64_t> ids);
// The policy recorded for a dataset built with `self_loops`.
SelfLoopPolicy self_loop_policy_of(SelfLoops self_loops);

// Throws InputError naming `where` (the file that gave the count) when a graph of `count` vertices is beyond this
// build's vertex ids or its offsets beyond the input memory limit (input_limits.hpp).
void require_vertex_count(std::int64_t count, const std::string& where);

// Builds the dataset's graph from the edges and records how: `symmetrized` is set when the result is
// symmetric (whether by `options` or because the input already was), `self_loops` from the policy applied.
void set_graph(Dataset& dataset, const EdgeList& edges, const EdgeListOptions& options);

}  // namespace nj
