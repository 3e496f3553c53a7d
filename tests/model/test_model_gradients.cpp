// End-to-end gradients: the executor's backward through whole models (dropout and attention dropout on)
// against central finite differences of the loss, for every parameter, on every backend; and the CUDA
// backend's gradients against the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "nj/exec/executor.hpp"
#include "nj/io/plain_text.hpp"
#include "nj/train/loss.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

struct GradientCase {
  const char* name;
  ModelConfig config;
};

// One training step of a model on a backend: its loss, with the parameters' gradients left in the model.
class OneStep {
 public:
  OneStep(DeviceKind kind, const ModelConfig& config, const Dataset& data)
      : data_(data),
        resources_(test::backend_resources(kind, kUnlimited, 2)),
        model_(config, data.features.cols(), data.num_classes),
        executor_(resources_, model_, whole_local_graph(data.graph), data.features.view()),
        train_count_(static_cast<float>(count(data.train_mask))) {}
  double loss() {
    const LossFunction loss_function = [&](ConstRows logits, const vid_t* vertices, Rows grad) {
      EXPECT_EQ(vertices, nullptr);
      return masked_softmax_cross_entropy(logits, data_.labels.data(), data_.train_mask.data(), 1.0F / train_count_,
                                          grad);
    };
    for (Parameter* p : model_.parameters()) p->grad.fill(0.0F);
    return executor_.train_step(model_, kEpoch, loss_function) / train_count_;
  }
  std::vector<Matrix> gradients() {
    std::vector<Matrix> grads;
    for (const Parameter* p : model_.parameters()) grads.push_back(p->grad);
    return grads;
  }
  Model& model() { return model_; }

 private:
  static constexpr std::uint32_t kEpoch = 5;
  const Dataset& data_;
  Resources resources_;
  Model model_;
  InMemoryExecutor executor_;
  float train_count_;
};

class ModelGradientTest : public ::testing::TestWithParam<std::tuple<DeviceKind, GradientCase>> {};

TEST_P(ModelGradientTest, BackwardMatchesFiniteDifferences) {
  const auto& [kind, gradient_case] = GetParam();
  NJ_SKIP_WITHOUT_BACKEND(kind);
  const Dataset data = test::random_dataset(24, 60, 5, 3, 21);
  OneStep step(kind, gradient_case.config, data);
  step.loss();
  const std::vector<Matrix> analytic = step.gradients();
  test::expect_gradients_match_finite_differences(step.model(), analytic, [&] { return step.loss(); });
  test::expect_directional_derivative(step.model(), analytic, [&] { return step.loss(); });
}

// The same step on the GPU and on the CPU: the loss and every gradient agree to 1e-4, relative to the
// gradient's largest element (the sums run in other orders).
void expect_cuda_step_equals_the_cpus(const Dataset& data, const ModelConfig& config) {
  OneStep cpu(DeviceKind::kCpu, config, data);
  OneStep cuda(DeviceKind::kCuda, config, data);
  EXPECT_NEAR(cuda.loss(), cpu.loss(), 1e-4 * std::abs(cpu.loss()));
  const std::vector<Matrix> expected = cpu.gradients();
  const std::vector<Matrix> actual = cuda.gradients();
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    float scale = 1e-12F;
    for (const float g : expected[i].span()) scale = std::max(scale, std::abs(g));
    for (std::int64_t k = 0; k < expected[i].size(); ++k) {
      ASSERT_NEAR(actual[i].data()[k], expected[i].data()[k], 1e-4F * scale) << "parameter " << i << ", element " << k;
    }
  }
}

class CrossBackendGradientTest : public ::testing::TestWithParam<GradientCase> {};

TEST_P(CrossBackendGradientTest, CudaGradientsEqualTheCpusOnAGeneratedGraph) {
  NJ_SKIP_WITHOUT_BACKEND(DeviceKind::kCuda);
  expect_cuda_step_equals_the_cpus(test::random_dataset(300, 2000, 16, 4, 22), GetParam().config);
}

TEST_P(CrossBackendGradientTest, CudaGradientsEqualTheCpusOnCora) {
  NJ_SKIP_WITHOUT_BACKEND(DeviceKind::kCuda);
  NJ_SKIP_WITHOUT_DATA();
  Dataset cora = read_plain_folder((test::data_dir() / "cora").string(), ConvertOptions{});
  row_normalize(cora.features);
  expect_cuda_step_equals_the_cpus(cora, GetParam().config);
}

ModelConfig gcn(int layers, int hidden = 4) {
  ModelConfig c;
  c.kind = ModelKind::kGcn;
  c.layers = layers;
  c.hidden = hidden;
  c.activation = Activation::kElu;  // smooth, so finite differences see no kinks
  c.dropout = 0.3F;
  c.seed = 3;
  return c;
}

ModelConfig gat(int layers, int output_heads) {
  ModelConfig c;
  c.kind = ModelKind::kGat;
  c.layers = layers;
  c.hidden = 3;
  c.heads = 2;
  c.output_heads = output_heads;
  c.activation = Activation::kElu;
  c.dropout = 0.2F;
  c.attention_dropout = 0.3F;
  c.seed = 6;  // a seed whose perturbations cross no LeakyReLU kink (finite differences are invalid there)
  return c;
}

// GraphSAGE, GIN and APPNP with ELU between layers (GIN's MLP keeps its ReLU, whose kink no perturbation here
// crosses: the check would fail by far more than its tolerance where one did).
ModelConfig other_model(ModelKind kind, int layers) {
  ModelConfig c = gcn(layers, 3);
  c.kind = kind;
  c.gin_eps = 0.3F;
  c.propagation_steps = 3;
  c.teleport = 0.2F;
  return c;
}

ModelConfig gin_train_eps(int layers) {
  ModelConfig c = other_model(ModelKind::kGin, layers);
  c.gin_train_eps = true;
  return c;
}

// GCN's first layer sums its inputs before it transforms them where they are narrower than twice its hidden width
// (aggregates_before_transform): on the finite-difference dataset (5 features) at hidden 4, not at hidden 2; on
// the generated graph (16 features) at hidden 16 only; on Cora (1433) never.
auto gradient_cases() {
  return ::testing::Values(
      GradientCase{"gcn2", gcn(2)}, GradientCase{"gcn3", gcn(3)}, GradientCase{"gcn2_transform_first", gcn(2, 2)},
      GradientCase{"gcn2_hidden16", gcn(2, 16)}, GradientCase{"gat2", gat(2, 1)},
      GradientCase{"gat2_two_output_heads", gat(2, 2)}, GradientCase{"gat3", gat(3, 1)},
      GradientCase{"sage2", other_model(ModelKind::kSage, 2)}, GradientCase{"sage3", other_model(ModelKind::kSage, 3)},
      GradientCase{"gin2", other_model(ModelKind::kGin, 2)}, GradientCase{"gin2_train_eps", gin_train_eps(2)},
      GradientCase{"appnp2", other_model(ModelKind::kAppnp, 2)});
}

// GIN's first layer (hidden 3 on 5 features) sums first while ε is fixed; with ε learnt its sum reads two halves
// of its rows and is not linear. SAGE sums [mean X | X] first where its inputs are narrower than two of its outputs.
TEST(LayerOrder, AFirstLayerSumsItsInputsWhereItCanAndTheyAreNarrowerThanTwoOfTheRowsItWouldSum) {
  const Model narrow(gcn(2), 5, 3);
  EXPECT_TRUE(aggregates_before_transform(narrow.layer(0), 0, false));
  EXPECT_FALSE(aggregates_before_transform(narrow.layer(0), 0, true));  // sparse inputs: an SpMM, then the sum
  EXPECT_FALSE(aggregates_before_transform(narrow.layer(1), 1, false));  // its input needs a gradient
  const Model wide(gcn(2, 2), 5, 3);
  EXPECT_FALSE(aggregates_before_transform(wide.layer(0), 0, false));
  const Model attention(gat(2, 1), 5, 3);
  EXPECT_FALSE(aggregates_before_transform(attention.layer(0), 0, false));
  const Model gin(other_model(ModelKind::kGin, 2), 5, 3);
  EXPECT_TRUE(aggregates_before_transform(gin.layer(0), 0, false));
  const Model gin_learnt(gin_train_eps(2), 5, 3);
  EXPECT_FALSE(aggregates_before_transform(gin_learnt.layer(0), 0, false));
  const Model sage(other_model(ModelKind::kSage, 2), 5, 3);
  EXPECT_TRUE(aggregates_before_transform(sage.layer(0), 0, false));
  ModelConfig wide_sage = other_model(ModelKind::kSage, 2);
  wide_sage.hidden = 2;
  EXPECT_FALSE(aggregates_before_transform(Model(wide_sage, 5, 3).layer(0), 0, false));
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGradientTest, ::testing::Combine(test::all_backends(), gradient_cases()),
                         [](const auto& test_info) {
                           return test::backend_name(std::get<0>(test_info.param)) + "_" +
                                  std::get<1>(test_info.param).name;
                         });
INSTANTIATE_TEST_SUITE_P(Models, CrossBackendGradientTest, gradient_cases(),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

}  // namespace
}  // namespace nj
