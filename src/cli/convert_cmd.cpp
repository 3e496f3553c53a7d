// nj convert: reads a graph dataset in one of the text formats (docs/convert.md) and writes the project's
// HDF5 dataset file.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "nj/core/error.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/edge_list.hpp"
#include "nj/io/ogb.hpp"
#include "nj/io/plain_text.hpp"
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

Dataset read_input(ConvertArgs& args) {
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
  ProgressDisplay display("convert");
  const ReadProgress reading(display.callback());
  if (args.format == "plain") return read_plain_folder(args.input, options);
  if (args.format == "ogb") return read_ogb(args.input, options, args.ogb_split);
  return build_dataset(read_edge_list(args.input, options.ids), options);
}

void run(ConvertArgs& args) {
  // Checked first, so that a long conversion does not fail only at its end.
  const auto output_folder = std::filesystem::absolute(args.output).parent_path();
  NJ_REQUIRE(std::filesystem::is_directory(output_folder), "{}: the folder {} does not exist", args.output,
             output_folder.string());
  auto dataset = read_input(args);
  write_dataset_output(dataset, args.output, args.output_options);
  spdlog::info("{}: {} vertices, {} edges ({}, self-loops {}), {} features, {} classes, split {}/{}/{} -> {}",
               dataset.name, dataset.num_vertices(), dataset.graph.num_edges(),
               dataset.symmetrized ? "symmetric" : "directed", to_string(dataset.self_loops), dataset.features.cols(),
               dataset.num_classes, count(dataset.train_mask), count(dataset.val_mask), count(dataset.test_mask),
               args.output);
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a graph dataset (edge list, plain folder, OGB folder) to HDF5");
  auto args = std::make_shared<ConvertArgs>();
  auto& options = args->options;

  cmd->add_option("--format", args->format, "Input format: edgelist (SNAP-style file), plain (folder), ogb (folder)")
      ->required()
      ->check(one_of({"edgelist", "plain", "ogb"}));
  cmd->add_option("input", args->input, "Input file (edgelist) or folder (plain, ogb)")->required();
  cmd->add_option("--output,-o", args->output, "HDF5 dataset file to write")->required();
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

  add_dataset_output_options(*cmd, args->output_options);
  cmd->callback([args] { run(*args); });
}

}  // namespace nj::cli
