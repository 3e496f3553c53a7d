#pragma once
// Which communicator a rank trains with, from its device and the job: the device communicator over NCCL on a
// GPU of its own, over the job's own communicator on the CPU device, or the job's alone.
#include <memory>

#include "nj/comm/communicator.hpp"
#include "nj/runtime/resources.hpp"

namespace nj {

// How many ranks of the job compute on this rank's card (DeviceChoice::ranks_per_gpu), from every rank's GPU
// UUID gathered over `job`: a collective of every rank. 1 on the CPU.
int count_ranks_sharing_gpu(Communicator& job, const DeviceChoice& choice);

// The communicator a rank trains with on its resources, over the job's `job`: where the job has peers, a device
// communicator over NCCL (a CUDA device of its own) or over the host-memory transport (the CPU device); null
// where `job` serves alone: one rank, or ranks sharing a GPU, which NCCL refuses. Every rank calls it at the
// same point (it connects).
std::unique_ptr<Communicator> make_rank_communicator(Communicator& job, Resources& resources);

}  // namespace nj
