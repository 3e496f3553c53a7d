#include "support/training_reference.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace nj::test {
namespace {

const std::string kFixture = std::string(NJ_SOURCE_DIR) + "/tests/fixtures/training_reference.h5";

Matrix read_matrix(const hdf5::File& file, const std::string& name) {
  const hdf5::Array<float> array = file.read<float>(name);
  EXPECT_EQ(array.shape.size(), 2U) << name;
  Matrix m(static_cast<std::int64_t>(array.shape[0]), static_cast<std::int64_t>(array.shape[1]));
  std::copy(array.values.begin(), array.values.end(), m.data());
  return m;
}

Dataset read_dataset(const hdf5::File& file) {
  Dataset data;
  data.name = "training reference";
  data.features = read_matrix(file, "features");
  const auto n = static_cast<vid_t>(data.features.rows());
  const std::vector<vid_t> src = hdf5::read_vector<vid_t>(file, "graph/src", -1);
  const std::vector<vid_t> dst = hdf5::read_vector<vid_t>(file, "graph/dst", -1);
  data.graph = build_csr(n, src, dst);
  data.labels = hdf5::read_vector<std::int32_t>(file, "labels", n);
  data.num_classes = static_cast<std::int32_t>(file.int_attribute("classes"));
  data.train_mask = hdf5::read_vector<std::uint8_t>(file, "train_mask", n);
  data.val_mask.assign(static_cast<std::size_t>(n), 0);
  data.test_mask.assign(static_cast<std::size_t>(n), 0);
  return data;
}

void expect_matrix(const Matrix& actual, const Matrix& expected, const std::string& what) {
  ASSERT_EQ(actual.rows(), expected.rows()) << what;
  ASSERT_EQ(actual.cols(), expected.cols()) << what;
  for (std::int64_t k = 0; k < expected.size(); ++k) {
    const float e = expected.data()[k];
    EXPECT_NEAR(actual.data()[k], e, 1e-5F * std::max(1.0F, std::abs(e))) << what << " element " << k;
  }
}

}  // namespace

const char* decay_scope_name(WeightDecayScope scope) { return scope == WeightDecayScope::kAll ? "all" : "first"; }

TrainingReference::TrainingReference(ModelKind kind, WeightDecayScope scope, bool gin_train_eps)
    : file_(hdf5::File::open_read(kFixture)),
      kind_(kind),
      scope_(scope),
      gin_train_eps_(gin_train_eps),
      group_(fmt::format("{}{}/{}/", to_string(kind), gin_train_eps ? "-train-eps" : "", decay_scope_name(scope))),
      data_(read_dataset(file_)),
      losses_(hdf5::read_vector<double>(file_, group_ + "losses", file_.int_attribute("steps"))) {}

ModelConfig TrainingReference::model_config() const {
  ModelConfig config;
  config.kind = kind_;
  config.layers = 2;
  config.hidden = static_cast<int>(file_.int_attribute("hidden"));
  config.heads = static_cast<int>(file_.int_attribute("heads"));
  config.output_heads = static_cast<int>(file_.int_attribute("output_heads"));
  config.activation = default_activation(kind_);
  config.gin_eps = static_cast<float>(file_.float_attribute("gin_eps"));
  config.gin_train_eps = gin_train_eps_;
  config.propagation_steps = static_cast<int>(file_.int_attribute("propagation_steps"));
  config.teleport = static_cast<float>(file_.float_attribute("teleport"));
  config.dropout = 0.0F;
  config.attention_dropout = 0.0F;
  return config;
}

TrainOptions TrainingReference::train_options() const {
  TrainOptions options;
  options.epochs = static_cast<std::uint32_t>(losses_.size());
  options.eval_every = 0;
  options.adam.lr = static_cast<float>(file_.float_attribute("lr"));
  options.adam.eps = static_cast<float>(file_.float_attribute("eps"));
  options.adam.weight_decay = static_cast<float>(file_.float_attribute("weight_decay"));
  options.decay_scope = scope_;
  return options;
}

void TrainingReference::load_initial_weights(Model& model) const {
  for (Parameter* p : model.parameters()) {
    const Matrix initial = read_matrix(file_, group_ + "initial/" + p->name);
    ASSERT_EQ(initial.rows(), p->value.rows()) << p->name;
    ASSERT_EQ(initial.cols(), p->value.cols()) << p->name;
    p->value = initial;
  }
}

void TrainingReference::expect_step(const EpochMetrics& metrics, Model& model) const {
  SCOPED_TRACE(fmt::format("step {}", metrics.epoch));
  ASSERT_LT(metrics.epoch, losses_.size());
  const double loss = losses_[metrics.epoch];
  EXPECT_NEAR(metrics.loss, loss, 1e-5 * loss);
  const std::string step = fmt::format("{}step{}/", group_, metrics.epoch);
  for (const Parameter* p : model.parameters()) {
    expect_matrix(p->grad, read_matrix(file_, step + "gradient/" + p->name), p->name + " gradient");
    expect_matrix(p->value, read_matrix(file_, step + "after/" + p->name), p->name + " after Adam");
  }
}

}  // namespace nj::test
