#include "nj/train/trainer.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>

#include "nj/core/enum_names.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/train/loss.hpp"

namespace nj {
namespace {

std::vector<Parameter*> with_decay_scope(Model& model, WeightDecayScope scope) {
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    for (Parameter* p : model.layer(l).parameters()) p->decay = scope == WeightDecayScope::kAll || l == 0;
  }
  return model.parameters();
}

// Fills the metrics' views over the ranks from each rank's own.
void summarise_over_ranks(Communicator& comm, EpochMetrics& m) {
  const ExecutionMetrics& e = m.execution;
  std::vector<double> times = {m.step_seconds, e.compute_seconds, e.copy_seconds, e.wait_seconds};
  std::vector<std::int64_t> counts;
  for (const auto& layer : e.exchange) {
    for (const ExchangeStats& d : layer) {
      times.push_back(d.seconds);
      times.push_back(d.wait_seconds);
      counts.insert(counts.end(), {d.rows_sent, d.rows_received, d.bytes_sent, d.bytes_received});
    }
  }
  const std::vector<OverRanks> spread = over_ranks(comm, times);
  comm.all_reduce_sum(counts);
  m.step_over_ranks = spread[0];
  m.compute_over_ranks = spread[1];
  m.copy_over_ranks = spread[2];
  m.copy_wait_over_ranks = spread[3];
  m.exchange.resize(e.exchange.size());
  std::size_t t = 4;
  std::size_t c = 0;
  for (auto& layer : m.exchange) {
    for (ExchangeSummary& d : layer) {
      d = {counts[c], counts[c + 1], counts[c + 2], counts[c + 3], spread[t], spread[t + 1]};
      t += 2;
      c += 4;
    }
  }
}

}  // namespace

std::vector<OverRanks> over_ranks(Communicator& comm, std::vector<double> values) {
  std::vector<double> maxima = values;
  comm.all_reduce_max(maxima);
  comm.all_reduce_sum(values);
  std::vector<OverRanks> out;
  for (std::size_t i = 0; i < values.size(); ++i) out.push_back({maxima[i], values[i] / comm.size()});
  return out;
}

VertexTargets targets_of(const Dataset& dataset) {
  return {dataset.labels, dataset.train_mask, dataset.val_mask, dataset.test_mask, count(dataset.train_mask)};
}

VertexTargets targets_of(const Shard& shard) {
  return {shard.labels, shard.train_mask, shard.val_mask, shard.test_mask, shard.global_train};
}

WeightDecayScope parse_weight_decay_scope(const std::string& text) {
  static constexpr EnumNames<WeightDecayScope, 2> kNames{
      "weight-decay scope", {{{WeightDecayScope::kAll, "all"}, {WeightDecayScope::kFirstLayer, "first"}}}};
  return kNames.parse(text);
}

Trainer::Trainer(Model& model, Executor& executor, Communicator& comm, const VertexTargets& targets,
                 const TrainOptions& options)
    : model_(model),
      executor_(executor),
      comm_(comm),
      targets_(targets),
      options_(options),
      optimizer_(with_decay_scope(model, options.decay_scope), options.adam) {
  global_train_count_ = targets.global_train_count;
  NJ_REQUIRE(global_train_count_ > 0, "no training vertices");
}

EpochMetrics Trainer::train_epoch(std::uint32_t epoch) {
  EpochMetrics metrics;
  metrics.epoch = epoch;
  const float scale = 1.0F / static_cast<float>(global_train_count_);
  const LossFunction loss_function = [&](ConstRows logits, const vid_t* vertices, Rows grad) {
    if (vertices == nullptr) {
      return masked_softmax_cross_entropy(logits, targets_.labels.data(), targets_.train_mask.data(), scale, grad);
    }
    row_labels_.resize(static_cast<std::size_t>(logits.rows));
    row_mask_.resize(static_cast<std::size_t>(logits.rows));
    for (std::int64_t r = 0; r < logits.rows; ++r) {
      const auto v = static_cast<std::size_t>(vertices[r]);
      row_labels_[static_cast<std::size_t>(r)] = targets_.labels[v];
      row_mask_[static_cast<std::size_t>(r)] = targets_.train_mask[v];
    }
    return masked_softmax_cross_entropy(logits, row_labels_.data(), row_mask_.data(), scale, grad);
  };

  auto start = std::chrono::steady_clock::now();
  optimizer_.zero_grad();
  std::array<double, 1> loss{executor_.train_step(model_, epoch, loss_function)};
  metrics.step_seconds = seconds_since(start);
  metrics.execution = executor_.take_metrics();

  start = std::chrono::steady_clock::now();
  comm_.all_reduce_sum(loss);
  require_finite(epoch, loss[0]);
  optimizer_.step();
  metrics.optimizer_seconds = seconds_since(start);
  metrics.loss = loss[0] / static_cast<double>(global_train_count_);
  summarise_over_ranks(comm_, metrics);
  return metrics;
}

// After the all-reduce every rank holds the same sums, so every rank stops here alike and rank 0 says why,
// before the optimizer writes non-finite weights (which a checkpoint would keep).
void Trainer::require_finite(std::uint32_t epoch, double loss) {
  const auto stop = [&](const std::string& what) {
    throw JobError(fmt::format("epoch {}: {}: training diverged, or its input holds non-finite values (a lower --lr "
                               "may help)",
                               epoch + 1, what),
                   0, comm_.rank() == 0);
  };
  if (!std::isfinite(loss)) stop(fmt::format("the loss is {}", loss));
  for (const Parameter* p : model_.parameters()) {
    const std::span<const float> grad = p->grad.span();
    const auto bad = std::find_if(grad.begin(), grad.end(), [](float g) { return !std::isfinite(g); });
    if (bad != grad.end()) {
      const auto at = bad - grad.begin();
      stop(fmt::format("the gradient of {} is {} (row {}, column {})", p->name, *bad, at / p->grad.cols(),
                       at % p->grad.cols()));
    }
  }
}

std::int64_t predicted_class(const float* logits, std::int64_t classes) {
  return std::max_element(logits, logits + classes) - logits;
}

Accuracy accuracy_of(ConstRows logits, const VertexTargets& targets, Communicator& comm) {
  // correct and total for train, val, test
  std::array<std::int64_t, 6> counts{};
  const std::array<std::span<const std::uint8_t>, 3> masks = {targets.train_mask, targets.val_mask, targets.test_mask};
  for (std::int64_t v = 0; v < logits.rows; ++v) {
    const bool correct = predicted_class(logits.row(v), logits.cols) == targets.labels[static_cast<std::size_t>(v)];
    for (std::size_t s = 0; s < masks.size(); ++s) {
      if (masks[s][static_cast<std::size_t>(v)] != 0) {
        counts[2 * s] += correct ? 1 : 0;
        counts[2 * s + 1] += 1;
      }
    }
  }
  comm.all_reduce_sum(counts);
  auto ratio = [&](std::size_t s) {
    return counts[2 * s + 1] > 0 ? static_cast<double>(counts[2 * s]) / static_cast<double>(counts[2 * s + 1])
                                 : Accuracy::kNone;
  };
  return {ratio(0), ratio(1), ratio(2)};
}

Accuracy Trainer::evaluate() {
  const ConstRows logits = executor_.evaluate(model_);
  executor_.take_metrics();  // evaluation traffic is not the training step's
  return accuracy_of(logits, targets_, comm_);
}

std::uint32_t Trainer::evaluations_since_best() const {
  if (!progress_.best_val_accuracy.valid() || options_.eval_every == 0) return 0;
  // Evaluated epochs are those e with (e + 1) a multiple of eval_every (and the last, after which nothing is left).
  const std::uint32_t done = progress_.next_epoch;
  const std::uint32_t best_done = progress_.best_val_epoch + 1;
  if (best_done > done) return 0;  // progress read from a file that says so; nothing after the best yet
  return done / options_.eval_every - best_done / options_.eval_every;
}

TrainSummary Trainer::fit(const std::function<void(const EpochMetrics&)>& on_epoch, const std::function<bool()>& stop) {
  TrainSummary summary;
  std::vector<double> epoch_seconds;
  const auto start = std::chrono::steady_clock::now();
  const auto patience_ran_out = [this] {
    return options_.early_stop_patience > 0 && evaluations_since_best() >= options_.early_stop_patience;
  };
  // A run resumed after it stopped early (a requeued job) stops again at once.
  summary.stopped_early = progress_.next_epoch < options_.epochs && patience_ran_out();
  for (std::uint32_t epoch = progress_.next_epoch; epoch < options_.epochs && !summary.stopped_early; ++epoch) {
    EpochMetrics metrics = train_epoch(epoch);
    const bool last = epoch + 1 == options_.epochs;
    if (last || (options_.eval_every > 0 && (epoch + 1) % options_.eval_every == 0)) {
      const auto eval_start = std::chrono::steady_clock::now();
      metrics.accuracy = evaluate();
      metrics.eval_seconds = seconds_since(eval_start);
      const double best_val = progress_.best_val_accuracy.val;  // NaN until an epoch with validation vertices
      if (metrics.accuracy.valid() && (std::isnan(best_val) || metrics.accuracy.val > best_val)) {
        progress_.best_val_epoch = epoch;
        progress_.best_val_accuracy = metrics.accuracy;
      }
      progress_.final_accuracy = metrics.accuracy;
    }
    progress_.next_epoch = epoch + 1;
    epoch_seconds.push_back(metrics.train_seconds());
    on_epoch(metrics);
    summary.stopped_early = !last && patience_ran_out();
    if (!summary.stopped_early && stop && stop()) break;
  }
  summary.best_val_epoch = progress_.best_val_epoch;
  summary.best_val_accuracy = progress_.best_val_accuracy;
  summary.final_accuracy = progress_.final_accuracy;
  summary.epochs = options_.epochs;
  summary.epochs_done = progress_.next_epoch;
  summary.total_seconds = seconds_since(start);
  if (!epoch_seconds.empty()) {
    std::sort(epoch_seconds.begin(), epoch_seconds.end());
    const std::size_t mid = epoch_seconds.size() / 2;
    summary.median_epoch_seconds =
        epoch_seconds.size() % 2 == 1 ? epoch_seconds[mid] : 0.5 * (epoch_seconds[mid - 1] + epoch_seconds[mid]);
  }
  return summary;
}

}  // namespace nj
