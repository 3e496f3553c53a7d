#include "gradient_sum.hpp"

#include <span>

#include "nj/core/error.hpp"

namespace nj {

void sum_gradients_and_finish_step(DeviceParameters& parameters, Model& model, Communicator* comm) {
  NJ_EXPECTS(parameters.gradients().size > 0, "parameters made without gradients take no training step");
  const bool with_peers = comm != nullptr && comm->size() > 1;
  const bool on_device = with_peers && comm->exchange_space() == MemorySpace::kDevice;
  if (on_device) comm->all_reduce_sum_on_device(parameters.gradients());
  parameters.finish_step(model, [&](std::span<float> gradients) {
    if (with_peers && !on_device) comm->all_reduce_sum(gradients);
  });
}

}  // namespace nj
