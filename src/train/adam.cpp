#include "nj/train/adam.hpp"

#include <cmath>

namespace nj {

Adam::Adam(std::vector<Parameter*> parameters, const AdamConfig& config)
    : parameters_(std::move(parameters)), config_(config) {
  for (const Parameter* p : parameters_) {
    m_.emplace_back(p->value.rows(), p->value.cols());
    v_.emplace_back(p->value.rows(), p->value.cols());
  }
}

void Adam::zero_grad() {
  for (Parameter* p : parameters_) p->grad.fill(0.0F);
}

void Adam::step() {
  ++steps_;
  const double correction1 = 1.0 - std::pow(static_cast<double>(config_.beta1), static_cast<double>(steps_));
  const double correction2 = 1.0 - std::pow(static_cast<double>(config_.beta2), static_cast<double>(steps_));
  const auto step_size = static_cast<float>(config_.lr / correction1);
  const auto sqrt_correction2 = static_cast<float>(std::sqrt(correction2));
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Parameter& p = *parameters_[i];
    const float decay = p.decay ? config_.weight_decay : 0.0F;
    float* m = m_[i].data();
    float* v = v_[i].data();
    float* value = p.value.data();
    const float* grad = p.grad.data();
    for (std::int64_t k = 0; k < p.value.size(); ++k) {
      const float g = grad[k] + decay * value[k];
      m[k] = config_.beta1 * m[k] + (1.0F - config_.beta1) * g;
      v[k] = config_.beta2 * v[k] + (1.0F - config_.beta2) * g * g;
      value[k] -= step_size * m[k] / (std::sqrt(v[k]) / sqrt_correction2 + config_.eps);
    }
  }
}

}  // namespace nj
