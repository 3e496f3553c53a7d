// nj convert: reads a graph dataset in one of the text formats (docs/convert.md) and writes the project's
// HDF5 dataset file.
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "nj/core/bytes.hpp"
#include "nj/core/error.hpp"
#include "nj/core/host_memory.hpp"
#include "nj/core/phase_memory.hpp"
#include "nj/core/release.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/graph/vertex_order.hpp"
#include "nj/io/convert_memory.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/edge_list.hpp"
#include "nj/io/hdf5.hpp"
#include "nj/io/ogb.hpp"
#include "nj/io/plain_text.hpp"
#include "nj/io/sorted_edge_list.hpp"
#include "nj/io/text_reader.hpp"

namespace nj::cli {
namespace {

struct ConvertArgs {
  std::string format;
  std::string input;
  std::string output;
  std::string ogb_split;
  std::vector<double> split_ratio;
  ConvertOptions options;
  DatasetOutputArguments output_options;
  // Options that only some formats take; their presence is checked against --format.
  CLI::Option* one_based = nullptr;
  CLI::Option* relabel = nullptr;
  CLI::Option* num_vertices = nullptr;
  CLI::Option* ogb_split_option = nullptr;
  CLI::Option* split_ratio_option = nullptr;
  std::string memory;   // --memory: what converting an edge list may hold
  std::string scratch;  // --scratch: where its sorted runs go
  // --forecast: the VERTICES,EDGES,FEATURES of a graph to say what converting it holds.
  std::vector<std::int64_t> forecast;
};

// The input's name without folders and extensions: `../data/soc-Slashdot0902.txt.gz` -> `soc-Slashdot0902`.
std::string default_name(const std::string& input) {
  auto path = std::filesystem::absolute(input).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();
  if (std::filesystem::is_directory(path)) return path.filename().string();
  if (path.extension() == ".gz") path = path.stem();
  return path.stem().string();
}

void require_format(const CLI::Option* option, const ConvertArgs& args, const std::string& format) {
  NJ_USAGE(option->count() == 0 || args.format == format, "{} applies only to --format {}", option->get_name(), format);
}

void check_options(ConvertArgs& args) {
  NJ_USAGE(!args.format.empty(), "converting needs --format (edgelist, plain or ogb)");
  NJ_USAGE(!args.input.empty(), "converting needs an input file or folder");
  NJ_USAGE(!args.output.empty(), "converting needs --output");
  require_convert_input(args.format, args.input);
  require_format(args.one_based, args, "edgelist");
  require_format(args.relabel, args, "edgelist");
  require_format(args.num_vertices, args, "edgelist");
  require_format(args.ogb_split_option, args, "ogb");
  auto& options = args.options;
  if (options.name.empty()) options.name = default_name(args.input);
  if (args.split_ratio_option->count() > 0) {
    options.data.split_ratio = SplitRatio{args.split_ratio[0], args.split_ratio[1], args.split_ratio[2]};
  }
}

// What a conversion may hold (--memory), by default half of what the machine has available. Its sorted runs take half
// of it; the per-vertex arrays and the merge's buffers, which the runs do not share a phase with, the whole.
std::int64_t memory_limit(const std::string& memory) {
  const std::int64_t limit = memory.empty() ? available_host_bytes() / 2 : parse_byte_size(memory);
  return limit > 0 ? limit : std::int64_t{2} << 30;
}

// What converting an edge list of --forecast's shape holds at the peak of each phase, above what the process holds
// before it reads anything, with dense features: convert_memory.hpp's formulas.
void print_forecast(const ConvertArgs& args) {
  NJ_USAGE(args.forecast.size() == 3, "--forecast takes three numbers, VERTICES,EDGES,FEATURES, not {}",
           args.forecast.size());
  const std::int64_t vertices = args.forecast[0];
  const std::int64_t edges = args.forecast[1];
  const std::int64_t features = args.forecast[2];
  // Within these the formulas' byte counts stay within 64 bits.
  constexpr std::int64_t kMostItems = std::int64_t{1} << 52;
  NJ_USAGE(vertices > 0 && edges >= 0 && features > 0 && vertices <= kMostItems && edges <= kMostItems &&
               features <= kMostItems / vertices,
           "--forecast {},{},{}: a graph needs at least one vertex and one feature, and at most 2^52 of each", vertices,
           edges, features);
  const std::vector<PhaseBytes> phases = convert_phase_bytes(
      convert_counts(vertices, edges, features, memory_limit(args.memory), args.options.ids.relabel));
  std::cout << fmt::format("converting holds {} at its peak ({})\n", format_bytes(peak_bytes(phases)),
                           describe(phases));
}

// The community order needs the whole graph: read back from the file where finding it fits within --memory.
void store_community_order_within(Dataset& dataset, const hdf5::File& file, const ConvertCounts& counts,
                                  std::int64_t limit) {
  const std::int64_t needs = community_order_bytes(counts);
  if (!community_order_fits(counts, limit)) {
    spdlog::info("community order not stored: finding it would hold {}, more than --memory's {}", format_bytes(needs),
                 format_bytes(limit));
    return;
  }
  dataset.graph.sources = hdf5::read_vector<vid_t>(file, "/graph/indices", counts.edges);
  const auto start = std::chrono::steady_clock::now();
  store_community_order(dataset);
  spdlog::info("community order of {} vertices found in {:.2f} s", dataset.num_vertices(), seconds_since(start));
  release_vector(dataset.graph.sources);
}

// A dataset converted: the features are not held where they were written a block at a time.
struct Converted {
  Dataset dataset;
  std::int64_t feature_width = 0;
};

// An edge list (or an OGB folder's): its graph sorted on disk and streamed into the file, and its features read and
// written a block at a time, never held whole. Logs what each phase held beside convert_memory.hpp's formula.
Converted convert_edge_list(const ConvertArgs& args, const std::string& edges, const ConvertOptions& options,
                            hdf5::File& file) {
  PhaseMemory memory;
  file.create_group("/graph");
  // Read once: what the machine has available changes as the conversion runs.
  const std::int64_t limit = memory_limit(args.memory);
  SortedGraph graph = write_sorted_edge_list(
      edges, options.ids, options.graph,
      {.run_bytes = limit / 2, .scratch = args.scratch, .end_phase = [&memory] { memory.end_phase(); }}, file);
  spdlog::debug("{} edges sorted in {} run{}", graph.num_edges(), graph.runs, graph.runs == 1 ? "" : "s");
  ConvertCounts counts{.vertices = graph.ids.count(),
                       .edges = graph.num_edges(),
                       .run_keys = graph.largest_run,
                       .runs = graph.runs,
                       .relabelled = options.ids.relabel,
                       .id_run = graph.largest_id_run};
  Dataset dataset;
  dataset.name = options.name;
  dataset.graph.offsets = std::move(graph.offsets);  // the vertex count; the edges are in the file
  dataset.symmetrized = graph.symmetrized;
  dataset.self_loops = graph.self_loops;
  dataset.vertex_ids = graph.ids.relabelled_ids();  // relabelled: the ids as the input wrote them, to name the rows
  const FeatureBlocks features = attach_vertex_data(dataset, options.data, graph.ids);
  graph.ids = VertexIds::dense(0, false);  // nothing is looked up from here: dataset.vertex_ids names the rows
  memory.end_phase();
  if (args.output_options.community_order) {
    store_community_order_within(dataset, file, counts, limit);
    if (!dataset.community_order.empty()) memory.end_phase();
  }
  const bool sparse = write_dataset_vertex_data(file, dataset, counts.edges, features,
                                                parse_feature_storage(args.output_options.feature_storage));
  memory.end_phase();
  spdlog::info("features stored {}", sparse ? "sparse" : "dense");
  counts.feature_width = features.cols;
  counts.features_sparse = sparse;
  counts.feature_entries = sparse ? stored_features(file).nonzeros : 0;
  counts.community_order = !dataset.community_order.empty();
  const std::vector<PhaseBytes> phases = convert_phase_bytes(counts);
  memory.log(phases, "", "converting");
  if (peak_bytes(phases) > limit) {
    spdlog::warn(
        "converting held more than --memory's {}: its {} vertices' arrays take {} (docs/convert.md, \"What a "
        "conversion holds\")",
        format_bytes(limit), counts.vertices, format_bytes(peak_bytes(phases)));
  }
  return {std::move(dataset), features.cols};
}

Converted convert_in_memory(ConvertArgs& args) {
  Dataset dataset = read_plain_folder(args.input, args.options);
  write_dataset_output(dataset, args.output, args.output_options);
  const std::int64_t width = dataset.features.cols();
  return {std::move(dataset), width};
}

void run(ConvertArgs& args) {
  if (!args.forecast.empty()) {
    NJ_USAGE(args.format.empty() && args.input.empty() && args.output.empty(),
             "--forecast describes a graph in place of an input: give --format, an input and --output only to convert");
    print_forecast(args);
    return;
  }
  check_options(args);
  // Checked first, so that a long conversion does not fail only at its end.
  const auto output_folder = std::filesystem::absolute(args.output).parent_path();
  NJ_REQUIRE(std::filesystem::is_directory(output_folder), "{}: the folder {} does not exist", args.output,
             output_folder.string());
  ProgressDisplay display("convert");
  const ReadProgress reading(display.callback());
  Converted converted;
  std::int64_t edges = 0;
  if (args.format == "edgelist" || args.format == "ogb") {
    // Written under a temporary name, so that a conversion that fails half-way leaves no file that looks whole.
    const std::string partial = args.output + ".partial";
    try {
      {
        const OgbFiles files = args.format == "ogb" ? ogb_files(args.input, args.options, args.ogb_split)
                                                    : OgbFiles{.edges = args.input, .options = args.options};
        auto file = hdf5::File::create(partial);
        converted = convert_edge_list(args, files.edges, files.options, file);
      }
      std::filesystem::rename(partial, args.output);
    } catch (...) {
      std::filesystem::remove(partial);
      throw;
    }
    edges = converted.dataset.graph.offsets.back();
  } else {
    converted = convert_in_memory(args);
    edges = converted.dataset.graph.num_edges();
  }
  const Dataset& dataset = converted.dataset;
  spdlog::info("{}: {} vertices, {} edges ({}, self-loops {}), {} features, {} classes, split {}/{}/{} -> {}",
               dataset.name, dataset.num_vertices(), edges, dataset.symmetrized ? "symmetric" : "directed",
               to_string(dataset.self_loops), converted.feature_width, dataset.num_classes, count(dataset.train_mask),
               count(dataset.val_mask), count(dataset.test_mask), args.output);
  spdlog::info("peak resident memory {}", format_bytes(resident_memory().peak));
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a graph dataset (edge list, plain folder, OGB folder) to HDF5");
  auto args = std::make_shared<ConvertArgs>();
  auto& options = args->options;

  cmd->add_option("--format", args->format, "Input format: edgelist (SNAP-style file), plain (folder), ogb (folder)")
      ->check(one_of({"edgelist", "plain", "ogb"}));
  cmd->add_option("input", args->input, "Input file (edgelist) or folder (plain, ogb)");
  cmd->add_option("--output,-o", args->output, "HDF5 dataset file to write");
  cmd->add_option("--name", options.name, "Dataset name recorded in the file (default: the input's name)");

  args->one_based = cmd->add_flag("--one-based", options.ids.one_based, "Vertex ids in the input files start at 1");
  args->relabel = cmd->add_flag("--relabel", options.ids.relabel,
                                "Ids are arbitrary: the distinct ids of the edge list, sorted, become 0..N-1");
  args->num_vertices = cmd->add_option("--num-vertices", options.ids.num_vertices,
                                       "Vertex count; ids at or beyond it are errors (default: largest id + 1)");
  args->num_vertices->check(at_least(1))->excludes(args->relabel);

  cmd->add_flag("--undirected", options.graph.symmetrize, "Add the reverse of every edge");
  cmd->add_option("--self-loops", options.graph.self_loops, "Self-loops: keep, remove, or add where missing")
      ->transform(CLI::CheckedTransformer(
                      std::map<std::string, SelfLoops>{
                          {"keep", SelfLoops::kKeep}, {"remove", SelfLoops::kRemove}, {"add", SelfLoops::kAddMissing}},
                      CLI::ignore_case)
                      .description(""))
      ->type_name("keep|remove|add")
      ->default_str("keep");
  cmd->add_option("--duplicates", options.graph.duplicates, "Repeated edges: keep or remove")
      ->transform(CLI::CheckedTransformer(
                      std::map<std::string, Duplicates>{{"keep", Duplicates::kKeep}, {"remove", Duplicates::kRemove}},
                      CLI::ignore_case)
                      .description(""))
      ->type_name("keep|remove")
      ->default_str("keep");

  auto* features = cmd->add_option("--features", options.data.features,
                                   "Feature file: `col:value` pairs or dense values, line i is vertex i");
  cmd->add_option("--random-features", options.data.random_features,
                  "Without a feature file: this many standard-normal columns (default: one column of ones)")
      ->check(at_least(1))
      ->excludes(features);
  cmd->add_option("--labels", options.data.labels, "Label file: one label per line, or `vertex label` pairs");
  cmd->add_option("--num-classes", options.data.num_classes, "Number of classes (default: largest label + 1)")
      ->check(at_least(1));
  auto* train = cmd->add_option("--train", options.data.train, "Train split file: vertex ids, one per line");
  auto* val = cmd->add_option("--val", options.data.val, "Validation split file: vertex ids, one per line");
  auto* test = cmd->add_option("--test", options.data.test, "Test split file: vertex ids, one per line");
  args->split_ratio_option =
      cmd->add_option("--split-ratio", args->split_ratio,
                      "Random train,val,test split of the labelled vertices, used instead of a dataset's own split "
                      "(default where there is none: 0.6,0.2,0.2)")
          ->delimiter(',')
          ->expected(3)
          ->excludes(train)
          ->excludes(val)
          ->excludes(test);
  cmd->add_option("--seed", options.data.seed, "Seed of random features and random splits")->capture_default_str();
  args->ogb_split_option = cmd->add_option("--ogb-split", args->ogb_split,
                                           "OGB split scheme, a folder under split/ (default: the only one there)")
                               ->excludes(args->split_ratio_option)
                               ->excludes(train);

  cmd->add_option(
         "--memory", args->memory,
         "edgelist, ogb: memory the conversion may take, e.g. 4G: its sorted runs of edges take half, and the "
         "community order is stored only where finding it fits (default: half of what the machine has available)")
      ->check(byte_size());
  cmd->add_option(
      "--scratch", args->scratch,
      "edgelist, ogb: folder for the sorted runs of edges, removed when done (default: the system's temporary "
      "folder)");
  cmd->add_option("--forecast", args->forecast,
                  "Convert nothing: print what converting an edge list of VERTICES,EDGES,FEATURES (edges as stored, "
                  "after --undirected) holds at each phase's peak, with --memory and --relabel as given")
      ->delimiter(',')
      ->type_name("V,E,F");
  add_dataset_output_options(*cmd, args->output_options);
  cmd->callback([args] { run(*args); });
}

}  // namespace nj::cli
