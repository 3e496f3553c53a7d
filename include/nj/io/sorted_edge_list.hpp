#pragma once
// An edge list larger than memory turned into the dataset file's /graph: the in-edge CSR that build_csr builds from
// read_edge_list's edges, built by an external sort. The edges are read in runs of at most `run_bytes`, each sorted
// by (destination, source) and written to a scratch folder, and the runs are merged into /graph/indices as they are
// read back. What stays in memory is the run, one read buffer per run while merging, and per vertex its offset (and,
// with relabelled ids, its id): docs/convert.md states it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nj/graph/csr.hpp"
#include "nj/graph/dataset.hpp"
#include "nj/io/edge_list.hpp"
#include "nj/io/hdf5.hpp"

namespace nj {

struct ExternalSortOptions {
  std::int64_t run_bytes = std::int64_t{1} << 30;  // edges held at once while reading: 8 bytes each
  std::string scratch;                             // a folder for the runs, removed when done
  // Called as each phase ends (finding the vertices, sorting the edges, merging the runs), where the caller measures
  // them (nj/io/convert_memory.hpp).
  std::function<void()> end_phase = [] {};
};

struct SortedGraph {
  VertexIds ids = VertexIds::dense(0, false);
  std::vector<eid_t> offsets;  // num_vertices + 1, as written to /graph/indptr
  bool symmetrized = false;    // by the options, or because every edge's reverse is there as often
  SelfLoopPolicy self_loops = SelfLoopPolicy::kKept;
  int runs = 0;                     // sorted runs written to the scratch folder
  std::int64_t largest_run = 0;     // the edges the largest of them held
  std::int64_t largest_id_run = 0;  // relabelled ids: the most read before they were made distinct again

  std::int64_t num_edges() const { return offsets.back(); }
};

// Writes /graph/indptr and /graph/indices of the edge list at `path` into `file` (whose /graph group exists), with
// the ids and options read_edge_list and build_csr take; the result equals theirs.
SortedGraph write_sorted_edge_list(const std::string& path, const VertexIdOptions& ids, const EdgeListOptions& options,
                                   const ExternalSortOptions& sort, hdf5::File& file);

}  // namespace nj
