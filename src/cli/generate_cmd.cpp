// nj generate: writes a synthetic dataset (see nj/graph/generate.hpp for the model); under mpirun the ranks write it
// between them (nj/run/parallel_generate.hpp).
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "nj/core/bytes.hpp"
#include "nj/core/error.hpp"
#include "nj/core/host_memory.hpp"
#include "nj/graph/generate.hpp"
#include "nj/graph/statistics.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/run/parallel_generate.hpp"

namespace nj::cli {
namespace {

void log_generated(const GeneratorOptions& options, const GeneratedGraph& graph, const std::string& output,
                   double seconds) {
  spdlog::info(
      "{}: {} vertices, {} edges (symmetric, self-loops removed; {} requested), edge homophily {:.3f}, "
      "{} features, {} classes, split {}/{}/{} -> {} in {:.1f} s",
      options.name, graph.vertices, graph.edges, options.edges, graph.edge_homophily, options.features, options.classes,
      graph.train, graph.val, graph.test, output, seconds);
}

void run_generate(const GeneratorOptions& options, const std::string& output, const DatasetOutputArguments& written) {
  const auto start = std::chrono::steady_clock::now();
  Dataset dataset;
  {
    ProgressDisplay progress("generate");
    dataset = generate_dataset(options, progress.callback());
  }
  write_dataset_output(dataset, output, written);
  const GeneratedGraph graph{.vertices = dataset.num_vertices(),
                             .edges = dataset.graph.num_edges(),
                             .edge_homophily = edge_homophily(dataset.graph, dataset.labels),
                             .train = count(dataset.train_mask),
                             .val = count(dataset.val_mask),
                             .test = count(dataset.test_mask)};
  log_generated(options, graph, output,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  spdlog::info("peak resident memory {}", format_bytes(resident_memory().peak));
}

// The ranks write the file between them: the dataset one process writes, without the community order, which needs
// the whole graph in one place, and with the features dense.
void run_generate_in_parallel(const GeneratorOptions& options, const std::string& output,
                              const DatasetOutputArguments& written, const CLI::App& command, Communicator& comm) {
  agree_on_failure(comm, [&] {
    NJ_USAGE(written.feature_storage != "sparse",
             "--feature-storage sparse applies to one process; {} ranks write "
             "the features dense",
             comm.size());
    NJ_USAGE(command.count("--community-order") == 0 || !written.community_order,
             "--community-order needs the whole graph in one process; {} ranks write the file without it", comm.size());
    const auto folder = std::filesystem::absolute(output).parent_path();
    NJ_REQUIRE(std::filesystem::is_directory(folder), "{}: the folder {} does not exist", output, folder.string());
    validate(options);
  });
  const auto start = std::chrono::steady_clock::now();
  const GeneratedGraph graph = generate_in_parallel(options, output, comm);
  if (comm.rank() == 0) {
    spdlog::info("{}: no community order stored (one process searches for it when it trains on the file)", output);
    log_generated(options, graph, output,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  spdlog::info("rank {}: peak resident memory {}", comm.rank(), format_bytes(resident_memory().peak));
}

}  // namespace

void add_generate_command(CLI::App& app, Communicator& comm) {
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
  command->callback([options, output, written, command, &comm] {
    if (comm.size() > 1) {
      run_generate_in_parallel(*options, *output, *written, *command, comm);
    } else {
      run_generate(*options, *output, *written);
    }
  });
}

}  // namespace nj::cli
