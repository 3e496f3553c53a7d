// nj generate: writes a synthetic dataset (see nj/graph/generate.hpp for the model).
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "nj/graph/generate.hpp"
#include "nj/graph/statistics.hpp"
#include "nj/io/dataset_file.hpp"

namespace nj::cli {
namespace {

void run_generate(const GeneratorOptions& options, const std::string& output, const DatasetOutputArguments& written) {
  const auto start = std::chrono::steady_clock::now();
  Dataset dataset;
  {
    ProgressDisplay progress("generate");
    dataset = generate_dataset(options, progress.callback());
  }
  write_dataset_output(dataset, output, written);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  spdlog::info(
      "{}: {} vertices, {} edges (symmetric, self-loops {}; {} requested), edge homophily {:.3f}, "
      "{} features, {} classes, split {}/{}/{} -> {} in {:.1f} s",
      dataset.name, dataset.num_vertices(), dataset.graph.num_edges(), to_string(dataset.self_loops), options.edges,
      edge_homophily(dataset.graph, dataset.labels), dataset.features.cols(), dataset.num_classes,
      count(dataset.train_mask), count(dataset.val_mask), count(dataset.test_mask), output, elapsed.count());
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto options = std::make_shared<GeneratorOptions>();
  auto output = std::make_shared<std::string>();
  auto* command = app.add_subcommand(
      "generate",
      "Write a synthetic node-classification dataset: a degree-corrected contextual stochastic block model "
      "with power-law degrees, class communities and class-correlated Gaussian features");
  command->add_option("--output,-o", *output, "Dataset file to write (HDF5)")->required();
  command->add_option("--name", options->name, "Dataset name stored in the file")->capture_default_str();
  command->add_option("--vertices", options->vertices, "Number of vertices")->capture_default_str();
  command
      ->add_option("--edges", options->edges,
                   "Approximate number of directed edges after symmetrization (duplicates and self-loops are "
                   "dropped, so a few percent fewer)")
      ->capture_default_str();
  command->add_option("--features", options->features, "Feature width")->capture_default_str();
  command->add_option("--classes", options->classes, "Number of classes (communities)")->capture_default_str();
  command->add_option("--seed", options->seed, "Seed; the output depends only on the options")->capture_default_str();
  command->add_option("--homophily", options->homophily, "Expected fraction of edges inside a class")
      ->capture_default_str();
  command
      ->add_option("--signal", options->signal,
                   "Distance of class means from the origin, in units of the unit feature noise")
      ->capture_default_str();
  command
      ->add_option("--degree-exponent", options->degree_exponent,
                   "Power-law exponent of the degree distribution (> 1), truncated at sqrt(vertices) times "
                   "the minimum")
      ->capture_default_str();
  command->add_option("--train-fraction", options->train_fraction, "Fraction of vertices in the train split")
      ->capture_default_str();
  command
      ->add_option("--val-fraction", options->val_fraction,
                   "Fraction of vertices in the validation split; the rest is the test split")
      ->capture_default_str();
  auto written = std::make_shared<DatasetOutputArguments>();
  add_dataset_output_options(*command, *written);
  command->callback([options, output, written] { run_generate(*options, *output, *written); });
}

}  // namespace nj::cli
