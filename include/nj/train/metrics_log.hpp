#pragma once
// --metrics-out: one JSON object per line, one per epoch, then a final summary object ("type": "summary").
// Epochs are counted from 1 there, as in the log.
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "nj/train/trainer.hpp"

namespace nj {

nlohmann::json to_json(const EpochMetrics& metrics);
// The epoch's figures over the ranks of the job: phase times (max and mean), and per layer the forward and
// backward boundary exchange (rows and bytes summed over ranks, times as max and mean).
nlohmann::json over_ranks_json(const EpochMetrics& metrics);
nlohmann::json to_json(const ExecutionMetrics& metrics);
nlohmann::json to_json(const Accuracy& accuracy);
nlohmann::json to_json(const OverRanks& value);  // {"max": ..., "mean": ...}
nlohmann::json to_json(const TrainSummary& summary);

class MetricsLog {
 public:
  enum Mode { kCreate, kAppend };  // kAppend: a resumed run goes on with the log it started
  MetricsLog() = default;          // disabled: writes nothing
  explicit MetricsLog(const std::string& path, Mode mode = kCreate);
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace nj
