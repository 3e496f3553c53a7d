#include "nj/io/shard_file.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <type_traits>
#include <utility>

#include "nj/core/error.hpp"
#include "nj/core/printable.hpp"
#include "nj/io/feature_storage.hpp"
#include "nj/io/hdf5.hpp"

namespace nj {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// As in the dataset file: chunks of whole feature rows, and of 2^20 edges.
constexpr hsize_t kFeatureRowsPerChunk = 4096;
constexpr hsize_t kEdgesPerChunk = 1U << 20U;

// Peer lists are stored flattened: list i is values[offsets[i] : offsets[i + 1]].
void write_lists(hdf5::File& file, const std::string& name, const std::vector<PeerRows>& peers,
                 const std::vector<vid_t> PeerRows::*list) {
  std::vector<eid_t> offsets{0};
  std::vector<vid_t> values;
  for (const auto& p : peers) {
    values.insert(values.end(), (p.*list).begin(), (p.*list).end());
    offsets.push_back(static_cast<eid_t>(values.size()));
  }
  file.write<eid_t>(name + "_offsets", offsets, {offsets.size()});
  file.write<vid_t>(name, values, {values.size()});
}

void read_lists(const hdf5::File& file, const std::string& name, std::vector<PeerRows>& peers,
                std::vector<vid_t> PeerRows::*list) {
  const auto offsets = hdf5::read_vector<eid_t>(file, name + "_offsets", static_cast<std::int64_t>(peers.size()) + 1);
  const auto values = hdf5::read_vector<vid_t>(file, name, -1);
  NJ_REQUIRE(offsets.front() == 0 && offsets.back() == static_cast<eid_t>(values.size()),
             "{}: {}_offsets: must run from 0 to the length of {} ({})", file.path(), name, name, values.size());
  for (std::size_t i = 0; i < peers.size(); ++i) {
    NJ_REQUIRE(offsets[i] <= offsets[i + 1], "{}: {}_offsets: decrease at peer {}", file.path(), name, i);
  }
  // Checked whole before any list is cut: only offsets that never decrease all lie within `values`.
  for (std::size_t i = 0; i < peers.size(); ++i) {
    peers[i].*list = std::vector<vid_t>(values.begin() + offsets[i], values.begin() + offsets[i + 1]);
  }
}

void write_counts(hdf5::File& file, const std::string& name, const std::vector<std::int64_t>& counts) {
  file.write<std::int64_t>(name, counts, {counts.size()});
}

bool known_method(const std::string& method) {
  return method == "metis" || method == "scotch" || method == "random" || method == "contiguous" || method == "none";
}

// The value of `key` in a JSON object, with errors that name the file (and object) and the key.
template <typename T>
T field(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  NJ_REQUIRE(it != object.end(), "{}: key '{}' is missing", where, key);
  // nlohmann::json converts any number with a plain cast: undefined for a float beyond T (1e20 as an int), and a
  // wrap-around for a negative integer read as an unsigned one. Other types fail the conversion below.
  if constexpr (std::is_integral_v<T>) {
    const bool fits = it->is_number_unsigned()
                          ? std::in_range<T>(it->template get<std::uint64_t>())
                          : it->is_number_integer() && std::in_range<T>(it->template get<std::int64_t>());
    NJ_REQUIRE(fits || !it->is_number(), "{}: key '{}' must be an integer in [{}, {}]", where, key,
               std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw InputError(fmt::format("{}: key '{}' has the wrong type ({})", where, key, it->type_name()));
  }
}

fs::path manifest_path_of(const std::string& path) {
  return fs::is_directory(path) ? fs::path(path) / kManifestFileName : fs::path(path);
}

}  // namespace

std::string shard_file_name(int part) { return fmt::format("part-{}.h5", part); }

void write_shard(const std::string& path, const Shard& shard) {
  shard.validate("shard to write to " + path);
  const LocalGraph& local = shard.local;
  const auto n = static_cast<hsize_t>(local.num_local());
  const auto owned = static_cast<hsize_t>(local.num_owned);
  auto file = hdf5::File::create(path);
  file.create_group("/graph");
  file.write<eid_t>("/graph/indptr", local.graph.offsets, {n + 1});
  file.write<vid_t>("/graph/indices", local.graph.sources, {static_cast<hsize_t>(local.graph.num_edges())},
                    kEdgesPerChunk);
  file.create_group("/vertices");
  file.write<gid_t>("/vertices/global_id", local.global_id, {n});
  file.write<std::int64_t>("/vertices/global_in_degree", local.global_in_degree, {n});
  file.write<std::uint8_t>("/vertices/global_self_loop", local.global_self_loop, {n});
  file.create_group("/peers");
  std::vector<std::int32_t> peer_parts;
  for (const auto& p : local.peers) peer_parts.push_back(p.peer);
  file.write<std::int32_t>("/peers/part", peer_parts, {peer_parts.size()});
  write_lists(file, "/peers/send", local.peers, &PeerRows::send);
  write_lists(file, "/peers/receive", local.peers, &PeerRows::receive);
  // Stored sparse by the same rule as a dataset file's features, so that a sparse dataset's shards are sparse too.
  write_features(file, shard.features, FeatureStorage::kAuto, kFeatureRowsPerChunk);
  file.write<std::int32_t>("/labels", shard.labels, {owned});
  file.create_group("/masks");
  file.write<std::uint8_t>("/masks/train", shard.train_mask, {owned});
  file.write<std::uint8_t>("/masks/val", shard.val_mask, {owned});
  file.write<std::uint8_t>("/masks/test", shard.test_mask, {owned});
  const PartitionInfo& info = shard.partition;
  file.create_group("/partition");
  write_counts(file, "/partition/owned", info.owned);
  write_counts(file, "/partition/mirrors", info.mirrors);
  write_counts(file, "/partition/train", info.train);
  write_counts(file, "/partition/in_edges", info.in_edges);

  file.set_attribute("kind", std::string(kShardKind));
  file.set_attribute("format_version", kShardFormatVersion);
  file.set_attribute("name", shard.name);
  file.set_attribute("part", static_cast<std::int64_t>(shard.part));
  file.set_attribute("num_owned", static_cast<std::int64_t>(local.num_owned));
  file.set_attribute("num_classes", static_cast<std::int64_t>(shard.num_classes));
  file.set_attribute("global_vertices", shard.global_vertices);
  file.set_attribute("global_edges", shard.global_edges);
  file.set_attribute("global_train", shard.global_train);
  file.set_attribute("symmetrized", static_cast<std::int64_t>(shard.symmetrized ? 1 : 0));
  file.set_attribute("self_loops", std::string(to_string(shard.self_loops)));
  file.set_attribute("partition_method", info.method);
  file.set_attribute("partition_parts", static_cast<std::int64_t>(info.parts));
  file.set_attribute("partition_seed", static_cast<std::int64_t>(info.seed));  // the same 64 bits
  file.set_attribute("partition_seconds", info.seconds);
  file.set_attribute("partition_undirected_edges", info.undirected_edges);
  file.set_attribute("partition_edge_cut", info.edge_cut);
}

bool is_shard_file(const std::string& path) {
  const auto file = hdf5::File::open_read(path);
  return file.has_attribute("kind") && file.string_attribute("kind") == kShardKind;
}

Shard read_shard(const std::string& path) {
  const auto file = hdf5::File::open_read(path);
  NJ_REQUIRE(file.has_attribute("kind") && file.string_attribute("kind") == kShardKind,
             "{}: not a shard file (its attribute kind is not '{}')", path, kShardKind);
  const auto version = file.int_attribute("format_version");
  NJ_REQUIRE(version == kShardFormatVersion, "{}: format_version {} is not supported (this build reads {})", path,
             version, kShardFormatVersion);

  Shard shard;
  shard.name = file.string_attribute("name");
  // Checked before narrowing to 32 bits, which would turn 2^32 + 1 into part 1; the shard's validation checks
  // the values.
  const auto part = file.int_attribute("part");
  const auto num_classes = file.int_attribute("num_classes");
  NJ_REQUIRE(std::in_range<int>(part) && std::in_range<std::int32_t>(num_classes),
             "{}: attributes part ({}) and num_classes ({}) must be 32-bit integers", path, part, num_classes);
  shard.part = static_cast<int>(part);
  shard.num_classes = static_cast<std::int32_t>(num_classes);
  shard.global_vertices = file.int_attribute("global_vertices");
  shard.global_edges = file.int_attribute("global_edges");
  shard.global_train = file.int_attribute("global_train");
  shard.symmetrized = file.int_attribute("symmetrized") != 0;
  try {
    shard.self_loops = parse_self_loop_policy(file.string_attribute("self_loops"));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: attribute self_loops: {}", path, e.what()));
  }

  PartitionInfo& info = shard.partition;
  info.method = file.string_attribute("partition_method");
  NJ_REQUIRE(known_method(info.method),
             "{}: attribute partition_method '{}' is not metis, scotch, random, contiguous or none", path,
             printable(info.method));
  const auto parts = file.int_attribute("partition_parts");
  NJ_REQUIRE(parts >= 1 && parts <= std::numeric_limits<int>::max(),
             "{}: attribute partition_parts must be positive, got {}", path, parts);
  info.parts = static_cast<int>(parts);
  info.seed = static_cast<std::uint64_t>(file.int_attribute("partition_seed"));
  info.seconds = file.float_attribute("partition_seconds");
  info.undirected_edges = file.int_attribute("partition_undirected_edges");
  info.edge_cut = file.int_attribute("partition_edge_cut");
  info.owned = hdf5::read_vector<std::int64_t>(file, "/partition/owned", parts);
  info.mirrors = hdf5::read_vector<std::int64_t>(file, "/partition/mirrors", parts);
  info.train = hdf5::read_vector<std::int64_t>(file, "/partition/train", parts);
  info.in_edges = hdf5::read_vector<std::int64_t>(file, "/partition/in_edges", parts);

  LocalGraph& local = shard.local;
  local.graph.offsets = hdf5::read_vector<eid_t>(file, "/graph/indptr", -1);
  NJ_REQUIRE(!local.graph.offsets.empty(), "{}: /graph/indptr: must have num_local + 1 entries, found 0", path);
  const auto n = static_cast<std::int64_t>(local.graph.offsets.size()) - 1;
  local.graph.sources = hdf5::read_vector<vid_t>(file, "/graph/indices", -1);
  const auto num_owned = file.int_attribute("num_owned");
  NJ_REQUIRE(num_owned >= 0 && num_owned <= n, "{}: attribute num_owned = {} but /graph has {} vertices", path,
             num_owned, n);
  local.num_owned = static_cast<vid_t>(num_owned);
  local.global_id = hdf5::read_vector<gid_t>(file, "/vertices/global_id", n);
  // Any distinct non-negative 64-bit ids: those of the dataset where nj partition wrote the shard, others where the
  // graph came from elsewhere (beyond 2^31 vertices, say). Only their distinctness within the shard can be checked.
  std::vector<gid_t> ids = local.global_id;
  std::ranges::sort(ids);
  NJ_REQUIRE(ids.empty() || ids.front() >= 0, "{}: /vertices/global_id: {} is negative", path,
             ids.empty() ? 0 : ids.front());
  const auto repeated = std::ranges::adjacent_find(ids);
  NJ_REQUIRE(repeated == ids.end(), "{}: /vertices/global_id: {} appears twice", path,
             repeated == ids.end() ? 0 : *repeated);
  local.global_in_degree = hdf5::read_vector<std::int64_t>(file, "/vertices/global_in_degree", n);
  local.global_self_loop = hdf5::read_vector<std::uint8_t>(file, "/vertices/global_self_loop", n);
  const auto peer_parts = hdf5::read_vector<std::int32_t>(file, "/peers/part", -1);
  for (const auto p : peer_parts) {
    NJ_REQUIRE(p >= 0 && p < info.parts && p != shard.part, "{}: /peers/part: {} is not another part of {}", path, p,
               info.parts);
    local.peers.push_back(PeerRows{p, {}, {}});
  }
  read_lists(file, "/peers/send", local.peers, &PeerRows::send);
  read_lists(file, "/peers/receive", local.peers, &PeerRows::receive);

  const StoredFeatures stored = stored_features(file);
  shard.features_stored_sparse = stored.sparse;
  NJ_REQUIRE(stored.rows == num_owned, "{}: {}: {} rows but the shard owns {} vertices", path, stored.object(),
             stored.rows, num_owned);
  shard.features = read_features(file);
  require_finite_features(shard.features, path, local.global_id);
  shard.labels = hdf5::read_vector<std::int32_t>(file, "/labels", num_owned);
  for (auto [name, mask] : {std::pair{"/masks/train", &shard.train_mask}, std::pair{"/masks/val", &shard.val_mask},
                            std::pair{"/masks/test", &shard.test_mask}}) {
    *mask = hdf5::read_vector<std::uint8_t>(file, name, num_owned);
  }
  shard.validate(path);
  return shard;
}

nlohmann::json to_json(const PartitionManifest& manifest) {
  const PartitionInfo& info = manifest.partition;
  NJ_EXPECTS(manifest.shard_files.size() == static_cast<std::size_t>(info.parts) &&
                 info.owned.size() == manifest.shard_files.size() && info.mirrors.size() == info.owned.size() &&
                 info.train.size() == info.owned.size() && info.in_edges.size() == info.owned.size(),
             "a manifest of {} parts with {} shard files and {} per-part counts", info.parts,
             manifest.shard_files.size(), info.owned.size());
  json parts = json::array();
  for (int p = 0; p < info.parts; ++p) {
    const auto i = static_cast<std::size_t>(p);
    parts.push_back({{"part", p},
                     {"file", manifest.shard_files[i]},
                     {"owned", info.owned[i]},
                     {"mirrors", info.mirrors[i]},
                     {"train", info.train[i]},
                     {"in_edges", info.in_edges[i]},
                     {"mirror_fraction", info.mirror_fraction(p)}});
  }
  return {
      {"kind", kManifestKind},
      {"format_version", kManifestFormatVersion},
      {"dataset",
       {{"name", manifest.dataset_name},
        {"path", manifest.dataset_path},
        {"num_vertices", manifest.global_vertices},
        {"num_edges", manifest.global_edges},
        {"train", manifest.global_train}}},
      {"method", info.method},
      {"parts", info.parts},
      {"seed", info.seed},
      {"seconds", info.seconds},
      {"undirected_edges", info.undirected_edges},
      {"edge_cut", info.edge_cut},
      {"cut_fraction", info.cut_fraction()},
      {"vertex_imbalance", info.vertex_imbalance()},
      {"train_imbalance", info.train_imbalance()},
      {"per_part", parts},
  };
}

void write_manifest(const std::string& directory, const PartitionManifest& manifest) {
  const json document = to_json(manifest);
  // Written beside and renamed, so that a reader never sees half a manifest.
  const auto path = fs::path(directory) / kManifestFileName;
  const auto temporary = fs::path(path.string() + ".tmp");
  {
    std::ofstream out(temporary);
    out << document.dump(2) << '\n';
    NJ_REQUIRE(out.good(), "{}: cannot write the manifest", temporary.string());
  }
  fs::rename(temporary, path);
}

PartitionManifest read_manifest(const std::string& path) {
  const auto file = manifest_path_of(path);
  const auto where = file.string();
  std::ifstream in(file);
  NJ_REQUIRE(in.is_open(), "{}: no such file (a partition folder holds {})", where, kManifestFileName);
  json document;
  try {
    document = json::parse(in);
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON (byte {})", where, e.byte));
  } catch (const json::exception& e) {  // e.g. a number beyond a double
    throw InputError(fmt::format("{}: not valid JSON ({})", where, printable(e.what())));
  }
  NJ_REQUIRE(document.is_object(), "{}: expected a JSON object", where);
  const auto kind = field<std::string>(document, "kind", where);
  NJ_REQUIRE(kind == kManifestKind, "{}: kind is '{}', not '{}'", where, printable(kind), kManifestKind);
  const auto version = field<std::int64_t>(document, "format_version", where);
  NJ_REQUIRE(version == kManifestFormatVersion, "{}: format_version {} is not supported (this build reads {})", where,
             version, kManifestFormatVersion);

  PartitionManifest manifest;
  manifest.directory = file.parent_path().string();
  const auto dataset = field<json>(document, "dataset", where);
  const auto dataset_where = where + ": dataset";
  NJ_REQUIRE(dataset.is_object(), "{}: expected a JSON object", dataset_where);
  manifest.dataset_name = field<std::string>(dataset, "name", dataset_where);
  manifest.dataset_path = field<std::string>(dataset, "path", dataset_where);
  manifest.global_vertices = field<std::int64_t>(dataset, "num_vertices", dataset_where);
  manifest.global_edges = field<std::int64_t>(dataset, "num_edges", dataset_where);
  manifest.global_train = field<std::int64_t>(dataset, "train", dataset_where);

  PartitionInfo& info = manifest.partition;
  info.method = field<std::string>(document, "method", where);
  NJ_REQUIRE(known_method(info.method), "{}: method '{}' is not metis, scotch, random, contiguous or none", where,
             printable(info.method));
  info.parts = field<int>(document, "parts", where);
  NJ_REQUIRE(info.parts >= 1, "{}: parts must be positive, got {}", where, info.parts);
  info.seed = field<std::uint64_t>(document, "seed", where);
  info.seconds = field<double>(document, "seconds", where);
  info.undirected_edges = field<std::int64_t>(document, "undirected_edges", where);
  info.edge_cut = field<std::int64_t>(document, "edge_cut", where);
  const auto parts = field<json>(document, "per_part", where);
  NJ_REQUIRE(parts.is_array() && parts.size() == static_cast<std::size_t>(info.parts),
             "{}: per_part must be an array of {} entries, one per part", where, info.parts);
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const auto part_where = fmt::format("{}: per_part[{}]", where, p);
    NJ_REQUIRE(parts[p].is_object(), "{}: expected a JSON object", part_where);
    NJ_REQUIRE(field<std::size_t>(parts[p], "part", part_where) == p, "{}: part must be {}", part_where, p);
    const fs::path file_name = field<std::string>(parts[p], "file", part_where);
    // Shards lie in the manifest's folder; a path that leaves it makes errors about a file the user never named.
    NJ_REQUIRE(!file_name.empty() && file_name.is_relative() && *file_name.lexically_normal().begin() != "..",
               "{}: file '{}' is not inside the partition folder", part_where, printable(file_name.string()));
    manifest.shard_files.push_back(file_name.string());
    info.owned.push_back(field<std::int64_t>(parts[p], "owned", part_where));
    info.mirrors.push_back(field<std::int64_t>(parts[p], "mirrors", part_where));
    info.train.push_back(field<std::int64_t>(parts[p], "train", part_where));
    info.in_edges.push_back(field<std::int64_t>(parts[p], "in_edges", part_where));
  }
  return manifest;
}

namespace {

// The shard files an earlier partition into more parts left in `directory` (part-<k>.h5 for k >= parts): they are
// not this partition's, and a reader of the folder would take them for shards of it.
void remove_shards_beyond(const std::string& directory, int parts) {
  static const std::regex shard_name(R"(part-(\d{1,9})\.h5)");
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    std::smatch match;
    if (std::regex_match(name, match, shard_name) && std::stoi(match[1]) >= parts) stale.push_back(entry.path());
  }
  for (const fs::path& path : stale) fs::remove(path);
  if (!stale.empty()) spdlog::info("removed {} shard files of an earlier partition into more parts", stale.size());
}

}  // namespace

void start_partition_folder(const std::string& directory) {
  fs::create_directories(directory);
  // A stale manifest would name shards this run is replacing; the new one is written once they all are.
  fs::remove(fs::path(directory) / kManifestFileName);
}

void finish_partition_folder(const std::string& directory, const PartitionManifest& manifest) {
  write_manifest(directory, manifest);
  remove_shards_beyond(directory, manifest.partition.parts);
}

PartitionManifest write_partition(const Dataset& dataset, const std::string& dataset_path,
                                  std::span<const std::int32_t> part_of, const PartitionInfo& info,
                                  const std::string& directory, const ProgressCallback& progress) {
  start_partition_folder(directory);
  PartitionManifest manifest;
  manifest.dataset_name = dataset.name;
  manifest.dataset_path = dataset_path.empty() ? "" : fs::absolute(dataset_path).lexically_normal().string();
  manifest.global_vertices = dataset.num_vertices();
  manifest.global_edges = dataset.graph.num_edges();
  manifest.global_train = count(dataset.train_mask);
  manifest.partition = info;
  manifest.directory = directory;
  ProgressTicks ticks(progress, "shards", info.parts);
  for (int part = 0; part < info.parts; ++part) {
    manifest.shard_files.push_back(shard_file_name(part));
    write_shard((fs::path(directory) / manifest.shard_files.back()).string(), make_shard(dataset, part_of, part, info));
    ticks.tick(part + 1);
  }
  ticks.finish();
  finish_partition_folder(directory, manifest);
  return manifest;
}

Shard load_part(const std::string& directory, int part, int expected_parts) {
  const PartitionManifest manifest = read_manifest(directory);
  const int parts = manifest.partition.parts;
  NJ_REQUIRE(parts == expected_parts, "partition {} has {} parts but the job has {} ranks", directory, parts,
             expected_parts);
  NJ_EXPECTS(part >= 0 && part < parts, "part {} of {}", part, parts);
  const auto path = (fs::path(manifest.directory) / manifest.shard_files[static_cast<std::size_t>(part)]).string();
  Shard shard = read_shard(path);
  NJ_REQUIRE(shard.part == part && shard.partition.parts == parts,
             "{}: holds part {} of {} but {} lists it as part {} of {}", path, shard.part, shard.partition.parts,
             manifest_path_of(directory).string(), part, parts);
  return shard;
}

}  // namespace nj
