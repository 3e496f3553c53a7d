// nj info: validates a dataset file, a shard file or a partition manifest and prints its statistics, or says what
// a checkpoint holds; as text or as one JSON object.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cli/commands.hpp"
#include "nj/graph/statistics.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/path_kind.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/train/checkpoint.hpp"
#include "nj/train/metrics_log.hpp"

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
  fmt::print("community order: {}\n", dataset.community_order.empty() ? "not stored" : "stored");
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
      {"community_order_stored", !dataset.community_order.empty()},
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

void print_text(const std::string& path, std::uintmax_t file_bytes, const Shard& shard) {
  const LocalGraph& local = shard.local;
  const PartitionInfo& info = shard.partition;
  std::int64_t sent = 0;
  std::int64_t received = 0;
  for (const auto& p : local.peers) {
    sent += static_cast<std::int64_t>(p.send.size());
    received += static_cast<std::int64_t>(p.receive.size());
  }
  fmt::print("file:            {} ({}, {} bytes)\n", path, human_bytes(file_bytes), file_bytes);
  fmt::print("shard:           part {} of {} of {} ({}, seed {})\n", shard.part, info.parts, shard.name, info.method,
             info.seed);
  fmt::print("vertices:        {} owned, {} mirrors (mirror fraction {:.3f}); the whole graph has {}\n",
             local.num_owned, local.num_mirrors(), info.mirror_fraction(shard.part), shard.global_vertices);
  fmt::print(
      "edges:           {} in-edges of owned vertices; the whole graph has {} (symmetrized: {}, self-loops: {})\n",
      local.graph.num_edges(), shard.global_edges, shard.symmetrized ? "yes" : "no", to_string(shard.self_loops));
  fmt::print("features:        {} per vertex\n", shard.features.cols());
  fmt::print("classes:         {}\n", shard.num_classes);
  fmt::print("splits:          train {}, val {}, test {} (the whole graph trains on {})\n", count(shard.train_mask),
             count(shard.val_mask), count(shard.test_mask), shard.global_train);
  fmt::print("exchange:        {} peers; sends {} rows ({} distinct), receives {}\n", local.peers.size(), sent,
             local.boundary_rows().size(), received);
  fmt::print(
      "partition:       edge cut {} of {} undirected edges ({:.2f}%); balance: vertices {:.3f}, "
      "training vertices {:.3f}\n",
      info.edge_cut, info.undirected_edges, 100.0 * info.cut_fraction(), info.vertex_imbalance(),
      info.train_imbalance());
}

nlohmann::json to_json(const std::string& path, std::uintmax_t file_bytes, const Shard& shard) {
  const LocalGraph& local = shard.local;
  const PartitionInfo& info = shard.partition;
  nlohmann::json peers = nlohmann::json::array();
  for (const auto& p : local.peers)
    peers.push_back({{"part", p.peer}, {"send", p.send.size()}, {"receive", p.receive.size()}});
  return {
      {"file", path},
      {"file_bytes", file_bytes},
      {"kind", kShardKind},
      {"name", shard.name},
      {"part", shard.part},
      {"parts", info.parts},
      {"method", info.method},
      {"seed", info.seed},
      {"num_owned", local.num_owned},
      {"num_mirrors", local.num_mirrors()},
      {"mirror_fraction", info.mirror_fraction(shard.part)},
      {"num_edges", local.graph.num_edges()},
      {"global_vertices", shard.global_vertices},
      {"global_edges", shard.global_edges},
      {"global_train", shard.global_train},
      {"symmetrized", shard.symmetrized},
      {"self_loops", to_string(shard.self_loops)},
      {"feature_width", shard.features.cols()},
      {"num_classes", shard.num_classes},
      {"splits",
       {{"train", count(shard.train_mask)}, {"val", count(shard.val_mask)}, {"test", count(shard.test_mask)}}},
      {"peers", peers},
      {"boundary_rows", local.boundary_rows().size()},
      {"edge_cut", info.edge_cut},
      {"undirected_edges", info.undirected_edges},
      {"cut_fraction", info.cut_fraction()},
      {"vertex_imbalance", info.vertex_imbalance()},
      {"train_imbalance", info.train_imbalance()},
  };
}

void print_text(const std::string& path, const PartitionManifest& manifest) {
  const PartitionInfo& info = manifest.partition;
  fmt::print("manifest:        {}\n", path);
  fmt::print("dataset:         {} ({}): {} vertices, {} edges, {} training\n", manifest.dataset_name,
             manifest.dataset_path, manifest.global_vertices, manifest.global_edges, manifest.global_train);
  fmt::print("partition:       {} parts by {}, seed {}, in {:.2f} s\n", info.parts, info.method, info.seed,
             info.seconds);
  fmt::print("edge cut:        {} of {} undirected edges ({:.2f}%)\n", info.edge_cut, info.undirected_edges,
             100.0 * info.cut_fraction());
  fmt::print("balance:         vertices {:.3f}, training vertices {:.3f} (max / mean)\n", info.vertex_imbalance(),
             info.train_imbalance());
  for (int p = 0; p < info.parts; ++p) {
    const auto i = static_cast<std::size_t>(p);
    fmt::print("{:<17}{}: {} owned, {} mirrors (mirror fraction {:.3f}), {} training, {} in-edges\n",
               fmt::format("part {}:", p), manifest.shard_files[i], info.owned[i], info.mirrors[i],
               info.mirror_fraction(p), info.train[i], info.in_edges[i]);
  }
}

std::string format_accuracy(double value) { return std::isnan(value) ? "-" : fmt::format("{:.4f}", value); }

void print_text(const std::string& path, std::uintmax_t file_bytes, const CheckpointSummary& checkpoint) {
  const RunIdentity& run = checkpoint.run;
  const TrainingProgress& progress = checkpoint.progress;
  std::int64_t values = 0;
  std::vector<std::string> arrays;
  for (const auto& [name, shape] : checkpoint.parameters) {
    values += std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
    arrays.push_back(fmt::format("{} {}", name, fmt::join(shape, "x")));
  }
  fmt::print("file:            {} ({}, {} bytes)\n", path, human_bytes(file_bytes), file_bytes);
  fmt::print("checkpoint:      format {}, {} epochs done, {} Adam steps\n", checkpoint.format, progress.next_epoch,
             checkpoint.adam_steps);
  fmt::print("model:           {}\n", run.model);
  if (progress.best_val_accuracy.valid()) {
    fmt::print("best validation: {} at epoch {} (train {}, test {})\n", format_accuracy(progress.best_val_accuracy.val),
               progress.best_val_epoch + 1, format_accuracy(progress.best_val_accuracy.train),
               format_accuracy(progress.best_val_accuracy.test));
  }
  fmt::print("latest:          train {}, val {}, test {}\n", format_accuracy(progress.final_accuracy.train),
             format_accuracy(progress.final_accuracy.val), format_accuracy(progress.final_accuracy.test));
  fmt::print("dataset:         {}\n", run.dataset);
  fmt::print("graph:           {}\n",
             run.graph ? fmt::format("'{}': {} vertices, {} edges, structure {:016x}", run.graph->name,
                                     run.graph->vertices, run.graph->edges, run.graph->structure)
                       : std::string("not recorded (checkpoints record it from format 3)"));
  fmt::print("partitioning:    {}\n", run.partitioning);
  fmt::print("optimizer:       {}{}\n", run.optimizer,
             std::isnan(run.lr) ? std::string() : fmt::format(", trained at lr {}", run.lr));
  fmt::print("parameters:      {} values in {} arrays: {}\n", values, arrays.size(), fmt::join(arrays, ", "));
}

nlohmann::json to_json(const std::string& path, std::uintmax_t file_bytes, const CheckpointSummary& checkpoint) {
  const RunIdentity& run = checkpoint.run;
  const TrainingProgress& progress = checkpoint.progress;
  nlohmann::json model = {{"description", run.model}};
  if (checkpoint.model) {
    const ModelConfig& m = *checkpoint.model;
    model.update({{"kind", to_string(m.kind)},
                  {"layers", m.layers},
                  {"hidden", m.hidden},
                  {"heads", m.heads},
                  {"output_heads", m.output_heads},
                  {"activation", to_string(m.activation)},
                  {"dropout", m.dropout},
                  {"attention_dropout", m.attention_dropout},
                  {"gin_eps", m.gin_eps},
                  {"gin_train_eps", m.gin_train_eps},
                  {"propagation_steps", m.propagation_steps},
                  {"teleport", m.teleport},
                  {"seed", m.seed}});
  }
  nlohmann::json parameters = nlohmann::json::array();
  for (const auto& [name, shape] : checkpoint.parameters) parameters.push_back({{"name", name}, {"shape", shape}});
  nlohmann::json graph = nullptr;
  if (run.graph) {
    graph = {{"name", run.graph->name},
             {"vertices", run.graph->vertices},
             {"edges", run.graph->edges},
             {"structure", fmt::format("{:016x}", run.graph->structure)}};
  }
  return {
      {"file", path},
      {"file_bytes", file_bytes},
      {"kind", "nj-checkpoint"},
      {"format", checkpoint.format},
      {"model", model},
      {"epochs_done", progress.next_epoch},
      {"best_val_epoch", progress.best_val_accuracy.valid() ? nlohmann::json(progress.best_val_epoch + 1) : nullptr},
      {"best_val", to_json(progress.best_val_accuracy)},
      {"final", to_json(progress.final_accuracy)},
      {"dataset", run.dataset},
      {"graph", graph},
      {"partitioning", run.partitioning},
      {"optimizer", run.optimizer},
      {"lr", std::isnan(run.lr) ? nlohmann::json(nullptr) : nlohmann::json(run.lr)},
      {"adam_steps", checkpoint.adam_steps},
      {"parameters", parameters}};
}

// A folder or a .json file is a partition manifest; an HDF5 file is a checkpoint or a shard when it says so, else
// a dataset.
// How the file stores its features: printed after the rest, or added to the JSON object.
void print_feature_storage(const std::string& path, bool json, nlohmann::json* document) {
  const StoredFeatures stored = stored_features(hdf5::File::open_read(path));
  if (json) {
    (*document)["feature_storage"] = stored.sparse ? "sparse" : "dense";
    (*document)["feature_entries_stored"] = stored.sparse ? stored.nonzeros : stored.rows * stored.width;
    return;
  }
  fmt::print("feature storage: {}\n",
             stored.sparse ? fmt::format("sparse, {} non-zero entries stored", stored.nonzeros) : std::string("dense"));
}

void run_info(const std::string& path, bool json) {
  const PathKind kind = path_kind(path);
  if (kind != PathKind::kPartitionFolder && kind != PathKind::kFile) {
    require_dataset_file(path, PartitionFolders::kNotRead);  // a folder of another kind: what it is instead
  }
  if (kind == PathKind::kPartitionFolder || std::filesystem::path(path).extension() == ".json") {
    const PartitionManifest manifest = read_manifest(path);
    const auto manifest_path = (std::filesystem::path(manifest.directory) / kManifestFileName).string();
    if (json) {
      auto document = to_json(manifest);
      document["file"] = manifest_path;
      std::cout << document.dump(2) << '\n';
    } else {
      print_text(manifest_path, manifest);
    }
    return;
  }
  if (is_checkpoint_file(path)) {
    const CheckpointSummary checkpoint = read_checkpoint_summary(path);
    const auto file_bytes = std::filesystem::file_size(path);
    if (json) {
      std::cout << to_json(path, file_bytes, checkpoint).dump(2) << '\n';
    } else {
      print_text(path, file_bytes, checkpoint);
    }
    return;
  }
  if (is_shard_file(path)) {
    const Shard shard = read_shard(path);
    const auto file_bytes = std::filesystem::file_size(path);
    if (json) {
      nlohmann::json document = to_json(path, file_bytes, shard);
      print_feature_storage(path, json, &document);
      std::cout << document.dump(2) << '\n';
    } else {
      print_text(path, file_bytes, shard);
      print_feature_storage(path, json, nullptr);
    }
    return;
  }
  const Dataset dataset = read_dataset(path);
  const DatasetStatistics stats = dataset_statistics(dataset);
  const auto file_bytes = std::filesystem::file_size(path);
  if (json) {
    nlohmann::json document = to_json(path, file_bytes, dataset, stats);
    print_feature_storage(path, json, &document);
    std::cout << document.dump(2) << '\n';
  } else {
    print_text(path, file_bytes, dataset, stats);
    print_feature_storage(path, json, nullptr);
  }
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* command = app.add_subcommand(
      "info",
      "Validate a dataset file, a shard file or a partition (its folder or manifest.json) and print statistics, or "
      "say what a checkpoint holds");
  command
      ->add_option("file", *path,
                   "Dataset, shard or checkpoint file (HDF5), or a partition folder or its manifest.json")
      ->required();
  command->add_flag("--json", *json, "Print the statistics as one JSON object");
  command->callback([path, json] { run_info(*path, *json); });
}

}  // namespace nj::cli
