#pragma once
// Collective operations between ranks. Training calls only this interface: the single-process implementation
// here, MPI and NCCL ones with the multi-rank work. Sums must be deterministic for a fixed number of ranks.
#include <cstdint>
#include <memory>
#include <span>

namespace nj {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place element-wise sum over all ranks.
  virtual void all_reduce_sum(std::span<float> values) = 0;
  virtual void all_reduce_sum(std::span<double> values) = 0;
  virtual void all_reduce_sum(std::span<std::int64_t> values) = 0;
};

// One rank, no launcher: every collective is the identity.
std::unique_ptr<Communicator> make_single_process_communicator();

}  // namespace nj
