#include "nj/comm/gather.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace nj {
namespace {

// Messages carry floats. An id travels as two of them, its high and low 24 bits, each exact in a float's mantissa:
// ids below 2^48.
constexpr int kIdBits = 24;
constexpr gid_t kLargestId = (gid_t{1} << (2 * kIdBits)) - 1;
// Apart from the boundary exchanges' tags (2 per layer).
constexpr int kGatherTag = 30000;

std::vector<float> encode_ids(std::span<const gid_t> ids) {
  std::vector<float> encoded;
  encoded.reserve(2 * ids.size());
  for (const gid_t id : ids) {
    NJ_EXPECTS(id >= 0 && id <= kLargestId, "vertex id {} cannot be gathered (ids below 2^48)", id);
    encoded.push_back(static_cast<float>(id >> kIdBits));
    encoded.push_back(static_cast<float>(id & ((gid_t{1} << kIdBits) - 1)));
  }
  return encoded;
}

gid_t decode_id(const float* pair) { return (static_cast<gid_t>(pair[0]) << kIdBits) | static_cast<gid_t>(pair[1]); }

// Pieces arrive in the order they were posted: messages of one tag between two ranks do not overtake each other.
template <typename Buffer, typename Span>
void add_pieces(std::vector<Buffer>& buffers, int peer, Span floats, std::size_t piece) {
  for (std::size_t first = 0; first < floats.size(); first += piece) {
    buffers.push_back({peer, floats.subspan(first, std::min(piece, floats.size() - first))});
  }
}

}  // namespace

Matrix gather_rows(Communicator& comm, std::span<const gid_t> ids, ConstRows rows, std::int64_t total, int root,
                   std::size_t piece_floats) {
  NJ_EXPECTS(piece_floats > 0, "messages of no floats");
  NJ_EXPECTS(static_cast<std::int64_t>(ids.size()) == rows.rows, "{} ids for {} rows", ids.size(), rows.rows);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(comm.size()), 0);
  counts[static_cast<std::size_t>(comm.rank())] = rows.rows;
  comm.all_reduce_sum(counts);
  const std::vector<float> encoded = encode_ids(ids);
  if (comm.rank() != root) {
    if (rows.rows > 0) {
      std::vector<SendBuffer> sends;
      add_pieces(sends, root, std::span<const float>(encoded), piece_floats);
      add_pieces(sends, root, std::span<const float>(rows.data, static_cast<std::size_t>(rows.rows * rows.cols)),
                 piece_floats);
      comm.start_exchange(sends, {}, kGatherTag)->wait();
    }
    return {};
  }
  Matrix gathered(total, rows.cols);
  std::vector<std::uint8_t> seen(static_cast<std::size_t>(total), 0);
  const auto place = [&](std::span<const float> pairs, const float* values) {
    for (std::size_t i = 0; i < pairs.size() / 2; ++i) {
      const gid_t id = decode_id(&pairs[2 * i]);
      NJ_EXPECTS(id < total && seen[static_cast<std::size_t>(id)] == 0, "vertex {} gathered twice or out of range", id);
      seen[static_cast<std::size_t>(id)] = 1;
      std::memcpy(gathered.view().row(id), values + static_cast<std::int64_t>(i) * rows.cols,
                  static_cast<std::size_t>(rows.cols) * sizeof(float));
    }
  };
  place(encoded, rows.data);
  std::vector<float> peer_ids;
  std::vector<float> peer_rows;
  for (int peer = 0; peer < comm.size(); ++peer) {
    const auto count = counts[static_cast<std::size_t>(peer)];
    if (peer == root || count == 0) continue;
    peer_ids.resize(static_cast<std::size_t>(2 * count));
    peer_rows.resize(static_cast<std::size_t>(count * rows.cols));
    std::vector<ReceiveBuffer> receives;
    add_pieces(receives, peer, std::span<float>(peer_ids), piece_floats);
    add_pieces(receives, peer, std::span<float>(peer_rows), piece_floats);
    comm.start_exchange({}, receives, kGatherTag)->wait();
    place(peer_ids, peer_rows.data());
  }
  NJ_EXPECTS(std::ranges::all_of(seen, [](std::uint8_t s) { return s != 0; }), "a vertex was gathered from no rank");
  return gathered;
}

}  // namespace nj
