#pragma once
// One step of an executor replayed on a planning device (planning_device.hpp), with kernels that do nothing and the
// rank detached from its peers: the executor's own code makes its allocations and counts its copies, so the forecast
// is what the run will measure. Both executors forecast through it.
#include <memory>
#include <tuple>
#include <utility>

#include "nj/comm/communicator.hpp"
#include "nj/device/planning_device.hpp"
#include "nj/device/transfers.hpp"
#include "nj/kernels/planning_backend.hpp"

namespace nj {

// What a replayed step copied (each way, by what it carried), and the largest copy through staging since the
// executor last released its staging (Transfers::largest_copy_bytes).
struct ReplayedCopies {
  std::pair<TrafficBytes, TrafficBytes> step;
  std::int64_t largest_copy_bytes = 0;
};
// What `transfers` counted since its last take, and its largest copy.
inline ReplayedCopies replayed_copies(Transfers& transfers) {
  return {transfers.take_traffic(), transfers.largest_copy_bytes()};
}

// `step(backend, device, comm)` makes the executor's state on them, runs one step and returns replayed_copies of the
// step alone (what the state uploads as it is made is no epoch's). `exchange_space`: where the rank's own communicator
// exchanges from, which decides what the exchange stages through the host.
template <typename Step>
MemoryForecast replay_step(const LibraryMemory& library, MemorySpace exchange_space, Step&& step) {
  PlanningDevice device(!library.memory_apart_from_host);
  const std::unique_ptr<Backend> kernels = make_planning_backend(device, library);
  const std::unique_ptr<Communicator> detached = make_detached_communicator(exchange_space);
  const ReplayedCopies copies = std::forward<Step>(step)(*kernels, device, *detached);
  MemoryForecast forecast = device.forecast();
  std::tie(forecast.h2d, forecast.d2h) = copies.step;
  forecast.largest_copy_bytes = copies.largest_copy_bytes;
  return forecast;
}

}  // namespace nj
