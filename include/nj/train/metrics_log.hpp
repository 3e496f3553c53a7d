#pragma once
// --metrics-out: one JSON object per line, one per epoch, then a final summary object ("type": "summary").
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "nj/train/trainer.hpp"

namespace nj {

nlohmann::json to_json(const EpochMetrics& metrics);
nlohmann::json to_json(const ExecutionMetrics& metrics);
nlohmann::json to_json(const Accuracy& accuracy);
nlohmann::json to_json(const TrainSummary& summary);

class MetricsLog {
 public:
  MetricsLog() = default;  // disabled: writes nothing
  explicit MetricsLog(const std::string& path);
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace nj
