// nj partition: splits a dataset into one shard file per rank and a manifest (docs/dataset-format.md).
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "nj/core/error.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/partition/partition.hpp"

namespace nj::cli {
namespace {

struct PartitionArgs {
  std::string input;
  std::string output;
  std::string method = "metis";
  PartitionOptions options;
};

void log_partition(const PartitionInfo& info) {
  spdlog::info("edge cut: {} of {} undirected edges ({:.2f}%)", info.edge_cut, info.undirected_edges,
               100.0 * info.cut_fraction());
  spdlog::info("balance (max / mean): vertices {:.3f}, training vertices {:.3f}", info.vertex_imbalance(),
               info.train_imbalance());
  for (int p = 0; p < info.parts; ++p) {
    const auto i = static_cast<std::size_t>(p);
    spdlog::info("part {}: {} owned, {} mirrors (mirror fraction {:.3f}), {} training, {} in-edges", p, info.owned[i],
                 info.mirrors[i], info.mirror_fraction(p), info.train[i], info.in_edges[i]);
  }
}

void run_partition(PartitionArgs& args) {
  args.options.method = parse_partition_method(args.method);
  // Checked first, so that a long read does not fail only at its end.
  NJ_REQUIRE(!std::filesystem::exists(args.output) || std::filesystem::is_directory(args.output),
             "{}: exists and is not a folder", args.output);
  require_dataset_file(args.input, PartitionFolders::kNotRead);
  const auto start = std::chrono::steady_clock::now();
  const Dataset dataset = read_dataset(args.input);
  ProgressDisplay progress("partition");
  PartitionInfo info;
  progress.update(args.method, 0, 1);  // METIS is one call: its stage ends when it returns
  const auto part_of = assign_parts(dataset, args.options, info);
  progress.update(args.method, 1, 1);
  progress.clear();
  spdlog::info("{}: {} vertices, {} edges into {} parts by {} (seed {}) in {:.2f} s", dataset.name,
               dataset.num_vertices(), dataset.graph.num_edges(), info.parts, info.method, info.seed, info.seconds);
  log_partition(info);
  write_partition(dataset, args.input, part_of, info, args.output, progress.callback());
  progress.clear();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  spdlog::info("wrote {} shards and {} to {} in {:.1f} s", info.parts, kManifestFileName, args.output, elapsed.count());
}

}  // namespace

void add_partition_command(CLI::App& app) {
  auto args = std::make_shared<PartitionArgs>();
  auto* command = app.add_subcommand(
      "partition",
      "Split a dataset into one shard file per rank (part-<k>.h5: owned vertices with all their in-edges, "
      "mirrors, exchange lists) and a manifest.json, and report the edge cut and balance");
  command->add_option("input", args->input, "Dataset file (HDF5)")->required();
  command->add_option("--parts,-p", args->options.parts, "Number of parts, one per rank")->required();
  command
      ->add_option("--method", args->method,
                   "metis: METIS k-way, fewest cut edges with vertices and training vertices balanced; random: "
                   "balanced random assignment; contiguous: blocks of consecutive vertex ids")
      ->check(one_of({"metis", "random", "contiguous"}))
      ->capture_default_str();
  command->add_option("--seed", args->options.seed, "Seed of METIS or of the random assignment")->capture_default_str();
  command->add_option("--output,-o", args->output, "Folder to write the shards and manifest.json to (created)")
      ->required();
  command->callback([args] { run_partition(*args); });
}

}  // namespace nj::cli
