// A layer nj does not ship, trained by the library with no change to it: PyG's GraphConv with sum aggregation,
//   h'_i = x_i · W_root + (Σ_{j→i} x_j) · W + b,
// written against nj's public headers only (docs/layers.md walks through it). The library decides what stays on
// the device, what is reused and what moves: the layer runs in memory, within a device budget, and on as many
// ranks as the launcher starts, as the built-in layers do.
//
//   graph_conv DATASET.h5 [--epochs N] [--device-memory BYTES] [--seed S]
//   mpirun -np 2 graph_conv DATASET.h5 --device-memory 4M
//
// Prints each epoch's loss and the final accuracies, once per job.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/core/bytes.hpp"
#include "nj/model/layers.hpp"
#include "nj/model/model.hpp"
#include "nj/run/rank_setup.hpp"
#include "nj/runtime/rank_communicator.hpp"
#include "nj/runtime/resources.hpp"
#include "nj/train/trainer.hpp"

namespace {

// One GEMM transforms both terms, Z = X · [W | W_root]; the aggregation sums the neighbours' first half and adds
// the vertex's own second half (a RootedSum, which every backend runs). The layer declares an unweighted sum over
// the graph as stored, and the model asks for that graph.
class GraphConvLayer final : public nj::RootedSumLayer {
 public:
  GraphConvLayer(std::int64_t in_dim, std::int64_t out_dim, std::uint64_t seed, std::uint32_t index)
      : weight_(make("weight", in_dim, out_dim, seed, index, 0)),
        root_weight_(make("root_weight", in_dim, out_dim, seed, index, 1)),
        joined_(in_dim, 2 * out_dim),
        joined_grad_(in_dim, 2 * out_dim) {
    bias_ = nj::Parameter{"bias", nj::Matrix(1, out_dim), nj::Matrix(1, out_dim)};
    prepare();
  }

  std::int64_t row_width() const override { return 2 * out_dim(); }
  std::int64_t out_dim() const override { return weight_.value.cols(); }
  nj::AggregationTraits aggregation() const override {
    return {.linear = false, .structural_coefficients = false, .backward_reads_rows = false};
  }
  std::vector<nj::Parameter*> parameters() override { return {&weight_, &root_weight_, &bias_}; }
  nj::RootedSum sum() const override { return nj::joined_halves_sum(out_dim()); }
  void prepare() override { nj::join_columns(weight_.value, root_weight_.value, joined_); }
  void finish_backward() override { nj::split_columns_into(joined_grad_, weight_.grad, root_weight_.grad); }
  const nj::Matrix& effective_weight() const override { return joined_; }
  nj::Matrix& effective_weight_grad() override { return joined_grad_; }

 private:
  static nj::Parameter make(const char* name, std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                            std::uint32_t index, std::uint32_t which) {
    // Named by its role: the model names it within the layer ("layer1.root_weight").
    nj::Parameter p{name, nj::Matrix(rows, cols), nj::Matrix(rows, cols)};
    nj::glorot_uniform(p.value, rows, cols, seed, index, which);
    return p;
  }

  nj::Parameter weight_;
  nj::Parameter root_weight_;
  nj::Matrix joined_;
  nj::Matrix joined_grad_;
};

struct Options {
  std::string dataset;
  std::uint32_t epochs = 100;
  std::int64_t device_memory = nj::kUnlimited;
  std::uint64_t seed = 0;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) throw nj::InputError(arg + " needs a value");
      return std::string(argv[++i]);
    };
    if (arg == "--epochs") {
      options.epochs = static_cast<std::uint32_t>(std::stoul(value()));
    } else if (arg == "--device-memory") {
      options.device_memory = nj::parse_byte_size(value());
    } else if (arg == "--seed") {
      options.seed = std::stoull(value());
    } else if (options.dataset.empty() && arg.rfind("--", 0) != 0) {
      options.dataset = arg;
    } else {
      throw nj::InputError("usage: graph_conv DATASET.h5 [--epochs N] [--device-memory BYTES] [--seed S]");
    }
  }
  if (options.dataset.empty())
    throw nj::InputError("usage: graph_conv DATASET.h5 [--epochs N] [--device-memory BYTES]");
  return options;
}

void run(const Options& options, nj::Communicator& job) {
  nj::DataSource source;
  source.dataset = options.dataset;
  source.normalize_rows = true;
  nj::Shard shard = nj::load_rank_shard(source, nj::VertexOrder::kCommunity, job);
  // Two GraphConv layers with ReLU between them and dropout before each, on the graph as stored.
  std::vector<nj::ModelLayer> layers;
  layers.push_back(
      {std::make_unique<GraphConvLayer>(shard.features.cols(), 16, options.seed, 0), 0.5F, nj::Activation::kRelu});
  layers.push_back(
      {std::make_unique<GraphConvLayer>(16, shard.num_classes, options.seed, 1), 0.5F, nj::Activation::kNone});
  nj::Model model(std::move(layers), nj::GraphForm::kAsStored, options.seed);

  nj::Resources resources = nj::make_cpu_resources(options.device_memory);
  const std::unique_ptr<nj::Communicator> device_comm = nj::make_rank_communicator(job, resources);
  nj::Communicator& comm = device_comm ? *device_comm : job;
  nj::ExecutorChoice choice;
  choice.in_memory = options.device_memory == nj::kUnlimited;
  choice.options.device_budget = options.device_memory;
  const std::unique_ptr<nj::Executor> executor = nj::make_executor(choice, resources, model, shard, comm);

  nj::TrainOptions train;
  train.epochs = options.epochs;
  train.eval_every = options.epochs;
  nj::Trainer trainer(model, *executor, comm, nj::targets_of(shard), train);
  const bool leader = job.rank() == 0;
  const nj::TrainSummary summary = trainer.fit([&](const nj::EpochMetrics& m) {
    if (leader) std::printf("epoch %u loss %.6f\n", m.epoch + 1, m.loss);
  });
  if (leader) {
    std::printf("final train %.4f val %.4f test %.4f\n", summary.final_accuracy.train, summary.final_accuracy.val,
                summary.final_accuracy.test);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const nj::MpiSession mpi;
  const std::unique_ptr<nj::Communicator> job = mpi.communicator();
  try {
    run(parse(argc, argv), *job);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "graph_conv: error: %s\n", e.what());
    // Under a launcher, one rank's error ends the job instead of leaving the others waiting.
    if (mpi.active()) job->abort(1);
    return 1;
  }
  return 0;
}
