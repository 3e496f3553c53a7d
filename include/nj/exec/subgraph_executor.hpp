#pragma once
// The memory-managed subgraph executor. Vertex data lives in host memory; each layer runs as steps (a chunk
// of rows transformed, a subgraph aggregated, forward and backward) sized to a device-memory budget, and only
// what a step needs is moved to the device. Two execution modes:
//  - reuse (the paper's embedding reuse): layer by layer, every vertex's rows are computed once per epoch and
//    read by every subgraph that needs them; rows with no reader left are released at once. The epoch's
//    access trace is planned offline by a cache policy (cache_plan.hpp) and replayed.
//  - recompute (the baseline of a graph-unaware swapping framework): each subgraph is pushed through all
//    layers with its whole L-hop in-closure, so shared vertices are recomputed in every subgraph that needs
//    them; only the input features are cached between subgraphs.
// Both compute exactly the gradients of full-graph training: dropout masks depend only on global ids, and
// gradients of shared rows are summed over the subgraphs that read them.
#include <memory>
#include <string>
#include <vector>

#include "nj/device/device.hpp"
#include "nj/exec/cache_plan.hpp"
#include "nj/exec/executor.hpp"
#include "nj/exec/subgraph.hpp"

namespace nj {

enum class ExecutionMode { kReuse, kRecompute };
ExecutionMode parse_execution_mode(const std::string& text);
const char* to_string(ExecutionMode mode);

struct SubgraphExecutorOptions {
  std::int64_t device_budget = kUnlimited;  // bytes
  ExecutionMode mode = ExecutionMode::kReuse;
  CachePolicy policy = CachePolicy::kStAware;
};

// What a step does; a step's `part` indexes its layer's parts (reuse) or the closures (recompute).
enum class StepKind { kTransform, kAggregate, kAggregateBackward, kTransformBackward, kClosure };

struct PlannedStep {
  StepKind kind = StepKind::kTransform;
  std::uint32_t layer = 0;
  std::uint32_t part = 0;
};

// The plan of one epoch, made once: the same every epoch.
struct EpochPlan {
  SubgraphExecutorOptions options;
  std::vector<std::vector<Subgraph>> layer_parts;  // reuse: per layer, its subgraphs (destinations = a chunk)
  std::vector<std::vector<vid_t>> closures;        // recompute: per subgraph, its destinations
  std::vector<PlannedStep> steps;                  // in execution order: the trace's steps, one to one
  std::size_t forward_steps = 0;                   // the first forward_steps steps are the forward pass
  AccessTrace trace;
  CachePlan cache;
  std::int64_t pool_bytes = 0;          // device memory given to the cache pools
  std::int64_t step_limit_bytes = 0;    // what one step may use besides the pools
  std::int64_t largest_step_bytes = 0;  // what the largest planned step uses besides the pools
  std::int64_t peak_bytes_bound =
      0;  // the device peak cannot exceed this: pools, plus two steps (one without prefetch)
  std::int64_t stream_h2d_bytes = 0;  // predicted bytes of rows streamed to the device (not cached)
  std::int64_t stream_d2h_bytes = 0;  // predicted bytes of rows streamed back
  std::int64_t rows_computed = 0;     // per epoch, forward aggregations
  std::int64_t rows_needed = 0;

  std::int64_t predicted_h2d_bytes() const { return cache.h2d_bytes + stream_h2d_bytes; }
  std::int64_t predicted_d2h_bytes() const { return cache.d2h_bytes + stream_d2h_bytes; }
};

// Plans an epoch of `model` on `graph` (as stored: the model adds its self-loops). Throws nj::InputError when
// the budget cannot hold the smallest possible step, naming the smallest budget that would.
EpochPlan plan_epoch(const Model& model, const CsrGraph& graph, const SubgraphExecutorOptions& options,
                     gid_t first_gid = 0);

// The smallest device budget with which plan_epoch succeeds for this model, graph and mode.
std::int64_t minimum_device_budget(const Model& model, const CsrGraph& graph, ExecutionMode mode);

class SubgraphExecutor final : public Executor {
 public:
  // `features` and `graph` must outlive the executor.
  SubgraphExecutor(Backend& backend, Device& device, const Model& model, const CsrGraph& graph, ConstRows features,
                   const SubgraphExecutorOptions& options, gid_t first_gid = 0);
  ~SubgraphExecutor() override;
  ConstRows evaluate(Model& model) override;
  double train_step(Model& model, std::uint32_t epoch, const LossFunction& loss) override;
  ExecutionMetrics take_metrics() override;
  const EpochPlan& plan() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace nj
