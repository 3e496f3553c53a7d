#pragma once
// The device side of a cache plan (cache_plan.hpp): per phase, one pool of fixed slots per trace tensor; rows
// move between their slots and their host homes packed, through Transfers, and the device gathers them from
// and scatters them into the slots. The subgraph executor's steps read and write the pools by slot.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "nj/device/transfers.hpp"
#include "nj/kernels/backend.hpp"
#include "nj/scheduler/cache_plan.hpp"

namespace nj {

// Slots of a pool, on the device for a kernel to gather or scatter by.
DeviceArray<vid_t> slots_on_device(Transfers& transfers, std::span<const vid_t> slots);

class CachePools {
 public:
  // `home(tensor)`: the host rows of a trace tensor. One packed transfer stages at most `staging_limit_bytes`
  // of rows and slots. Time the host waits for copies is added to `wait_seconds`.
  CachePools(Backend& backend, Transfers& transfers, std::size_t tensors, std::int64_t staging_limit_bytes,
             std::function<Rows(std::uint32_t)> home, double& wait_seconds);

  // Allocates the phase's pools, as the trace sizes them.
  void begin_phase(const AccessTrace& trace, std::uint32_t phase);
  // Writes back the phase end's dirty rows and frees the pools.
  void end_phase(std::span<const SlotAssignment> writeback);
  // Frees the pools without writing anything back (a step that failed part-way).
  void release();
  DeviceRows pool(std::uint32_t tensor) { return pools_[tensor].view(); }

  // Dirty rows leave their slots for their homes: gathered on the device, copied, scattered on the host.
  void write_back(std::span<const SlotAssignment> rows);
  // The rows in `slots` of a tensor's pool into host rows `rows` of its home, in one packed copy.
  void copy_to_home(std::uint32_t tensor, std::span<const vid_t> slots, std::span<const vid_t> rows);
  // Loads in flight: host rows gathered into page-locked staging and copied into device staging, one copy per
  // tensor; finishing them (after the copies, on the compute stream) scatters the rows into their slots.
  struct PendingLoads {
    struct Group {
      std::uint32_t tensor = 0;
      std::vector<vid_t> slots;
      PinnedArray<std::byte> host;  // before `packed`: freed after it, whose free waits for the copy
      DeviceMatrix packed;
    };
    std::vector<Group> groups;
    Event copied;
  };
  PendingLoads issue_loads(std::span<const SlotAssignment> rows);
  void finish_loads(PendingLoads& pending);
  // Zeroes the slots of accumulators touched for the first time.
  void zero(std::span<const SlotAssignment> rows);

 private:
  Backend& backend_;
  Transfers& transfers_;
  std::int64_t staging_limit_bytes_;
  std::function<Rows(std::uint32_t)> home_;
  double& wait_seconds_;
  std::vector<DeviceMatrix> pools_;  // per trace tensor, during its phase
};

}  // namespace nj
