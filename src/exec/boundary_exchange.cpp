#include "nj/exec/boundary_exchange.hpp"

#include <algorithm>
#include <chrono>

#include "nj/core/stopwatch.hpp"

namespace nj {
namespace {

constexpr std::int64_t kFloat = sizeof(float);

// Packs rows `which` of `rows`, each shifted by `first`, one after another.
template <typename Index>
void pack(ConstRows rows, const std::vector<Index>& which, vid_t first, std::vector<float>& out) {
  out.resize(which.size() * static_cast<std::size_t>(rows.cols));
  for (std::size_t i = 0; i < which.size(); ++i) {
    const float* row = rows.row(which[i] - first);
    std::copy(row, row + rows.cols, out.data() + i * static_cast<std::size_t>(rows.cols));
  }
}

}  // namespace

ExchangeStats& ExchangeStats::operator+=(const ExchangeStats& other) {
  rows_sent += other.rows_sent;
  rows_received += other.rows_received;
  bytes_sent += other.bytes_sent;
  bytes_received += other.bytes_received;
  seconds += other.seconds;
  wait_seconds += other.wait_seconds;
  return *this;
}

BoundaryExchange::BoundaryExchange(Communicator* comm, const LocalGraph& local, std::size_t layers)
    : comm_(comm), num_owned_(local.num_owned), boundary_rows_(local.boundary_rows()), stats_(layers) {
  NJ_EXPECTS(comm != nullptr || local.peers.empty(), "a partitioned graph needs a communicator");
  for (const PeerRows& p : local.peers) {
    Peer& peer = peers_.emplace_back();
    peer.rank = p.peer;
    peer.send = p.send;
    peer.receive = p.receive;
    for (const vid_t v : p.send) {
      peer.boundary.push_back(static_cast<std::int32_t>(
          std::lower_bound(boundary_rows_.begin(), boundary_rows_.end(), v) - boundary_rows_.begin()));
    }
  }
}

BoundaryExchange::BoundaryExchange(Communicator* comm, const LocalGraph& local, std::size_t layers, Backend& backend,
                                   Transfers& transfers)
    : BoundaryExchange(comm, local, layers) {
  backend_ = &backend;
  transfers_ = &transfers;
  for (Peer& p : peers_) {
    std::vector<vid_t> boundary(p.boundary.begin(), p.boundary.end());
    std::vector<vid_t> mirrors(p.receive.size());
    for (std::size_t i = 0; i < mirrors.size(); ++i) mirrors[i] = p.receive[i] - num_owned_;
    p.boundary_on_device = to_device<vid_t>(transfers, boundary, "index: exchange boundary rows");
    p.mirror_on_device = to_device<vid_t>(transfers, mirrors, "index: exchange mirror rows");
  }
}

BoundaryExchange::~BoundaryExchange() = default;

void BoundaryExchange::allocate_messages(ExchangeDirection direction, std::int64_t cols) {
  for (Peer& p : peers_) {
    const auto boundary_rows = static_cast<std::int64_t>(p.send.size());
    const auto mirror_rows = static_cast<std::int64_t>(p.receive.size());
    const bool forward = direction == ExchangeDirection::kForward;
    p.outgoing_rows =
        DeviceMatrix(transfers_->device(), forward ? boundary_rows : mirror_rows, cols, "rows: exchange messages");
    p.incoming_rows =
        DeviceMatrix(transfers_->device(), forward ? mirror_rows : boundary_rows, cols, "rows: exchange messages");
  }
}

void BoundaryExchange::start(std::uint32_t layer, ExchangeDirection direction, std::int64_t cols) {
  NJ_EXPECTS(pending_ == nullptr, "an exchange is already in flight");
  if (peers_.empty()) return;  // one rank: nothing travels, and nothing is counted
  std::vector<SendBuffer> sends;
  std::vector<ReceiveBuffer> receives;
  running_ = &stats_.at(layer)[static_cast<std::size_t>(direction)];
  for (Peer& p : peers_) {
    const std::size_t incoming_rows = direction == ExchangeDirection::kForward ? p.receive.size() : p.send.size();
    std::span<const float> outgoing = p.outgoing;
    std::span<float> incoming;
    if (on_device()) {
      outgoing = {p.outgoing_rows.view().data, static_cast<std::size_t>(p.outgoing_rows.view().size())};
      incoming = {p.incoming_rows.view().data, static_cast<std::size_t>(p.incoming_rows.view().size())};
    } else {
      p.incoming.resize(incoming_rows * static_cast<std::size_t>(cols));
      incoming = p.incoming;
    }
    const MemorySpace space = on_device() ? MemorySpace::kDevice : MemorySpace::kHost;
    if (!outgoing.empty()) sends.push_back({p.rank, outgoing, space});
    if (!incoming.empty()) receives.push_back({p.rank, incoming, space});
    running_->rows_sent += static_cast<std::int64_t>(outgoing.size()) / cols;
    running_->rows_received += static_cast<std::int64_t>(incoming_rows);
    running_->bytes_sent += static_cast<std::int64_t>(outgoing.size()) * kFloat;
    running_->bytes_received += static_cast<std::int64_t>(incoming.size()) * kFloat;
  }
  started_ = std::chrono::steady_clock::now();
  if (comm_ != nullptr) {
    const int tag = static_cast<int>(2 * layer + static_cast<std::uint32_t>(direction));
    pending_ = comm_->start_exchange(sends, receives, tag);
  }
}

void BoundaryExchange::wait() {
  if (pending_ != nullptr) {
    const auto start = std::chrono::steady_clock::now();
    pending_->wait();
    running_->wait_seconds += seconds_since(start);
    pending_.reset();
  }
  if (running_ != nullptr) running_->seconds += seconds_since(started_);
  running_ = nullptr;
}

void BoundaryExchange::poll() {
  if (pending_ != nullptr) pending_->test();
}

void BoundaryExchange::start_rows(std::uint32_t layer, ConstRows boundary) {
  NJ_EXPECTS(boundary.rows == static_cast<std::int64_t>(boundary_rows_.size()), "{} rows for {} boundary rows",
             boundary.rows, boundary_rows_.size());
  for (Peer& p : peers_) pack(boundary, p.boundary, 0, p.outgoing);
  start(layer, ExchangeDirection::kForward, boundary.cols);
}

void BoundaryExchange::finish_rows(Rows mirrors) {
  wait();
  for (const Peer& p : peers_) {
    for (std::size_t i = 0; i < p.receive.size(); ++i) {
      const float* row = p.incoming.data() + i * static_cast<std::size_t>(mirrors.cols);
      std::copy(row, row + mirrors.cols, mirrors.row(p.receive[i] - num_owned_));
    }
  }
}

void BoundaryExchange::start_gradients(std::uint32_t layer, ConstRows mirrors) {
  for (Peer& p : peers_) pack(mirrors, p.receive, num_owned_, p.outgoing);
  start(layer, ExchangeDirection::kBackward, mirrors.cols);
}

void BoundaryExchange::finish_gradients(Rows sums) {
  wait();
  NJ_EXPECTS(sums.rows == static_cast<std::int64_t>(boundary_rows_.size()), "{} sums for {} boundary rows", sums.rows,
             boundary_rows_.size());
  std::fill(sums.data, sums.data + sums.size(), 0.0F);
  for (const Peer& p : peers_) {  // ascending peer: the same order of additions on every run
    for (std::size_t i = 0; i < p.send.size(); ++i) {
      const float* in = p.incoming.data() + i * static_cast<std::size_t>(sums.cols);
      float* sum = sums.row(p.boundary[i]);
      for (std::int64_t c = 0; c < sums.cols; ++c) sum[c] += in[c];
    }
  }
}

void BoundaryExchange::send_from_device(std::uint32_t layer, ExchangeDirection direction, ConstDeviceRows rows) {
  if (peers_.empty()) return;
  allocate_messages(direction, rows.cols);
  const bool forward = direction == ExchangeDirection::kForward;
  for (Peer& p : peers_) {
    // Forward each peer gets the boundary rows it mirrors; backward the gradients of the mirrors it owns.
    const DeviceArray<vid_t>& which = forward ? p.boundary_on_device : p.mirror_on_device;
    backend_->copy_rows(rows, which.view(), p.outgoing_rows.view(), {}, p.outgoing_rows.rows());
  }
  start(layer, direction, rows.cols);
}

void BoundaryExchange::start_rows(std::uint32_t layer, ConstDeviceRows boundary) {
  NJ_EXPECTS(on_device() && boundary.rows == static_cast<std::int64_t>(boundary_rows_.size()),
             "{} device rows for {} boundary rows", boundary.rows, boundary_rows_.size());
  send_from_device(layer, ExchangeDirection::kForward, boundary);
}

void BoundaryExchange::finish_rows(DeviceRows mirrors) {
  NJ_EXPECTS(on_device(), "device rows for a host exchange");
  wait();
  for (Peer& p : peers_) {
    backend_->copy_rows(p.incoming_rows.view(), {}, mirrors, p.mirror_on_device.view(), p.incoming_rows.rows());
  }
  release_messages();
}

// The messages of a finished exchange go at once: what the device holds between exchanges is then the same in every
// epoch (and in a replay of one), not whatever the last exchange left.
void BoundaryExchange::release_messages() {
  for (Peer& p : peers_) {
    p.outgoing_rows = {};
    p.incoming_rows = {};
  }
}

void BoundaryExchange::start_gradients(std::uint32_t layer, ConstDeviceRows mirrors) {
  NJ_EXPECTS(on_device(), "device rows for a host exchange");
  send_from_device(layer, ExchangeDirection::kBackward, mirrors);
}

void BoundaryExchange::finish_gradients(DeviceRows sums) {
  NJ_EXPECTS(on_device() && sums.rows == static_cast<std::int64_t>(boundary_rows_.size()),
             "{} device sums for {} boundary rows", sums.rows, boundary_rows_.size());
  wait();
  backend_->zero_rows(sums, {}, sums.rows);
  for (Peer& p : peers_) {  // ascending peer, as the host path adds
    backend_->add_rows(p.incoming_rows.view(), {}, sums, p.boundary_on_device.view(), p.incoming_rows.rows());
  }
  release_messages();
}

LayerExchangeStats BoundaryExchange::take_stats() {
  LayerExchangeStats taken(stats_.size());
  std::swap(taken, stats_);
  return taken;
}

}  // namespace nj
