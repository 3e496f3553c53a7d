#include "nj/run/parallel_generate.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "nj/comm/slice_messages.hpp"
#include "nj/core/release.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/hdf5.hpp"

namespace nj {
namespace {

// An in-edge as a rank sorts it: its destination in the high half, its source in the low one, so that sorting the
// keys sorts the edges by destination and then by source, as build_csr does.
std::uint64_t edge_key(vid_t destination, vid_t source) {
  return (static_cast<std::uint64_t>(destination) << 32U) | static_cast<std::uint64_t>(source);
}

// The in-edges of the rank's slice, sorted and without repeats: each pair drawn by any rank arrives at the rank that
// holds its destination, and reversed at the one that holds its source. Self-loops are dropped where drawn.
std::vector<std::uint64_t> slice_edges(const SyntheticModel& model, const Slices& slices, Communicator& comm) {
  const Slices pair_shares(model.pairs(), comm.size());
  const std::int64_t first_pair = pair_shares.first(comm.rank());
  const std::int64_t last_pair = pair_shares.first(comm.rank() + 1);
  std::vector<std::vector<std::uint64_t>> to_rank(static_cast<std::size_t>(comm.size()));
  for (std::int64_t i = first_pair; i < last_pair; ++i) {
    const auto [source, destination] = model.pair(i);
    if (source == destination) continue;
    to_rank[static_cast<std::size_t>(slices.owner(destination))].push_back(edge_key(destination, source));
    to_rank[static_cast<std::size_t>(slices.owner(source))].push_back(edge_key(source, destination));
  }
  std::vector<Writer> writers(to_rank.size());
  for (std::size_t r = 0; r < to_rank.size(); ++r) {
    writers[r].put(to_rank[r]);
    release_vector(to_rank[r]);
  }
  std::vector<std::uint64_t> edges;
  for (const auto& message : exchange(writers, comm)) {
    Reader reader(message);
    const auto received = reader.take<std::uint64_t>();
    edges.insert(edges.end(), received.begin(), received.end());
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  return edges;
}

// The k-th smallest (from 0) of the keys the ranks hold between them: a histogram of their top 16 bits, summed over
// the ranks, says which bucket holds it, and every rank gathers the keys in that bucket (about one in 65,536).
std::uint64_t kth_smallest(std::span<const std::uint64_t> keys, std::int64_t k, Communicator& comm) {
  constexpr unsigned kShift = 48;
  std::vector<std::int64_t> histogram(std::size_t{1} << (64 - kShift), 0);
  for (const std::uint64_t key : keys) ++histogram[key >> kShift];
  comm.all_reduce_sum(histogram);
  std::uint64_t bucket = 0;
  while (k >= histogram[bucket]) k -= histogram[bucket++];
  std::vector<std::uint64_t> in_bucket;
  for (const std::uint64_t key : keys) {
    if (key >> kShift == bucket) in_bucket.push_back(key);
  }
  std::vector<Writer> writers(static_cast<std::size_t>(comm.size()));
  for (Writer& writer : writers) writer.put(in_bucket);
  std::vector<std::uint64_t> gathered;
  for (const auto& message : exchange(writers, comm)) {
    const auto received = Reader(message).take<std::uint64_t>();
    gathered.insert(gathered.end(), received.begin(), received.end());
  }
  std::nth_element(gathered.begin(), gathered.begin() + k, gathered.end());
  return gathered[static_cast<std::size_t>(k)];
}

// The splits of the slice's vertices: the train split is the vertices whose keys are below the train_size()-th
// smallest, as generate_dataset's sort of every key deals them out.
void draw_slice_splits(const SyntheticModel& model, DatasetRows& rows, Communicator& comm) {
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(rows.rows()));
  for (std::size_t r = 0; r < keys.size(); ++r) keys[r] = model.split_key(rows.first + static_cast<std::int64_t>(r));
  const std::int64_t n = model.options().vertices;
  const auto bound = [&](std::int64_t count) {
    return count < n ? kth_smallest(keys, count, comm) : std::numeric_limits<std::uint64_t>::max();
  };
  const std::uint64_t train_below = bound(model.train_size());
  const std::uint64_t val_below = bound(model.train_size() + model.val_size());
  for (const std::uint64_t key : keys) {
    rows.train_mask.push_back(key < train_below ? 1 : 0);
    rows.val_mask.push_back(key >= train_below && key < val_below ? 1 : 0);
    rows.test_mask.push_back(key >= val_below ? 1 : 0);
  }
}

// The slice's rows as read_dataset_rows would read them back.
DatasetRows slice_rows(const SyntheticModel& model, const Slices& slices, Communicator& comm) {
  DatasetRows rows;
  rows.first = slices.first(comm.rank());
  const std::int64_t count = slices.rows(comm.rank());
  const std::vector<std::uint64_t> edges = slice_edges(model, slices, comm);
  rows.offsets.assign(static_cast<std::size_t>(count) + 1, 0);
  rows.sources.reserve(edges.size());
  for (const std::uint64_t key : edges) {
    ++rows.offsets[static_cast<std::size_t>(static_cast<std::int64_t>(key >> 32U) - rows.first) + 1];
    rows.sources.push_back(static_cast<gid_t>(key & 0xFFFFFFFFU));
  }
  for (std::size_t r = 0; r < static_cast<std::size_t>(count); ++r) rows.offsets[r + 1] += rows.offsets[r];
  rows.labels.assign(model.labels().begin() + rows.first, model.labels().begin() + rows.first + count);
  draw_slice_splits(model, rows, comm);
  return rows;
}

// Per rank, the first of its in-edges in the file; and their total.
std::pair<std::int64_t, std::int64_t> edge_range(const DatasetRows& rows, Communicator& comm) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(comm.size()), 0);
  counts[static_cast<std::size_t>(comm.rank())] = static_cast<std::int64_t>(rows.sources.size());
  comm.all_reduce_sum(counts);
  std::int64_t first = 0;
  for (int r = 0; r < comm.rank(); ++r) first += counts[static_cast<std::size_t>(r)];
  std::int64_t total = 0;
  for (const std::int64_t count : counts) total += count;
  return {first, total};
}

GeneratedGraph summary(const SyntheticModel& model, const DatasetRows& rows, std::int64_t edges, Communicator& comm) {
  const auto& labels = model.labels();
  std::vector<std::int64_t> counts(4, 0);  // edges inside a class; train, val, test vertices
  for (std::int64_t r = 0; r < rows.rows(); ++r) {
    const auto label = labels[static_cast<std::size_t>(rows.first + r)];
    for (auto e = rows.offsets[static_cast<std::size_t>(r)]; e < rows.offsets[static_cast<std::size_t>(r) + 1]; ++e) {
      counts[0] += labels[static_cast<std::size_t>(rows.sources[static_cast<std::size_t>(e)])] == label ? 1 : 0;
    }
  }
  for (std::size_t r = 0; r < rows.train_mask.size(); ++r) {
    counts[1] += rows.train_mask[r];
    counts[2] += rows.val_mask[r];
    counts[3] += rows.test_mask[r];
  }
  comm.all_reduce_sum(counts);
  return {.vertices = model.options().vertices,
          .edges = edges,
          .edge_homophily = edges > 0 ? static_cast<double>(counts[0]) / static_cast<double>(edges) : 0.0,
          .train = counts[1],
          .val = counts[2],
          .test = counts[3]};
}

}  // namespace

GeneratedGraph generate_in_parallel(const GeneratorOptions& options, const std::string& path, Communicator& comm) {
  const SyntheticModel model(options);
  const Slices slices(options.vertices, comm.size());
  const DatasetRows rows = slice_rows(model, slices, comm);
  // Named, not bound: lambdas below capture them.
  const std::pair<std::int64_t, std::int64_t> range = edge_range(rows, comm);
  const std::int64_t first_edge = range.first;
  const std::int64_t edges = range.second;
  const Matrix features = model.features(rows.first, rows.rows());
  const std::string partial = path + ".partial";
  // One rank at a time opens the file, so that HDF5 needs no parallel driver; each turn ends in an agreement, so that
  // a rank that fails to write ends the job on every rank rather than leaving the others waiting.
  try {
    agree_on_failure(comm, [&] {
      if (comm.rank() != 0) return;
      auto file = hdf5::File::create(partial);
      create_dataset_file(file, {.name = options.name,
                                 .num_vertices = options.vertices,
                                 .num_edges = edges,
                                 .num_classes = options.classes,
                                 .feature_width = options.features,
                                 .symmetrized = true,
                                 .self_loops = SelfLoopPolicy::kRemoved});
    });
    for (int turn = 0; turn < comm.size(); ++turn) {
      agree_on_failure(comm, [&] {
        if (comm.rank() != turn) return;
        auto file = hdf5::File::open_write(partial);
        write_dataset_rows(file, rows, first_edge, features);
      });
    }
    agree_on_failure(comm, [&] {
      if (comm.rank() == 0) std::filesystem::rename(partial, path);
    });
  } catch (...) {
    if (comm.rank() == 0) std::filesystem::remove(partial);
    throw;
  }
  return summary(model, rows, edges, comm);
}

}  // namespace nj
