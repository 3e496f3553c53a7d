#pragma once
// OGB node-property-prediction dataset folders, as the OGB loaders download and unpack them:
//   raw/edge.csv.gz           `src,dst` per line, one directed edge each
//   raw/node-feat.csv.gz      comma-separated floats, line i is vertex i (optional)
//   raw/node-label.csv.gz     one integer per line, `nan` for unlabelled (optional)
//   raw/num-node-list.csv.gz  the vertex count (optional; else the largest id + 1)
//   split/<scheme>/{train,valid,test}.csv.gz  vertex ids, one per line
// Uncompressed `.csv` files are read as well.
#include <string>

#include "nj/graph/dataset.hpp"
#include "nj/io/plain_text.hpp"

namespace nj {

// An OGB folder as the files it holds: its edge list, and the options that read it and name the vertex data's files.
struct OgbFiles {
  std::string edges;
  ConvertOptions options;
};
// split_scheme picks the folder under split/; empty takes the only one there is. Files named in options.data
// take the place of the folder's own; options.ids does not apply (OGB ids are 0-based and dense).
OgbFiles ogb_files(const std::string& folder, ConvertOptions options, const std::string& split_scheme);

}  // namespace nj
