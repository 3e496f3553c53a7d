#pragma once
#include <string>
#include <vector>

#include "nj/graph/dataset.hpp"
#include "nj/io/hdf5.hpp"
#include "nj/model/model.hpp"
#include "nj/train/trainer.hpp"

namespace nj::test {

// As nj train --weight-decay-scope names it, and the reference fixture's group.
const char* decay_scope_name(WeightDecayScope scope);

// PyG's three Adam steps of a two-layer GCN, GAT, GraphSAGE, GIN or APPNP model on a small graph
// (tests/fixtures/training_reference.h5, written by scripts/reference/training_reference.py): the graph, the initial
// weights, and per step the loss, every parameter's gradient and every parameter after torch.optim.Adam, with dropout
// off. A test trains nj's whole Trainer from the same weights and checks each step against it.
class TrainingReference {
 public:
  // gin_train_eps: the GIN case whose ε is learnt.
  TrainingReference(ModelKind kind, WeightDecayScope scope, bool gin_train_eps = false);

  const Dataset& dataset() const { return data_; }
  ModelConfig model_config() const;
  TrainOptions train_options() const;  // the fixture's steps, learning rate, epsilon and weight decay
  // Sets every parameter to the fixture's initial value (the shapes must agree).
  void load_initial_weights(Model& model) const;
  // Checks a step against the fixture, within 1e-5 relative: its loss (the job's), and after it every
  // parameter's gradient (summed over the ranks) and value.
  void expect_step(const EpochMetrics& metrics, Model& model) const;

 private:
  hdf5::File file_;
  ModelKind kind_;
  WeightDecayScope scope_;
  bool gin_train_eps_;
  std::string group_;  // of the model and decay scope: "gcn/all/", "gin-train-eps/all/"
  Dataset data_;
  std::vector<double> losses_;
};

}  // namespace nj::test
