// What a rank will hold in host memory, from the files' shapes before anything is loaded, and what it may use.
#include "nj/core/host_memory.hpp"

#include <filesystem>

#include "cli/commands.hpp"
#include "nj/core/bytes.hpp"
#include "nj/io/feature_storage.hpp"
#include "nj/io/hdf5.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/partition/parallel.hpp"
#include "nj/runtime/resources.hpp"

namespace nj::cli {
namespace {

std::int64_t first_dimension(const hdf5::File& file, const std::string& dataset, std::size_t dimension) {
  const std::vector<hsize_t> shape = file.shape(dataset);
  NJ_REQUIRE(shape.size() > dimension, "{}: {}: expected at least {} dimensions, found {}", file.path(), dataset,
             dimension + 1, shape.size());
  return static_cast<std::int64_t>(shape[dimension]);
}

}  // namespace

RankShape rank_shape(const std::string& dataset, const std::string& partitions, int rank, int ranks,
                     PartitionMethod method) {
  RankShape shape;
  if (!partitions.empty()) {
    const PartitionManifest manifest = read_manifest(partitions);
    NJ_REQUIRE(rank < manifest.partition.parts && manifest.partition.owned.size() > static_cast<std::size_t>(rank),
               "{}: has {} parts, not enough for rank {}", partitions, manifest.partition.parts, rank);
    const auto part = static_cast<std::size_t>(rank);
    const auto file =
        hdf5::File::open_read((std::filesystem::path(manifest.directory) / manifest.shard_files[part]).string());
    shape.owned = manifest.partition.owned[part];
    shape.local = shape.owned + manifest.partition.mirrors[part];
    shape.in_edges = manifest.partition.in_edges[part];
    const StoredFeatures features = stored_features(file);
    shape.features = features.width;
    shape.stored_nonzeros = features.sparse ? features.nonzeros : -1;
    shape.classes = file.int_attribute("num_classes");
    return shape;
  }
  const auto file = hdf5::File::open_read(dataset);
  const StoredFeatures features = stored_features(file);
  shape.owned = features.rows;
  shape.local = shape.owned;
  shape.in_edges = first_dimension(file, "/graph/indices", 0);
  shape.features = features.width;
  shape.stored_nonzeros = features.sparse ? features.nonzeros : -1;
  shape.classes = file.int_attribute("num_classes");
  if (ranks > 1) {
    // Partitioned in memory, the whole dataset is read first, then the shard is cut from it; in parallel, a slice of
    // it. A part's mirrors are not known before.
    const std::int64_t whole = shard_bytes(shape);
    const std::int64_t stored = features.sparse ? sparse_rows_bytes(features.rows, features.nonzeros) : 0;
    shape.stored_nonzeros = -1;  // read with the dataset, and gone before the run
    shape.owned = (shape.owned + ranks - 1) / ranks;
    shape.local = shape.owned;
    shape.in_edges = (shape.in_edges + ranks - 1) / ranks;
    // Beside the whole dataset: the shard, or before it is cut, the features' stored sparse entries while they fill
    // the dense rows (whichever is larger; the forecast adds the shard).
    if (!runs_in_parallel(method)) {
      shape.whole_dataset_bytes = whole + std::max<std::int64_t>(stored - shard_bytes(shape), 0);
    }
  }
  return shape;
}

HostMemoryLimit host_memory_limit(const std::string& option) {
  if (!option.empty()) return {parse_byte_size(option), "given by --host-memory"};
  const std::int64_t available = available_host_bytes();
  if (available < 0) return {-1, "unknown"};
  const int ranks_here = local_size();
  if (ranks_here == 1) return {available, "available on this machine"};
  return {available / ranks_here, fmt::format("available on this machine, shared by its {} ranks ({} in all)",
                                              ranks_here, format_bytes(available))};
}

HostFootprint host_forecast(const Model& model, const RankShape& shape, const HostFootprint& loading,
                            const ExecutorChoice& choice, const PlannedRun& run, std::int64_t process_bytes,
                            bool has_peers, int threads) {
  const RunLayout layout{.in_memory = choice.in_memory,
                         .device_in_host_memory = !choice.options.library.memory_apart_from_host,
                         .device_budget = choice.options.device_budget,
                         .recompute = choice.options.mode == ExecutionMode::kRecompute,
                         .threads = threads,
                         .inference = choice.options.forward_only};
  RunHostUse use = run.host_use(process_bytes);
  if (has_peers) use.mpi_bytes = mpi_exchange_bytes(run.exchange_bytes_sent());
  return peak_host_footprint(loading, running_host_footprint(model, shape, layout, use));
}

}  // namespace nj::cli
