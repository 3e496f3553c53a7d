#pragma once
// The full-batch training loop: one optimizer step per epoch over the loss of every training vertex of the
// whole graph, (1/|V_train|) Σ ℓ_v, with |V_train| counted over all ranks.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "nj/comm/communicator.hpp"
#include "nj/exec/executor.hpp"
#include "nj/graph/dataset.hpp"
#include "nj/train/adam.hpp"

namespace nj {

enum class WeightDecayScope { kAll, kFirstLayer };
WeightDecayScope parse_weight_decay_scope(const std::string& text);

struct TrainOptions {
  std::uint32_t epochs = 200;
  AdamConfig adam;
  WeightDecayScope decay_scope = WeightDecayScope::kAll;
  std::uint32_t eval_every = 1;  // evaluate every k epochs (and after the last); 0 = only after the last
};

struct Accuracy {
  static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  double train = kNone;
  double val = kNone;
  double test = kNone;
  bool valid() const { return !std::isnan(val); }
};

struct EpochMetrics {
  std::uint32_t epoch = 0;
  double loss = 0.0;
  Accuracy accuracy;  // NaN where the epoch was not evaluated
  double step_seconds = 0.0;  // forward, loss and backward
  double optimizer_seconds = 0.0;
  double eval_seconds = 0.0;
  ExecutionMetrics execution;  // of the training step
  // Forward, backward and the optimizer step: the epoch's training time, without evaluation.
  double train_seconds() const { return step_seconds + optimizer_seconds; }
};

struct TrainSummary {
  std::uint32_t epochs = 0;
  Accuracy final_accuracy;
  std::uint32_t best_val_epoch = 0;
  Accuracy best_val_accuracy;  // all three accuracies at the epoch with the best validation accuracy
  double median_epoch_seconds = 0.0;
  double total_seconds = 0.0;
};

class Trainer {
 public:
  Trainer(Model& model, Executor& executor, Backend& backend, Communicator& comm, const Dataset& dataset,
          const TrainOptions& options);

  // One optimizer step; the epoch number addresses the dropout masks.
  EpochMetrics train_epoch(std::uint32_t epoch);
  // Accuracies of a forward pass without dropout, summed over ranks.
  Accuracy evaluate();
  // Trains epochs [first_epoch, options.epochs), calling on_epoch after each.
  TrainSummary fit(std::uint32_t first_epoch, const std::function<void(const EpochMetrics&)>& on_epoch);

  Adam& optimizer() { return optimizer_; }

 private:
  Model& model_;
  Executor& executor_;
  Backend& backend_;
  Communicator& comm_;
  const Dataset& dataset_;
  TrainOptions options_;
  Adam optimizer_;
  std::int64_t global_train_count_ = 0;
  // Per-call scratch of the loss function: labels and mask of the rows it is given.
  std::vector<std::int32_t> row_labels_;
  std::vector<std::uint8_t> row_mask_;
};

}  // namespace nj
