#include "nj/train/metrics_log.hpp"

#include "nj/core/error.hpp"

namespace nj {
namespace {

// JSON has no NaN: an accuracy that was not measured is null.
nlohmann::json number_or_null(double value) {
  return std::isnan(value) ? nlohmann::json(nullptr) : nlohmann::json(value);
}

// The width of the rows sent says which side the layer exchanges (exchange_side.hpp): its inputs' width, or its
// transformed rows'.
nlohmann::json to_json(const ExchangeSummary& e) {
  const std::int64_t row_width = e.rows_sent > 0 ? e.bytes_sent / e.rows_sent / std::int64_t{sizeof(float)} : 0;
  return {{"rows_sent", e.rows_sent},
          {"rows_received", e.rows_received},
          {"bytes_sent", e.bytes_sent},
          {"bytes_received", e.bytes_received},
          {"row_width", row_width},
          {"seconds", to_json(e.seconds)},
          {"wait_seconds", to_json(e.wait_seconds)}};
}

}  // namespace

nlohmann::json to_json(const OverRanks& value) { return {{"max", value.max}, {"mean", value.mean}}; }

nlohmann::json to_json(const Accuracy& accuracy) {
  return {{"train", number_or_null(accuracy.train)},
          {"val", number_or_null(accuracy.val)},
          {"test", number_or_null(accuracy.test)}};
}

nlohmann::json to_json(const EpochMetrics& m) {
  return {{"type", "epoch"},
          {"epoch", m.epoch + 1},  // counted from 1, as the log counts
          {"loss", m.loss},
          {"train_acc", number_or_null(m.accuracy.train)},
          {"val_acc", number_or_null(m.accuracy.val)},
          {"test_acc", number_or_null(m.accuracy.test)},
          {"epoch_seconds", m.train_seconds()},
          {"step_seconds", m.step_seconds},
          {"optimizer_seconds", m.optimizer_seconds},
          {"eval_seconds", m.eval_seconds},
          {"execution", to_json(m.execution)},
          {"over_ranks", over_ranks_json(m)}};
}

nlohmann::json over_ranks_json(const EpochMetrics& m) {
  nlohmann::json exchange = nlohmann::json::array();
  for (std::size_t l = 0; l < m.exchange.size(); ++l) {
    exchange.push_back(
        {{"layer", l + 1}, {"forward", to_json(m.exchange[l][0])}, {"backward", to_json(m.exchange[l][1])}});
  }
  return {{"step_seconds", to_json(m.step_over_ranks)},
          {"compute_seconds", to_json(m.compute_over_ranks)},
          {"copy_seconds", to_json(m.copy_over_ranks)},
          {"copy_wait_seconds", to_json(m.copy_wait_over_ranks)},
          {"exchange", exchange}};
}

nlohmann::json to_json(const ExecutionMetrics& e) {
  return {{"h2d_bytes", e.h2d_bytes},
          {"d2h_bytes", e.d2h_bytes},
          {"h2d_other_bytes", e.h2d_other.total()},
          {"d2h_other_bytes", e.d2h_other.total()},
          {"h2d_structure_bytes", e.h2d_other[Traffic::kStructure]},
          {"h2d_index_bytes", e.h2d_other[Traffic::kIndex]},
          {"h2d_parameter_bytes", e.h2d_other[Traffic::kParameters]},
          {"d2h_parameter_bytes", e.d2h_other[Traffic::kParameters]},
          {"pageable_copies", e.pageable_copies},
          {"cache_hit_rate", e.hit_rate()},
          {"recompute_ratio", e.recompute_ratio()},
          {"rows_computed", e.rows_computed},
          {"rows_needed", e.rows_needed},
          {"peak_device_bytes", e.peak_device_bytes},
          {"peak_device_footprint_bytes", e.peak_device_footprint_bytes},
          {"compute_seconds", e.compute_seconds},
          {"plan_seconds", e.plan_seconds},
          {"copy_seconds", e.copy_seconds},
          {"wait_seconds", e.wait_seconds}};
}

nlohmann::json to_json(const TrainSummary& s) {
  return {{"type", "summary"},
          {"epochs", s.epochs},
          {"epochs_done", s.epochs_done},
          {"stopped", s.stopped_early ? "early stop" : "every epoch"},
          {"final", to_json(s.final_accuracy)},
          {"best_val_epoch", s.best_val_accuracy.valid() ? nlohmann::json(s.best_val_epoch + 1) : nullptr},
          {"best_val", to_json(s.best_val_accuracy)},
          {"median_epoch_seconds", s.median_epoch_seconds},
          {"total_seconds", s.total_seconds}};
}

MetricsLog::MetricsLog(const std::string& path, Mode mode)
    : path_(path), out_(path, mode == kAppend ? std::ios::app : std::ios::trunc) {
  NJ_REQUIRE(out_.is_open(), "{}: cannot open for writing", path);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (path_.empty()) return;
  out_ << record.dump() << '\n';
  out_.flush();
  NJ_REQUIRE(out_.good(), "{}: write failed", path_);
}

}  // namespace nj
