#include "cli/fault_injection.hpp"

#include <csignal>
#include <regex>

#include "nj/core/error.hpp"

namespace nj::cli {
namespace {

// Fails in the middle of one epoch's step, after the forward pass, as --inject-failure says.
class FailingExecutor final : public Executor {
 public:
  FailingExecutor(Executor& inner, const FailurePoint& point) : inner_(inner), point_(point) {}
  ConstRows evaluate(Model& model) override { return inner_.evaluate(model); }
  ConstRows layer_outputs(std::size_t l) override { return inner_.layer_outputs(l); }
  double train_step(Model& model, std::uint32_t epoch, const LossFunction& loss) override {
    if (epoch != point_.epoch) return inner_.train_step(model, epoch, loss);
    return inner_.train_step(model, epoch, [&](ConstRows, const vid_t*, Rows) -> double {
      if (point_.how == FailurePoint::How::kKill) std::raise(SIGKILL);
      throw Error(fmt::format("injected failure in epoch {}", epoch + 1));
    });
  }
  ExecutionMetrics take_metrics() override { return inner_.take_metrics(); }

 private:
  Executor& inner_;
  FailurePoint point_;
};

}  // namespace

FailurePoint parse_failure_point(const std::string& text) {
  static const std::regex form(R"((\d+):(\d+)(?::(error|kill|kill-in-checkpoint))?)");
  std::smatch match;
  NJ_USAGE(std::regex_match(text, match, form) && std::stoi(match[2]) >= 1,
           "--inject-failure takes RANK:EPOCH[:error|kill|kill-in-checkpoint] with EPOCH >= 1, got '{}'", text);
  FailurePoint point{.rank = std::stoi(match[1]), .epoch = static_cast<std::uint32_t>(std::stoi(match[2]) - 1)};
  if (match[3] == "kill") point.how = FailurePoint::How::kKill;
  if (match[3] == "kill-in-checkpoint") point.how = FailurePoint::How::kKillInCheckpoint;
  NJ_USAGE(point.how != FailurePoint::How::kKillInCheckpoint || point.rank == 0,
           "--inject-failure: only rank 0 writes checkpoints, got '{}'", text);
  return point;
}

std::unique_ptr<Executor> make_failing_executor(Executor& inner, const FailurePoint& point) {
  return std::make_unique<FailingExecutor>(inner, point);
}

}  // namespace nj::cli
