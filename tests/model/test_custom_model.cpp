// A model of the caller's own layers: it trains as the built-in model of the same layers does, and a stack whose
// layers do not fit together, or do not read the graph the model prepares, is refused with a one-line reason.
#include <gtest/gtest.h>

#include "nj/core/error.hpp"
#include "nj/exec/executor.hpp"
#include "nj/model/layers.hpp"
#include "nj/model/model.hpp"
#include "nj/train/loss.hpp"
#include "support/backends.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

std::vector<ModelLayer> sage_layers(std::int64_t in_dim, std::int64_t hidden, std::int64_t classes) {
  std::vector<ModelLayer> layers;
  layers.push_back({std::make_unique<SageLayer>(in_dim, hidden, 3, 0), 0.3F, Activation::kRelu});
  layers.push_back({std::make_unique<SageLayer>(hidden, classes, 3, 1), 0.3F, Activation::kNone});
  return layers;
}

// The loss of one training step, with the gradients left in the model.
double step(Model& model, const Dataset& data) {
  Resources resources = test::backend_resources(DeviceKind::kCpu, kUnlimited, 2);
  InMemoryExecutor executor(resources, model, whole_local_graph(data.graph), data.features.view());
  const auto count = static_cast<float>(std::count(data.train_mask.begin(), data.train_mask.end(), 1));
  const LossFunction loss = [&](ConstRows logits, const vid_t* /*vertices*/, Rows grad) {
    return masked_softmax_cross_entropy(logits, data.labels.data(), data.train_mask.data(), 1.0F / count, grad);
  };
  return executor.train_step(model, 4, loss);
}

TEST(CustomModel, TrainsAsTheBuiltInModelOfTheSameLayers) {
  const Dataset data = test::random_dataset(60, 240, 5, 3, 4);
  ModelConfig config;
  config.kind = ModelKind::kSage;
  config.hidden = 4;
  config.dropout = 0.3F;
  config.seed = 3;
  Model built_in(config, data.features.cols(), data.num_classes);
  Model custom(sage_layers(data.features.cols(), 4, data.num_classes), GraphForm::kMeanOverInEdges, 3);
  EXPECT_EQ(custom.config().kind, ModelKind::kCustom);
  EXPECT_EQ(describe_model(custom.config()), "custom, 2 layers, seed 3");
  EXPECT_EQ(step(custom, data), step(built_in, data));
  const auto a = built_in.parameters();
  const auto b = custom.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t p = 0; p < a.size(); ++p) {
    EXPECT_EQ(a[p]->name, b[p]->name);
    EXPECT_EQ(a[p]->grad.span().size(), b[p]->grad.span().size());
    for (std::int64_t k = 0; k < a[p]->grad.size(); ++k) EXPECT_EQ(a[p]->grad.data()[k], b[p]->grad.data()[k]);
  }
}

TEST(CustomModel, RefusesLayersThatDoNotFitTogetherOrTheGraph) {
  std::vector<ModelLayer> mismatched;
  mismatched.push_back({std::make_unique<DenseLayer>(5, 4, 0, 0)});
  mismatched.push_back({std::make_unique<DenseLayer>(6, 3, 0, 1)});
  EXPECT_THROW(
      {
        try {
          Model(std::move(mismatched), GraphForm::kAsStored, 0);
        } catch (const InputError& e) {
          EXPECT_STREQ(e.what(), "layer 2 reads rows of width 6, but layer 1 writes 4");
          throw;
        }
      },
      InputError);
  // SAGE's mean needs the weights its graph form gives; a graph as stored has none.
  EXPECT_THROW(Model(sage_layers(5, 4, 3), GraphForm::kAsStored, 0), InputError);
  EXPECT_THROW(Model(std::vector<ModelLayer>{}, GraphForm::kAsStored, 0), InputError);
  ModelConfig custom;
  custom.kind = ModelKind::kCustom;
  EXPECT_THROW(Model(custom, 5, 3), InputError);
}

}  // namespace
}  // namespace nj
