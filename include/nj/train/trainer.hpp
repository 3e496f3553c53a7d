#pragma once
// The full-batch training loop: one optimizer step per epoch over the loss of every training vertex of the
// whole graph, (1/|V_train|) Σ ℓ_v, with |V_train| counted over all ranks.
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/exec/executor.hpp"
#include "nj/graph/dataset.hpp"
#include "nj/graph/shard.hpp"
#include "nj/train/adam.hpp"

namespace nj {

enum class WeightDecayScope { kAll, kFirstLayer };
WeightDecayScope parse_weight_decay_scope(const std::string& text);

struct TrainOptions {
  std::uint32_t epochs = 200;
  AdamConfig adam;
  WeightDecayScope decay_scope = WeightDecayScope::kAll;
  std::uint32_t eval_every = 1;  // evaluate every k epochs (and after the last); 0 = only after the last
  // Stop once this many evaluations in a row found no better validation accuracy than the best (0: never).
  std::uint32_t early_stop_patience = 0;
};

// What the loss and the accuracies read, for the rows an executor's logits cover: a rank's owned vertices.
struct VertexTargets {
  std::span<const std::int32_t> labels;
  std::span<const std::uint8_t> train_mask;
  std::span<const std::uint8_t> val_mask;
  std::span<const std::uint8_t> test_mask;
  std::int64_t global_train_count = 0;  // training vertices of the whole graph: the loss's normaliser
};
VertexTargets targets_of(const Dataset& dataset);
VertexTargets targets_of(const Shard& shard);

// One per-rank quantity over the ranks of the job.
struct OverRanks {
  double max = 0.0;
  double mean = 0.0;
};

// Max and mean over the ranks of the job of each per-rank value: one reduction of each kind for all of them.
std::vector<OverRanks> over_ranks(Communicator& comm, std::vector<double> values);

// One layer's boundary exchange in one direction, over the job: rows and bytes summed over the ranks, times
// as their maximum and mean.
struct ExchangeSummary {
  std::int64_t rows_sent = 0;
  std::int64_t rows_received = 0;
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  OverRanks seconds;
  OverRanks wait_seconds;
};

struct Accuracy {
  static constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  double train = kNone;
  double val = kNone;
  double test = kNone;
  bool valid() const { return !std::isnan(val); }
};

struct EpochMetrics {
  std::uint32_t epoch = 0;  // counted from 0, as the dropout masks address it; printed and logged from 1
  double loss = 0.0;
  Accuracy accuracy;          // NaN where the epoch was not evaluated
  double step_seconds = 0.0;  // forward, loss and backward
  double optimizer_seconds = 0.0;
  double eval_seconds = 0.0;
  ExecutionMetrics execution;  // of the training step, on this rank
  // Over the ranks of the job: the step's phases, and per layer the forward and backward exchange.
  OverRanks step_over_ranks;
  OverRanks compute_over_ranks;
  OverRanks copy_over_ranks;
  OverRanks copy_wait_over_ranks;
  std::vector<std::array<ExchangeSummary, 2>> exchange;
  // Forward, backward and the optimizer step: the epoch's training time, without evaluation.
  double train_seconds() const { return step_seconds + optimizer_seconds; }
};

struct TrainSummary {
  std::uint32_t epochs = 0;
  std::uint32_t epochs_done = 0;  // where training stopped: epochs, unless it stopped early or was interrupted
  bool stopped_early = false;     // by TrainOptions::early_stop_patience
  Accuracy final_accuracy;
  std::uint32_t best_val_epoch = 0;  // counted from 0
  Accuracy best_val_accuracy;        // all three accuracies at the epoch with the best validation accuracy
  double median_epoch_seconds = 0.0;
  double total_seconds = 0.0;
};

// The class a row of logits predicts: the first of the largest.
std::int64_t predicted_class(const float* logits, std::int64_t classes);
// Train, validation and test accuracy of the owned rows' logits over all ranks of `comm` (one sum of the counts); NaN
// for a split without vertices.
Accuracy accuracy_of(ConstRows logits, const VertexTargets& targets, Communicator& comm);

// Where training stands between epochs: with the weights and Adam's state, all a resumed run needs to go on as
// if it had never stopped.
struct TrainingProgress {
  std::uint32_t next_epoch = 0;      // counted from 0: the number of epochs done
  std::uint32_t best_val_epoch = 0;  // counted from 0
  Accuracy best_val_accuracy;        // NaN until an epoch is evaluated
  Accuracy final_accuracy;           // of the latest evaluated epoch
};

class Trainer {
 public:
  Trainer(Model& model, Executor& executor, Communicator& comm, const VertexTargets& targets,
          const TrainOptions& options);

  // One optimizer step; the epoch number addresses the dropout masks.
  EpochMetrics train_epoch(std::uint32_t epoch);
  // Accuracies of a forward pass without dropout, from counts summed over ranks.
  Accuracy evaluate();
  // Trains epochs [progress().next_epoch, options.epochs), calling on_epoch after each, when progress() has
  // moved past it. Where `stop` is given, it is asked after each epoch's on_epoch, on every rank, and training
  // ends early where it says so: it must answer alike on every rank. progress() tells where training stopped.
  TrainSummary fit(const std::function<void(const EpochMetrics&)>& on_epoch, const std::function<bool()>& stop = {});

  Adam& optimizer() { return optimizer_; }
  const TrainingProgress& progress() const { return progress_; }
  // Evaluations after the one with the best validation accuracy, up to progress().next_epoch: what early stopping
  // counts. A function of the progress and the options alone, so that a resumed run counts on where its checkpoint
  // stood, on any number of ranks. 0 while no validation accuracy was measured.
  std::uint32_t evaluations_since_best() const;
  // Continues from a checkpoint's progress: the epoch numbers address the dropout masks, and the best
  // validation so far carries on into the summary.
  void restore(const TrainingProgress& progress) { progress_ = progress; }

 private:
  // Throws JobError (the same on every rank) naming the epoch, and the parameter, where the loss or a gradient
  // summed over the ranks is NaN or infinite.
  void require_finite(std::uint32_t epoch, double loss);

  Model& model_;
  Executor& executor_;
  Communicator& comm_;
  VertexTargets targets_;
  TrainOptions options_;
  Adam optimizer_;
  TrainingProgress progress_;
  std::int64_t global_train_count_ = 0;
  // Per-call scratch of the loss function: labels and mask of the rows it is given.
  std::vector<std::int32_t> row_labels_;
  std::vector<std::uint8_t> row_mask_;
};

}  // namespace nj
