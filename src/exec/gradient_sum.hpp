#pragma once
// The step's end that both executors share: the parameters' gradients summed over the ranks and added into the host
// ones. The sum is the executor's, not the model's: the model knows no ranks.
#include "nj/comm/communicator.hpp"
#include "nj/model/device_parameters.hpp"
#include "nj/model/model.hpp"

namespace nj {

// After a step's backward: sums the device gradients over the ranks of `comm` (null: one rank) in one call, on the
// device where the communicator takes device memory, else on the host once downloaded, and adds them into the host
// gradients (DeviceParameters::finish_step).
void sum_gradients_and_finish_step(DeviceParameters& parameters, Model& model, Communicator* comm);

}  // namespace nj
