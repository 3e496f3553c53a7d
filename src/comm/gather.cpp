#include "nj/comm/gather.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

namespace nj {
namespace {

// Messages carry floats. An id travels as the two floats that hold its 64 bits, copied, never computed with: MPI
// moves them as bytes between ranks of one architecture.
constexpr std::size_t kFloatsPerId = sizeof(gid_t) / sizeof(float);
static_assert(kFloatsPerId * sizeof(float) == sizeof(gid_t));
// Apart from the boundary exchanges' tags (2 per layer).
constexpr int kGatherTag = 30000;

std::vector<float> encode_ids(std::span<const gid_t> ids) {
  std::vector<float> encoded(kFloatsPerId * ids.size());
  if (!ids.empty()) std::memcpy(encoded.data(), ids.data(), ids.size_bytes());
  return encoded;
}

// Pieces arrive in the order they were posted: messages of one tag between two ranks do not overtake each other.
template <typename Buffer, typename Span>
void add_pieces(std::vector<Buffer>& buffers, int peer, Span floats, std::size_t piece) {
  for (std::size_t first = 0; first < floats.size(); first += piece) {
    buffers.push_back({peer, floats.subspan(first, std::min(piece, floats.size() - first))});
  }
}

}  // namespace

GatheredRows gather_rows(Communicator& comm, std::span<const gid_t> ids, ConstRows rows, std::int64_t total, int root,
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
  const std::int64_t arriving = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  NJ_EXPECTS(arriving == total, "{} rows gathered where {} were expected", arriving, total);
  // Rows in the order they arrive, then put in order of id.
  GatheredRows gathered{std::vector<gid_t>(static_cast<std::size_t>(total)), Matrix(total, rows.cols)};
  std::int64_t filled = 0;
  const auto place = [&](std::span<const float> encoded_ids, const float* values) {
    const auto count = static_cast<std::int64_t>(encoded_ids.size() / kFloatsPerId);
    if (count == 0) return;  // memcpy takes no null pointer, even for no bytes
    std::memcpy(gathered.ids.data() + filled, encoded_ids.data(), encoded_ids.size_bytes());
    std::memcpy(gathered.rows.view().row(filled), values, static_cast<std::size_t>(count * rows.cols) * sizeof(float));
    filled += count;
  };
  place(encoded, rows.data);
  std::vector<float> peer_ids;
  std::vector<float> peer_rows;
  for (int peer = 0; peer < comm.size(); ++peer) {
    const auto count = counts[static_cast<std::size_t>(peer)];
    if (peer == root || count == 0) continue;
    peer_ids.resize(static_cast<std::size_t>(count) * kFloatsPerId);
    peer_rows.resize(static_cast<std::size_t>(count * rows.cols));
    std::vector<ReceiveBuffer> receives;
    add_pieces(receives, peer, std::span<float>(peer_ids), piece_floats);
    add_pieces(receives, peer, std::span<float>(peer_rows), piece_floats);
    comm.start_exchange({}, receives, kGatherTag)->wait();
    place(peer_ids, peer_rows.data());
  }
  // Into order of id in place: follow each cycle of the permutation with one row in hand, so that the root never
  // holds the result twice.
  std::vector<std::int64_t> order(static_cast<std::size_t>(total));  // order[r]: the arrival of the row due at r
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::ranges::sort(order, {}, [&](std::int64_t i) { return gathered.ids[static_cast<std::size_t>(i)]; });
  const auto row_bytes = static_cast<std::size_t>(rows.cols) * sizeof(float);
  const auto row = [&](std::int64_t r) { return gathered.rows.view().row(r); };
  std::vector<float> held(static_cast<std::size_t>(rows.cols));
  std::vector<bool> placed(static_cast<std::size_t>(total), false);
  for (std::int64_t start = 0; start < total; ++start) {
    if (placed[static_cast<std::size_t>(start)]) continue;
    std::memcpy(held.data(), row(start), row_bytes);
    const gid_t held_id = gathered.ids[static_cast<std::size_t>(start)];
    for (std::int64_t r = start;;) {
      const std::int64_t from = order[static_cast<std::size_t>(r)];
      placed[static_cast<std::size_t>(r)] = true;
      if (from == start) {
        std::memcpy(row(r), held.data(), row_bytes);
        gathered.ids[static_cast<std::size_t>(r)] = held_id;
        break;
      }
      std::memcpy(row(r), row(from), row_bytes);
      gathered.ids[static_cast<std::size_t>(r)] = gathered.ids[static_cast<std::size_t>(from)];
      r = from;
    }
  }
  for (std::int64_t r = 0; r < total; ++r) {
    const gid_t id = gathered.ids[static_cast<std::size_t>(r)];
    NJ_EXPECTS(id >= 0 && (r == 0 || id != gathered.ids[static_cast<std::size_t>(r - 1)]),
               "vertex id {} gathered twice or negative", id);
  }
  return gathered;
}

}  // namespace nj
