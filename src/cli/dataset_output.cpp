// What nj convert and nj generate decide about the dataset file they write: whether it stores the community order
// (store_community_order), and how it stores the features (dense, or sparse where they are mostly zero).
#include <spdlog/spdlog.h>

#include <chrono>

#include "cli/commands.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/io/dataset_file.hpp"

namespace nj::cli {

void add_dataset_output_options(CLI::App& command, DatasetOutputArguments& args) {
  command
      .add_flag("--community-order,!--no-community-order", args.community_order,
                "Store the vertices' community order with the file (label propagation over the graph, the order "
                "nj train and nj plan number the vertices by), so that single-process runs read it instead of "
                "searching for it each time")
      ->capture_default_str();
  command
      .add_option("--feature-storage", args.feature_storage,
                  "How the file stores the features: dense, sparse (compressed rows: for bag-of-words features), or "
                  "auto (sparse where that takes at most half the bytes)")
      ->check(one_of({"auto", "dense", "sparse"}))
      ->capture_default_str();
}

void write_dataset_output(Dataset& dataset, const std::string& path, const DatasetOutputArguments& args) {
  if (args.community_order) {
    const auto start = std::chrono::steady_clock::now();
    store_community_order(dataset);
    spdlog::info("community order of {} vertices found in {:.2f} s", dataset.num_vertices(), seconds_since(start));
  }
  const FeatureStorage storage = parse_feature_storage(args.feature_storage);
  write_dataset(path, dataset, storage);
  spdlog::info("features stored {}", stores_sparse(dataset.features, storage) ? "sparse" : "dense");
}

}  // namespace nj::cli
