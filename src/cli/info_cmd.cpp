// nj info: validates a dataset file and prints its statistics, as text or as one JSON object.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "nj/graph/statistics.hpp"
#include "nj/io/dataset_file.hpp"

namespace nj::cli {
namespace {

// Beyond this many classes the text output summarises the histogram; --json always lists every class.
constexpr std::size_t kMaxListedClasses = 20;

std::string human_bytes(std::uintmax_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

std::string class_histogram(const std::vector<std::int64_t>& counts) {
  if (counts.empty()) return "none";
  if (counts.size() <= kMaxListedClasses) {
    std::string text;
    for (std::size_t c = 0; c < counts.size(); ++c) text += fmt::format("{}{}:{}", c == 0 ? "" : " ", c, counts[c]);
    return text;
  }
  const auto [smallest, largest] = std::minmax_element(counts.begin(), counts.end());
  return fmt::format("min {} (class {}), max {} (class {}); --json lists every class", *smallest,
                     smallest - counts.begin(), *largest, largest - counts.begin());
}

void print_text(const std::string& path, std::uintmax_t file_bytes, const Dataset& dataset,
                const DatasetStatistics& stats) {
  const auto& d = stats.degrees;
  const auto& f = stats.features;
  fmt::print("file:            {} ({}, {} bytes)\n", path, human_bytes(file_bytes), file_bytes);
  fmt::print("name:            {}\n", dataset.name);
  fmt::print("vertices:        {}\n", stats.num_vertices);
  fmt::print("edges:           {} directed (symmetrized: {}, self-loops: {})\n", stats.num_edges,
             dataset.symmetrized ? "yes" : "no", to_string(dataset.self_loops));
  fmt::print("in-degree:       min {}, mean {:.2f}, max {}; isolated vertices {}\n", d.min_in_degree, d.mean_in_degree,
             d.max_in_degree, d.isolated_vertices);
  fmt::print("features:        {} per vertex; non-zero {:.1f}%, mean {:.4g}, std {:.4g}\n", stats.feature_width,
             100.0 * f.nonzero_fraction, f.mean, f.stddev);
  fmt::print("classes:         {}; vertices per class: {}; unlabelled {}\n", dataset.num_classes,
             class_histogram(stats.class_counts), stats.unlabelled);
  fmt::print("splits:          train {}, val {}, test {}\n", stats.train, stats.val, stats.test);
  fmt::print("edge homophily:  {:.3f}\n", stats.edge_homophily);
}

nlohmann::json to_json(const std::string& path, std::uintmax_t file_bytes, const Dataset& dataset,
                       const DatasetStatistics& stats) {
  const auto& d = stats.degrees;
  const auto& f = stats.features;
  return {
      {"file", path},
      {"file_bytes", file_bytes},
      {"name", dataset.name},
      {"num_vertices", stats.num_vertices},
      {"num_edges", stats.num_edges},
      {"symmetrized", dataset.symmetrized},
      {"self_loops", to_string(dataset.self_loops)},
      {"in_degree", {{"min", d.min_in_degree}, {"mean", d.mean_in_degree}, {"max", d.max_in_degree}}},
      {"isolated_vertices", d.isolated_vertices},
      {"feature_width", stats.feature_width},
      {"features", {{"nonzero_fraction", f.nonzero_fraction}, {"mean", f.mean}, {"std", f.stddev}}},
      {"num_classes", dataset.num_classes},
      {"class_counts", stats.class_counts},
      {"unlabelled", stats.unlabelled},
      {"splits", {{"train", stats.train}, {"val", stats.val}, {"test", stats.test}}},
      {"edge_homophily", stats.edge_homophily},
  };
}

void run_info(const std::string& path, bool json) {
  const Dataset dataset = read_dataset(path);
  const DatasetStatistics stats = dataset_statistics(dataset);
  const auto file_bytes = std::filesystem::file_size(path);
  if (json) {
    std::cout << to_json(path, file_bytes, dataset, stats).dump(2) << '\n';
  } else {
    print_text(path, file_bytes, dataset, stats);
  }
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* command = app.add_subcommand("info", "Validate a dataset file and print its statistics");
  command->add_option("file", *path, "Dataset file (HDF5)")->required();
  command->add_flag("--json", *json, "Print the statistics as one JSON object");
  command->callback([path, json] { run_info(*path, *json); });
}

}  // namespace nj::cli
