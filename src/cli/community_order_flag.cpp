// The community order that nj convert and nj generate store with a dataset file (store_community_order).
#include <spdlog/spdlog.h>

#include <chrono>

#include "cli/commands.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/graph/vertex_order.hpp"

namespace nj::cli {

void add_community_order_flag(CLI::App& command, bool& store) {
  command
      .add_flag("--community-order,!--no-community-order", store,
                "Store the vertices' community order with the file (label propagation over the graph, the order "
                "nj train and nj plan number the vertices by), so that single-process runs read it instead of "
                "searching for it each time")
      ->capture_default_str();
}

void add_community_order(Dataset& dataset, bool store) {
  if (!store) return;
  const auto start = std::chrono::steady_clock::now();
  store_community_order(dataset);
  spdlog::info("community order of {} vertices found in {:.2f} s", dataset.num_vertices(), seconds_since(start));
}

}  // namespace nj::cli
