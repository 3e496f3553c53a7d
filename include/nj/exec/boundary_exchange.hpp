#pragma once
// The exchange of boundary rows between the ranks of a partitioned graph. Forward, owners send the rows of their
// vertices that other ranks mirror (what the layer aggregates: its transformed rows, or the dropped inputs of a
// first layer that sums them); backward, mirrors send their gradient rows back to the owners, which sum them. Rows
// travel packed, one message per peer and direction, through the Communicator's non-blocking exchange, so that a rank
// computes what needs no mirror while they travel. With no peers (one rank) every call is a no-op.
//
// Rows travel from host memory (the subgraph executor, whose rows live on the host) or, made with a backend,
// straight from device memory (the in-memory executor, where the communicator sends from the device: NCCL, or
// the CPU emulation of it). Both sum received gradients in the same order, so they give the same floats.
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/core/matrix.hpp"
#include "nj/device/device.hpp"
#include "nj/device/transfers.hpp"
#include "nj/graph/shard.hpp"
#include "nj/kernels/backend.hpp"

namespace nj {

// One layer's exchange in one direction, on this rank.
struct ExchangeStats {
  std::int64_t rows_sent = 0;
  std::int64_t rows_received = 0;
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
  double seconds = 0.0;       // from the start of the exchange to the end of its wait
  double wait_seconds = 0.0;  // blocked waiting for it
  ExchangeStats& operator+=(const ExchangeStats& other);
};
enum class ExchangeDirection : std::uint8_t { kForward = 0, kBackward = 1 };
// Per layer: forward and backward.
using LayerExchangeStats = std::vector<std::array<ExchangeStats, 2>>;

class BoundaryExchange {
 public:
  // `comm` may be null only when the local graph has no peers.
  BoundaryExchange(Communicator* comm, const LocalGraph& local, std::size_t layers);
  // Rows on the device: packed and unpacked by `backend`'s kernels, sent from device buffers.
  BoundaryExchange(Communicator* comm, const LocalGraph& local, std::size_t layers, Backend& backend,
                   Transfers& transfers);
  BoundaryExchange(const BoundaryExchange&) = delete;
  BoundaryExchange& operator=(const BoundaryExchange&) = delete;
  ~BoundaryExchange();

  bool has_peers() const { return !peers_.empty(); }
  // Owned rows some peer mirrors, ascending: what forward sends and what backward's sums are for.
  const std::vector<vid_t>& boundary_rows() const { return boundary_rows_; }
  vid_t num_owned() const { return num_owned_; }

  // Host rows travel packed. The mirrors are the local rows after the owned ones: mirror row m is local row
  // num_owned() + m.
  // Forward: sends the boundary rows (row i holds boundary_rows()[i]) to the peers that mirror them.
  void start_rows(std::uint32_t layer, ConstRows boundary);
  // Waits, and writes the received rows into `mirrors`.
  void finish_rows(Rows mirrors);
  // Backward: sends the mirrors' gradient rows to their owners.
  void start_gradients(std::uint32_t layer, ConstRows mirrors);
  // Waits, and writes into row i of `sums` the sum, over the peers in ascending order, of what they sent for
  // boundary_rows()[i] (zero where none did).
  void finish_gradients(Rows sums);
  // The same four steps on device rows (an exchange made with a backend).
  void start_rows(std::uint32_t layer, ConstDeviceRows boundary);
  void finish_rows(DeviceRows mirrors);
  void start_gradients(std::uint32_t layer, ConstDeviceRows mirrors);
  void finish_gradients(DeviceRows sums);
  bool on_device() const { return backend_ != nullptr; }

  // Lets an exchange in flight progress; call it between pieces of work.
  void poll();
  bool in_flight() const { return pending_ != nullptr; }

  LayerExchangeStats take_stats();

 private:
  struct Peer {
    int rank = 0;
    std::vector<vid_t> send;             // owned local ids
    std::vector<vid_t> receive;          // mirror local ids
    std::vector<std::int32_t> boundary;  // per send row: its index in boundary_rows_
    std::vector<float> outgoing;
    std::vector<float> incoming;
    // On the device: `boundary` and the receive rows' mirror indices, and the messages.
    DeviceArray<vid_t> boundary_on_device;
    DeviceArray<vid_t> mirror_on_device;
    DeviceMatrix outgoing_rows;
    DeviceMatrix incoming_rows;
  };
  void start(std::uint32_t layer, ExchangeDirection direction, std::int64_t cols);
  void wait();
  // Gathers every peer's outgoing rows from `rows` on the device and starts the exchange.
  void send_from_device(std::uint32_t layer, ExchangeDirection direction, ConstDeviceRows rows);
  // Device messages of `cols` floats per row for every peer (outgoing as `pack` fills them).
  void release_messages();
  void allocate_messages(ExchangeDirection direction, std::int64_t cols);

  Communicator* comm_;
  Backend* backend_ = nullptr;
  Transfers* transfers_ = nullptr;
  vid_t num_owned_ = 0;
  std::vector<Peer> peers_;
  std::vector<vid_t> boundary_rows_;
  std::unique_ptr<PendingExchange> pending_;
  ExchangeStats* running_ = nullptr;  // the stats of the exchange in flight
  std::chrono::steady_clock::time_point started_;
  LayerExchangeStats stats_;
};

}  // namespace nj
