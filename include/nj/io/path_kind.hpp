#pragma once
// What a path handed to nj is, told from its names alone (nothing is read), so that a command given a folder where
// it reads a file can say what the folder holds and what to run instead.
#include <string>

namespace nj {

enum class PathKind {
  kMissing,
  kFile,
  kPartitionFolder,  // written by nj partition: manifest.json and its shards
  kPlainFolder,      // a plain-text export: meta.txt, edges.txt, ... (nj convert --format plain)
  kOgbFolder,        // an OGB dataset: raw/edge.csv[.gz], ... (nj convert --format ogb)
  kOtherFolder,
};
PathKind path_kind(const std::string& path);

}  // namespace nj
