// nj partition: splits a dataset into one shard file per rank and a manifest (docs/dataset-format.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>

#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "nj/core/bytes.hpp"
#include "nj/core/error.hpp"
#include "nj/core/host_memory.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/partition/parallel.hpp"
#include "nj/partition/partition.hpp"
#include "nj/partition/partition_memory.hpp"

namespace nj::cli {
namespace {

struct PartitionArgs {
  std::string input;
  std::string output;
  std::string method = "auto";
  PartitionOptions options;
  std::vector<int> forecast_ranks;  // --forecast: print what each rank would hold, and partition nothing
  std::vector<std::int64_t> shape;  // --shape: the graph to forecast for, in place of the input's header
  double mirrors_per_vertex = -1;   // --mirrors: per vertex of a part, for the forecast (< 0: neighbours at random)
  bool parts_given = false;
};

// What each rank of a parallel partition on each of `args.forecast_ranks` ranks would hold at the peak of each phase,
// above what its process holds before it reads anything: partition_memory.hpp's formulas over the mean slice and part
// of the input's graph, or of the graph --shape gives.
void print_forecast(const PartitionArgs& args) {
  std::int64_t vertices = 0;
  std::int64_t edges = 0;
  std::int64_t features = 0;
  if (args.shape.empty()) {
    const DatasetHeader header = read_dataset_header(args.input);
    vertices = header.num_vertices;
    edges = header.num_edges;
    features = header.feature_width;
  } else {
    vertices = args.shape[0];
    edges = args.shape[1];
    features = args.shape[2];
  }
  // Within these the formulas' byte counts stay within 64 bits.
  constexpr std::int64_t kMostItems = std::int64_t{1} << 52;
  NJ_USAGE(
      vertices <= kMostItems && edges <= kMostItems && vertices <= kMostItems / std::max<std::int64_t>(features, 1),
      "--forecast: a graph of {} vertices, {} edges and {} features is past what it counts (2^52 items)", vertices,
      edges, features);
  NJ_USAGE(args.mirrors_per_vertex <= static_cast<double>(vertices),
           "--mirrors {}: a part cannot mirror more than the graph's {} vertices for each of its own",
           args.mirrors_per_vertex, vertices);
  for (const int ranks : args.forecast_ranks) {
    const int parts = args.parts_given ? args.options.parts : ranks;
    NJ_USAGE(parts >= 1 && parts <= vertices && ranks <= vertices,
             "--forecast {} with {} parts: parts and ranks must be between 1 and the graph's {} vertices", ranks, parts,
             vertices);
    const PartitionRankCounts counts =
        mean_partition_counts(vertices, edges, features, ranks, parts, args.mirrors_per_vertex);
    const std::vector<PhaseBytes> phases = partition_phase_bytes(counts);
    std::cout << fmt::format("{} ranks, {} parts: each rank holds {} at its peak ({})\n", ranks, parts,
                             format_bytes(peak_bytes(phases)), describe(phases));
  }
}

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

// auto: METIS in one process where the graph fits its 32-bit indices (its adjacency holds at most twice the stored
// edges), else PT-Scotch, which runs on every rank of the job.
PartitionMethod chosen_method(const PartitionArgs& args, int ranks) {
  if (args.method != "auto") return parse_partition_method(args.method);
  if (ranks > 1) return PartitionMethod::kScotch;
  const DatasetHeader header = read_dataset_header(args.input);
  constexpr std::int64_t kMetisLimit = std::numeric_limits<std::int32_t>::max();
  return header.num_vertices <= kMetisLimit && 2 * header.num_edges <= kMetisLimit ? PartitionMethod::kMetis
                                                                                   : PartitionMethod::kScotch;
}

// One process holding the whole dataset: METIS, random or contiguous.
void partition_in_one_process(const PartitionArgs& args) {
  const Dataset dataset = read_dataset(args.input);
  ProgressDisplay progress("partition");
  PartitionInfo info;
  const char* method = to_string(args.options.method);
  progress.update(method, 0, 1);  // METIS is one call: its stage ends when it returns
  const auto part_of = assign_parts(dataset, args.options, info);
  progress.update(method, 1, 1);
  progress.clear();
  spdlog::info("{}: {} vertices, {} edges into {} parts by {} (seed {}) in {:.2f} s", dataset.name,
               dataset.num_vertices(), dataset.graph.num_edges(), info.parts, info.method, info.seed, info.seconds);
  log_partition(info);
  write_partition(dataset, args.input, part_of, info, args.output, progress.callback());
  progress.clear();
}

void run_partition(PartitionArgs& args, Communicator& comm) {
  if (!args.forecast_ranks.empty()) {
    NJ_USAGE(args.shape.empty() || args.shape.size() == 3,
             "--shape takes three numbers, VERTICES,EDGES,FEATURES, not {}", args.shape.size());
    NJ_USAGE(args.input.empty() != args.shape.empty(), "--forecast takes a dataset file or --shape, one of them");
    NJ_USAGE(args.shape.empty() || (args.shape[0] > 0 && args.shape[1] >= 0),
             "--shape {},{},{}: a graph needs at least one vertex", args.shape[0], args.shape[1], args.shape[2]);
    if (args.shape.empty()) require_dataset_file(args.input, PartitionFolders::kNotRead);
    if (comm.rank() == 0) print_forecast(args);
    return;
  }
  NJ_USAGE(args.shape.empty() && args.mirrors_per_vertex < 0,
           "--shape and --mirrors describe a graph for --forecast only");
  NJ_USAGE(!args.input.empty() && !args.output.empty() && args.parts_given,
           "partitioning needs a dataset file, --parts and --output");
  // Checked first, so that a long read does not fail only at its end; every rank checks, and one reports.
  agree_on_failure(comm, [&] {
    require_dataset_file(args.input, PartitionFolders::kNotRead);
    args.options.method = chosen_method(args, comm.size());
    NJ_USAGE(comm.size() == 1 || runs_in_parallel(args.options.method),
             "--method {} runs in one process; under mpirun or srun use --method scotch or contiguous",
             to_string(args.options.method));
    NJ_REQUIRE(!std::filesystem::exists(args.output) || std::filesystem::is_directory(args.output),
               "{}: exists and is not a folder", args.output);
  });
  const auto start = std::chrono::steady_clock::now();
  if (args.options.method == PartitionMethod::kScotch || comm.size() > 1) {
    const PartitionManifest manifest = write_partition_in_parallel(args.input, args.options, comm, args.output);
    const PartitionInfo& info = manifest.partition;
    if (comm.rank() == 0) {
      spdlog::info("{}: {} vertices, {} edges into {} parts by {} on {} ranks (seed {}) in {:.2f} s",
                   manifest.dataset_name, manifest.global_vertices, manifest.global_edges, info.parts, info.method,
                   comm.size(), info.seed, info.seconds);
      log_partition(info);
    }
  } else {
    partition_in_one_process(args);
    spdlog::info("peak resident memory {}", format_bytes(resident_memory().peak));
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  if (comm.rank() == 0) {
    spdlog::info("wrote {} shards and {} to {} in {:.1f} s", args.options.parts, kManifestFileName, args.output,
                 elapsed.count());
  }
}

}  // namespace

void add_partition_command(CLI::App& app, Communicator& comm) {
  auto args = std::make_shared<PartitionArgs>();
  auto* command = app.add_subcommand(
      "partition",
      "Split a dataset into one shard file per rank (part-<k>.h5: owned vertices with all their in-edges, "
      "mirrors, exchange lists) and a manifest.json, and report the edge cut and balance. Under mpirun or srun the "
      "ranks each read a slice of the dataset and partition it together (scotch or contiguous)");
  command->add_option("input", args->input, "Dataset file (HDF5)");
  command->add_option("--parts,-p", args->options.parts,
                      "Number of parts, one per rank (required to partition; with --forecast, default: the ranks)");
  command
      ->add_option("--method", args->method,
                   "auto: metis in one process where the graph fits METIS's 32-bit indices, else scotch; metis: METIS "
                   "k-way, fewest cut edges with vertices and training vertices balanced; scotch: PT-Scotch (64-bit), "
                   "on every rank of the job; random: balanced random assignment; contiguous: blocks of consecutive "
                   "vertex ids")
      ->check(one_of({"auto", "metis", "scotch", "random", "contiguous"}))
      ->capture_default_str();
  command->add_option("--seed", args->options.seed, "Seed of METIS or of the random assignment")->capture_default_str();
  command->add_option("--output,-o", args->output, "Folder to write the shards and manifest.json to (created)");
  command
      ->add_option("--forecast", args->forecast_ranks,
                   "Print what each rank of a partition on these numbers of ranks (e.g. 16,64) would hold at the "
                   "peak of each phase, for the mean slice and part of the graph (neighbours spread at random), and "
                   "partition nothing")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(at_least(1));
  command
      ->add_option("--shape", args->shape,
                   "With --forecast, in place of a dataset file: the graph's VERTICES,EDGES,FEATURES (edges as "
                   "stored, both directions of an undirected edge)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(at_least(0));
  command
      ->add_option("--mirrors", args->mirrors_per_vertex,
                   "With --forecast: a part's mirrors per vertex it owns, as a partition of a like graph measured "
                   "them (nj info on its manifest); default: as many as neighbours spread at random give")
      ->check(at_least(0));
  command->callback([args, command, &comm] {
    args->parts_given = command->count("--parts") > 0;
    run_partition(*args, comm);
  });
}

}  // namespace nj::cli
