// An exception in the middle of a training step, from a kernel or from the device (an allocation, a copy, a
// synchronisation), leaves nothing behind: the device holds what it held before the step, no copy is still
// running, and the next step on the same executor computes the loss, the gradients and the traffic of a step that
// never failed, bit for bit. Each case moves the failure through the step, forward and backward, including
// points where prefetched loads are still in flight on the copy streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "nj/exec/subgraph_executor.hpp"
#include "nj/kernels/forwarding_backend.hpp"
#include "nj/train/loss.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

struct InjectedFault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Counts operations while armed and throws InjectedFault from the n-th. It also notes, at each operation, whether
// copies issued earlier are still running (asking wakes the copy engines, which then run beside the unwinding).
class FaultInjector {
 public:
  static constexpr std::int64_t kNever = 0;

  explicit FaultInjector(Device& device) : device_(device) {}

  // Counts from zero; fails at operation `fail_at` (kNever: only counts).
  void arm(std::int64_t fail_at) {
    armed_ = true;
    fail_at_ = fail_at;
    count_ = 0;
    in_flight_at_.clear();
  }
  void disarm() { armed_ = false; }

  void operation(const char* what) {
    if (!armed_) return;
    ++count_;
    const bool in_flight = copies_in_flight();
    if (in_flight) in_flight_at_.push_back(count_);
    if (count_ == fail_at_) {
      armed_ = false;
      throw InjectedFault(fmt::format("injected fault at operation {} ({})", count_, what));
    }
  }

  bool copies_in_flight() {
    return !device_.is_complete(device_.record(Stream::kHostToDevice)) ||
           !device_.is_complete(device_.record(Stream::kDeviceToHost));
  }
  std::int64_t count() const { return count_; }
  // The operations since arm() at which copies were in flight.
  const std::vector<std::int64_t>& in_flight_at() const { return in_flight_at_; }

 private:
  Device& device_;
  bool armed_ = false;
  std::int64_t fail_at_ = kNever;
  std::int64_t count_ = 0;
  std::vector<std::int64_t> in_flight_at_;
};

// Every kernel is an operation that may fail, before it runs.
class FaultyBackend final : public ForwardingBackend {
 public:
  FaultyBackend(std::unique_ptr<Backend> inner, FaultInjector& faults)
      : ForwardingBackend(std::move(inner)), faults_(faults) {}

 private:
  void before(const KernelCall& call) override { faults_.operation(call.kernel); }

  FaultInjector& faults_;
};

// Allocations and copies may fail when they are issued, and a synchronisation after the work completed, as CUDA
// reports an asynchronous error of the work it waited for.
class FaultyDevice final : public Device {
 public:
  FaultyDevice(std::unique_ptr<Device> inner, FaultInjector& faults) : inner_(std::move(inner)), faults_(faults) {}

  std::string_view name() const override { return inner_->name(); }
  std::int64_t budget_bytes() const override { return inner_->budget_bytes(); }
  void* allocate(std::int64_t bytes, std::string_view what) override {
    faults_.operation("allocate");
    return inner_->allocate(bytes, what);
  }
  void deallocate(void* ptr) noexcept override { inner_->deallocate(ptr); }
  void* allocate_pinned(std::int64_t bytes) override { return inner_->allocate_pinned(bytes); }
  void deallocate_pinned(void* ptr) noexcept override { inner_->deallocate_pinned(ptr); }
  Event copy_to_device(void* device_dst, const void* host_src, std::int64_t bytes) override {
    faults_.operation("copy_to_device");
    return inner_->copy_to_device(device_dst, host_src, bytes);
  }
  Event copy_to_host(void* host_dst, const void* device_src, std::int64_t bytes) override {
    faults_.operation("copy_to_host");
    return inner_->copy_to_host(host_dst, device_src, bytes);
  }
  Event record(Stream stream) override { return inner_->record(stream); }
  void wait(Stream waiter, const Event& event) override { inner_->wait(waiter, event); }
  bool is_complete(const Event& event) override { return inner_->is_complete(event); }
  void synchronize(const Event& event) override {
    inner_->synchronize(event);
    faults_.operation("synchronize");
  }
  void synchronize() override {
    inner_->synchronize();
    faults_.operation("synchronize");
  }
  void use(const void* ptr, std::int64_t bytes, Access access, std::string_view what) override {
    inner_->use(ptr, bytes, access, what);
  }
  void check_host_access(const void* ptr, std::int64_t bytes, std::string_view what) const override {
    inner_->check_host_access(ptr, bytes, what);
  }
  DeviceStats stats() const override { return inner_->stats(); }
  void reset_transfer_stats() override { inner_->reset_transfer_stats(); }

 private:
  std::unique_ptr<Device> inner_;
  FaultInjector& faults_;
};

enum class FaultSource { kKernel, kDevice };
// kReuseUnlimited: reuse without a budget, whose blocks and features stay on the device across steps.
enum class Execution { kInMemory, kReuse, kRecompute, kReuseUnlimited };

const char* to_string(FaultSource source) { return source == FaultSource::kKernel ? "kernel" : "device"; }
const char* to_string(Execution execution) {
  switch (execution) {
    case Execution::kInMemory: return "in_memory";
    case Execution::kReuse: return "reuse";
    case Execution::kRecompute: return "recompute";
    case Execution::kReuseUnlimited: return "reuse_unlimited";
  }
  return "?";
}

bool unlimited(Execution execution) {
  return execution == Execution::kInMemory || execution == Execution::kReuseUnlimited;
}

// What a training step computed: its loss, every parameter's gradient, and what the executor measured.
struct StepResult {
  double loss = 0.0;
  std::vector<std::vector<float>> gradients;
  ExecutionMetrics metrics;
  std::int64_t forward_operations = 0;  // operations counted before the loss was taken
};

// A model and an executor on resources whose kernels or device operations go through a fault injector.
class TrainingRun {
 public:
  TrainingRun(DeviceKind kind, const Dataset& data, ModelKind model_kind, Execution execution, std::int64_t budget,
              FaultSource source)
      : data_(data),
        resources_(test::backend_resources(kind, unlimited(execution) ? kUnlimited : budget, 2)),
        faults_(*resources_.device),
        model_(test::training_config(model_kind), data.features.cols(), data.num_classes),
        local_(whole_local_graph(data.graph)) {
    if (source == FaultSource::kKernel) {
      resources_.backend = std::make_unique<FaultyBackend>(std::move(resources_.backend), faults_);
    } else {
      resources_.device = std::make_unique<FaultyDevice>(std::move(resources_.device), faults_);
    }
    if (execution == Execution::kInMemory) {
      executor_ = std::make_unique<InMemoryExecutor>(resources_, model_, local_, data.features.view());
    } else {
      const bool recompute = execution == Execution::kRecompute;
      const auto mode = recompute ? ExecutionMode::kRecompute : ExecutionMode::kReuse;
      const auto policy = recompute ? CachePolicy::kSizeOrder : CachePolicy::kStAware;
      SubgraphExecutorOptions options{unlimited(execution) ? kUnlimited : budget, mode, policy};
      // What stays for the run takes the room the budget leaves first, so that the pools, grown into what is left,
      // still evict rows.
      options.room_first = RoomFirst::kStaying;
      executor_ = std::make_unique<SubgraphExecutor>(resources_, model_, local_, data.features.view(), options);
    }
  }

  Device& device() { return *resources_.device; }
  FaultInjector& faults() { return faults_; }

  // A training step as the trainer takes it: gradients zeroed first, the loss of the training vertices.
  StepResult step(std::uint32_t epoch) {
    for (Parameter* p : model_.parameters()) p->grad.fill(0.0F);
    StepResult result;
    const float scale = 1.0F / static_cast<float>(count(data_.train_mask));
    const LossFunction loss = [&](ConstRows logits, const vid_t* vertices, Rows grad) {
      result.forward_operations = faults_.count();
      std::vector<std::int32_t> labels;
      std::vector<std::uint8_t> mask;
      for (std::int64_t r = 0; r < logits.rows; ++r) {
        const auto v = static_cast<std::size_t>(vertices != nullptr ? vertices[r] : static_cast<vid_t>(r));
        labels.push_back(data_.labels[v]);
        mask.push_back(data_.train_mask[v]);
      }
      return masked_softmax_cross_entropy(logits, labels.data(), mask.data(), scale, grad);
    };
    result.loss = executor_->train_step(model_, epoch, loss);
    faults_.disarm();  // the step is what fails, not taking its measurements
    for (Parameter* p : model_.parameters())
      result.gradients.emplace_back(p->grad.span().begin(), p->grad.span().end());
    result.metrics = executor_->take_metrics();
    return result;
  }

  // An evaluation between epochs, whose traffic the trainer drops.
  void evaluate() {
    executor_->evaluate(model_);
    faults_.disarm();
    executor_->take_metrics();
  }

  // What a failed step or evaluation must leave: the device memory and page-locked staging of `before`, and on
  // the CPU device, whose copy engines are threads, no copy still running for it. (A GPU's stream-ordered frees
  // may leave copies queued legitimately.)
  void expect_nothing_left(const DeviceStats& before) {
    const DeviceStats after = device().stats();
    EXPECT_EQ(after.in_use_bytes, before.in_use_bytes) << "device memory of the failed step is freed";
    EXPECT_EQ(after.pinned_bytes, before.pinned_bytes) << "its page-locked staging is freed";
    if (device().name() == "cpu") {
      EXPECT_FALSE(faults_.copies_in_flight());
    }
  }

 private:
  const Dataset& data_;
  Resources resources_;
  FaultInjector faults_;
  Model model_;
  LocalGraph local_;
  std::unique_ptr<Executor> executor_;
};

void expect_same_step(const StepResult& expected, const StepResult& actual) {
  EXPECT_EQ(expected.loss, actual.loss);
  EXPECT_EQ(expected.gradients, actual.gradients);
  const ExecutionMetrics& e = expected.metrics;
  const ExecutionMetrics& a = actual.metrics;
  EXPECT_EQ(std::tie(e.h2d_bytes, e.d2h_bytes, e.h2d_other, e.d2h_other, e.pageable_copies),
            std::tie(a.h2d_bytes, a.d2h_bytes, a.h2d_other, a.d2h_other, a.pageable_copies))
      << "traffic";
  EXPECT_EQ(std::tie(e.cache_hits, e.cache_misses, e.rows_computed, e.rows_needed),
            std::tie(a.cache_hits, a.cache_misses, a.rows_computed, a.rows_needed))
      << "cache and rows";
  EXPECT_EQ(std::tie(e.peak_device_bytes, e.peak_device_footprint_bytes),
            std::tie(a.peak_device_bytes, a.peak_device_footprint_bytes))
      << "device peak";
}

// Where to fail in a step of `total` operations whose first `forward` are the forward pass: both ends, both sides
// of the loss, evenly in between, and some of the points where copies were in flight.
std::vector<std::int64_t> failure_points(std::int64_t total, std::int64_t forward,
                                         const std::vector<std::int64_t>& in_flight) {
  constexpr std::int64_t kSpread = 10;
  constexpr std::size_t kInFlightPoints = 4;
  std::vector<std::int64_t> points = {1, forward, forward + 1, total};
  for (std::int64_t i = 1; i < kSpread; ++i) points.push_back(i * total / kSpread);
  for (std::size_t i = 0; i < kInFlightPoints && !in_flight.empty(); ++i) {
    points.push_back(in_flight[i * (in_flight.size() - 1) / (kInFlightPoints - 1)]);
  }
  std::erase_if(points, [&](std::int64_t n) { return n < 1 || n > total; });
  std::ranges::sort(points);
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return points;
}

// The budget of the subgraph executors: an eighth of what the whole graph needs at once without a budget (which
// keeps every subgraph's block on the device), so that rows are evicted and loaded again, and loads are
// prefetched.
std::int64_t tight_budget(const Dataset& data, ModelKind model_kind) {
  Model model(test::training_config(model_kind), data.features.cols(), data.num_classes);
  const LocalGraph local = whole_local_graph(data.graph);
  const EpochPlan plan = plan_epoch(model, local, {kUnlimited, ExecutionMode::kReuse, CachePolicy::kStAware});
  const std::int64_t need = forecast_device_memory(model, local, data.features.view(), plan).peak_footprint_bytes;
  return std::max(need / 8, minimum_device_budget(model, local));
}

using FaultCase = std::tuple<DeviceKind, ModelKind, Execution, FaultSource>;

class ExceptionSafety : public ::testing::TestWithParam<FaultCase> {
 protected:
  void SetUp() override { NJ_SKIP_WITHOUT_BACKEND(kind()); }
  DeviceKind kind() const { return std::get<0>(GetParam()); }
  ModelKind model_kind() const { return std::get<1>(GetParam()); }
  Execution execution() const { return std::get<2>(GetParam()); }
  FaultSource source() const { return std::get<3>(GetParam()); }
};

TEST_P(ExceptionSafety, AFailedStepLeavesNothingBehindAndTheNextStepIsExact) {
  const Dataset data = test::grid_dataset(16, 16, 11);
  const std::int64_t budget = tight_budget(data, model_kind());

  // What a step computes on an executor that never failed: the second epoch, after a first.
  StepResult expected;
  {
    TrainingRun reference(kind(), data, model_kind(), execution(), budget, source());
    reference.step(0);
    expected = reference.step(1);
  }
  // Reuse under this budget evicts rows, loads them again and prefetches loads (the recompute baseline loads
  // on demand).
  const bool reuse = execution() == Execution::kReuse;
  if (reuse) {
    ASSERT_GT(expected.metrics.cache_misses, 0) << "the budget makes rows leave the device and come back";
  }

  TrainingRun run(kind(), data, model_kind(), execution(), budget, source());
  run.step(0);
  const DeviceStats before = run.device().stats();
  run.faults().arm(FaultInjector::kNever);
  const StepResult counted = run.step(1);
  const std::int64_t total = run.faults().count();
  const std::vector<std::int64_t> in_flight = run.faults().in_flight_at();
  expect_same_step(expected, counted);
  ASSERT_GT(counted.forward_operations, 0);
  ASSERT_GT(total, counted.forward_operations);
  // Kernels never see a prefetch in flight on the CPU device: a step's first upload runs after it on the same
  // stream. An allocation or a copy may fail before that.
  const bool prefetch_in_flight = reuse && source() == FaultSource::kDevice;
  if (prefetch_in_flight) {
    ASSERT_FALSE(in_flight.empty()) << "loads are prefetched while steps compute";
  }

  int failed_with_copies_in_flight = 0;
  for (const std::int64_t fail_at : failure_points(total, counted.forward_operations, in_flight)) {
    const bool in_flight_here = std::ranges::binary_search(in_flight, fail_at);
    SCOPED_TRACE(fmt::format("failing at operation {} of {} ({}{})", fail_at, total,
                             fail_at <= counted.forward_operations ? "forward" : "backward",
                             in_flight_here ? ", copies in flight" : ""));
    run.faults().arm(fail_at);
    EXPECT_THROW(run.step(1), InjectedFault);
    run.faults().disarm();
    if (in_flight_here) ++failed_with_copies_in_flight;
    run.expect_nothing_left(before);
    expect_same_step(expected, run.step(1));
  }
  if (prefetch_in_flight) {
    EXPECT_GT(failed_with_copies_in_flight, 0);
  }

  // An evaluation that fails half-way leaves nothing behind either.
  run.faults().arm(FaultInjector::kNever);
  run.evaluate();
  run.faults().arm(run.faults().count() / 2);
  EXPECT_THROW(run.evaluate(), InjectedFault);
  run.faults().disarm();
  run.expect_nothing_left(before);
  expect_same_step(expected, run.step(1));
}

INSTANTIATE_TEST_SUITE_P(Steps, ExceptionSafety,
                         ::testing::Combine(test::all_backends(), ::testing::Values(ModelKind::kGcn, ModelKind::kGat),
                                            ::testing::Values(Execution::kInMemory, Execution::kReuse,
                                                              Execution::kRecompute, Execution::kReuseUnlimited),
                                            ::testing::Values(FaultSource::kKernel, FaultSource::kDevice)),
                         [](const auto& test_info) {
                           const FaultCase& c = test_info.param;
                           return fmt::format("{}_{}_{}_{}", test::backend_name(std::get<0>(c)),
                                              to_string(std::get<1>(c)), to_string(std::get<2>(c)),
                                              to_string(std::get<3>(c)));
                         });

// Staging may be freed only once the copies from or into it are done: the CUDA device hands a freed block out
// again at once, and the copy would read what the next user writes there. The CPU device stops the process.
TEST(PageLockedStaging, FreeingItUnderACopyIsCaught) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        const std::unique_ptr<Device> device = make_cpu_device(kUnlimited);
        DeviceArray<float> rows(*device, 16, "rows");
        PinnedArray<float> staging(*device);
        upload(*device, rows.view(), staging.reserve(rows.size()));  // small: it waits in the engine's queue
      },
      "freed while a copy on the host-to-device stream still uses it");
}

}  // namespace
}  // namespace nj
