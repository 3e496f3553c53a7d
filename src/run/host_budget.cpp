#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "nj/core/bytes.hpp"
#include "nj/core/error.hpp"
#include "nj/run/rank_setup.hpp"

namespace nj {
namespace {

// A device budget is lowered in eighths of the one given, down to half of it: steps a process's own few hundred KiB
// rarely move a choice across (nj plan's process is not nj train's), each a plan of its own.
constexpr int kEighthsLeast = 4;

// Whether computing outputs again would spare host rows: a chained first layer that sums its inputs and takes its
// backward in the second layer's (Pass::first_layer_backward_fused), whose outputs --recompute-outputs auto keeps on
// the host (on the CPU device). Attention layers, which could be computed again too, are left as they are.
bool keeps_first_layer_outputs(const ExecutorChoice& choice, const PlannedRun& run) {
  const Pass* pass = run.first_pass();
  if (pass == nullptr || choice.options.recompute_outputs != RecomputeOutputs::kAuto) return false;
  return pass->chained_to_next(0) && pass->first_layer_backward_fused && !pass->output_recomputed(0);
}

bool keeps_blocks(const PlannedRun& run) {
  const Pass* pass = run.first_pass();
  return pass != nullptr && pass->keeps_blocks();
}

class Fitting {
 public:
  Fitting(const ExecutorChoice& choice, const HostBudget& budget,
          const std::function<PlannedRun(const ExecutorChoice&)>& plan)
      : budget_(budget), plan_(plan) {
    fitted_.choice = choice;
    fitted_.run = plan_(choice);
    if (budget_.forecast) fitted_.host = budget_.forecast(choice, fitted_.run);
  }
  bool fits() const { return budget_.bytes < 0 || !budget_.forecast || fitted_.host.total() <= budget_.bytes; }
  const HostFittedRun& fitted() const { return fitted_; }
  HostFittedRun take() {
    fitted_.fits = fits();
    return std::move(fitted_);
  }

  // Plans again with `lighter`, which `what` names, and keeps it; in place of the last choice where it `revises` it.
  void try_choice(const ExecutorChoice& lighter, const std::string& what, bool revises = false) {
    spdlog::info("host memory: the plan needs {} ({}), more than the {} {}; planning again with {}",
                 format_bytes(fitted_.host.total()), fitted_.host.describe(), format_bytes(budget_.bytes),
                 budget_.source, what);
    // One plan at a time: the last one's structures go before the next is built. Where the next does not plan, the
    // last is planned again, and kept.
    fitted_.run = PlannedRun{};
    try {
      fitted_.run = plan_(lighter);
    } catch (const InputError&) {
      fitted_.run = plan_(fitted_.choice);
      fitted_.host = budget_.forecast(fitted_.choice, fitted_.run);
      throw;
    }
    fitted_.choice = lighter;
    fitted_.host = budget_.forecast(lighter, fitted_.run);
    if (revises) fitted_.lighter.pop_back();
    fitted_.lighter.push_back(what);
  }

 private:
  const HostBudget& budget_;
  const std::function<PlannedRun(const ExecutorChoice&)>& plan_;
  HostFittedRun fitted_;
};

// On the CPU device the device's memory is host memory: a smaller device budget, 7/8 of the one given, then 6/8, ...
void lower_device_budget(Fitting& fitting) {
  const std::int64_t given = fitting.fitted().choice.options.device_budget;
  for (int eighths = 7; eighths >= kEighthsLeast && !fitting.fits(); --eighths) {
    ExecutorChoice lighter = fitting.fitted().choice;
    lighter.options.device_budget = given / 8 * eighths / 1024 * 1024;  // whole KiB, as --device-memory takes
    try {
      fitting.try_choice(lighter,
                         fmt::format("a device budget of {} ({}/8 of the one given: the CPU device's memory is host "
                                     "memory)",
                                     format_bytes(lighter.options.device_budget), eighths),
                         eighths < 7);
    } catch (const InputError& too_small) {
      spdlog::info("host memory: a device budget of {} does not plan: {}", format_bytes(lighter.options.device_budget),
                   too_small.what());
      return;
    }
  }
}

}  // namespace

HostFittedRun plan_within_host_memory(const ExecutorChoice& choice, const HostBudget& budget,
                                      const std::function<PlannedRun(const ExecutorChoice&)>& plan) {
  Fitting fitting(choice, budget, plan);
  if (fitting.fits() || choice.in_memory) return fitting.take();
  if (keeps_first_layer_outputs(fitting.fitted().choice, fitting.fitted().run)) {
    ExecutorChoice lighter = fitting.fitted().choice;
    lighter.options.recompute_outputs = RecomputeOutputs::kOn;
    fitting.try_choice(lighter,
                       "the first layer's outputs computed again in the backward half (--recompute-outputs on)");
  }
  if (!fitting.fits() && keeps_blocks(fitting.fitted().run)) {
    ExecutorChoice lighter = fitting.fitted().choice;
    lighter.options.kept_block_bytes = 0;
    fitting.try_choice(lighter, "subgraph blocks built by each step as it runs, not kept on the host");
  }
  const ExecutorChoice& now = fitting.fitted().choice;
  if (!fitting.fits() && !now.options.library.memory_apart_from_host && now.options.device_budget != kUnlimited) {
    lower_device_budget(fitting);
  }
  if (fitting.fits()) {
    spdlog::info("host memory: planned within the {} {}: {}", format_bytes(budget.bytes), budget.source,
                 fmt::join(fitting.fitted().lighter, "; "));
  }
  return fitting.take();
}

}  // namespace nj
