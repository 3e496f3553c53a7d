#pragma once
// Adam with L2 weight decay added to the gradient, as torch.optim.Adam(weight_decay=...) does.
#include <cstdint>
#include <vector>

#include "nj/model/layer.hpp"

namespace nj {

struct AdamConfig {
  float lr = 0.01F;
  float beta1 = 0.9F;
  float beta2 = 0.999F;
  float eps = 1e-8F;
  float weight_decay = 0.0F;  // applied to parameters whose `decay` flag is set
};

class Adam {
 public:
  Adam(std::vector<Parameter*> parameters, const AdamConfig& config);
  void zero_grad();
  void step();

  std::int64_t steps() const { return steps_; }
  // The moment estimates, for checkpoints: first and second moment of each parameter, in parameter order.
  std::vector<Matrix>& first_moments() { return m_; }
  std::vector<Matrix>& second_moments() { return v_; }
  const std::vector<Matrix>& first_moments() const { return m_; }
  const std::vector<Matrix>& second_moments() const { return v_; }
  void set_steps(std::int64_t steps) { steps_ = steps; }
  const std::vector<Parameter*>& parameters() const { return parameters_; }

 private:
  std::vector<Parameter*> parameters_;
  AdamConfig config_;
  std::vector<Matrix> m_;
  std::vector<Matrix> v_;
  std::int64_t steps_ = 0;
};

}  // namespace nj
