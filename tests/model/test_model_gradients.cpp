// End-to-end gradients: the executor's backward through whole models (dropout and attention dropout on)
// against central finite differences of the loss, for every parameter.
#include <gtest/gtest.h>

#include "nj/exec/executor.hpp"
#include "nj/train/loss.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

struct GradientCase {
  const char* name;
  ModelConfig config;
};

class ModelGradientTest : public ::testing::TestWithParam<GradientCase> {};

TEST_P(ModelGradientTest, BackwardMatchesFiniteDifferences) {
  const Dataset data = test::random_dataset(24, 60, 5, 3, 21);
  Resources resources = make_cpu_resources(kUnlimited, 2);
  Model model(GetParam().config, data.features.cols(), data.num_classes);
  InMemoryExecutor executor(resources, model, whole_local_graph(data.graph), data.features.view());
  const auto train_count = static_cast<float>(count(data.train_mask));
  const std::uint32_t epoch = 5;
  const LossFunction loss_function = [&](ConstRows logits, const vid_t* vertices, Rows grad) {
    EXPECT_EQ(vertices, nullptr);
    return masked_softmax_cross_entropy(logits, data.labels.data(), data.train_mask.data(), 1.0F / train_count, grad);
  };
  auto loss = [&] { return executor.train_step(model, epoch, loss_function) / train_count; };
  for (Parameter* p : model.parameters()) p->grad.fill(0.0F);
  loss();
  std::vector<Matrix> analytic;
  for (const Parameter* p : model.parameters()) analytic.push_back(p->grad);

  test::expect_gradients_match_finite_differences(model, analytic, loss);
}

ModelConfig gcn(int layers) {
  ModelConfig c;
  c.kind = ModelKind::kGcn;
  c.layers = layers;
  c.hidden = 4;
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

INSTANTIATE_TEST_SUITE_P(Models, ModelGradientTest,
                         ::testing::Values(GradientCase{"gcn2", gcn(2)}, GradientCase{"gcn3", gcn(3)},
                                           GradientCase{"gat2", gat(2, 1)},
                                           GradientCase{"gat2_two_output_heads", gat(2, 2)},
                                           GradientCase{"gat3", gat(3, 1)}),
                         [](const auto& test_info) { return std::string(test_info.param.name); });

}  // namespace
}  // namespace nj
