#include "nj/train/checkpoint.hpp"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>

#include "nj/core/printable.hpp"
#include "nj/io/hdf5.hpp"

namespace nj {
namespace {

namespace fs = std::filesystem;

// Written into every checkpoint; a file without it is not one of ours.
constexpr const char* kFormat = "nj-checkpoint 1";

struct IdentityPart {
  const char* name;
  std::string RunIdentity::*field;
};
constexpr IdentityPart kIdentityParts[] = {{"model", &RunIdentity::model},
                                           {"dataset", &RunIdentity::dataset},
                                           {"partitioning", &RunIdentity::partitioning},
                                           {"optimizer", &RunIdentity::optimizer}};

// Progress as named float attributes; NaN stands for "not evaluated".
std::vector<std::pair<std::string, double*>> accuracy_fields(TrainingProgress& p) {
  return {{"best_val_train", &p.best_val_accuracy.train}, {"best_val_val", &p.best_val_accuracy.val},
          {"best_val_test", &p.best_val_accuracy.test},   {"final_train", &p.final_accuracy.train},
          {"final_val", &p.final_accuracy.val},           {"final_test", &p.final_accuracy.test}};
}

void write_matrix(hdf5::File& file, const std::string& name, const Matrix& m) {
  file.write<float>(name, m.span(), {static_cast<hsize_t>(m.rows()), static_cast<hsize_t>(m.cols())});
}

// Reads a matrix of m's shape into `into`, checking shape and finiteness.
void read_matrix(const hdf5::File& file, const std::string& name, const Matrix& m, std::vector<float>& into) {
  NJ_REQUIRE(file.exists(name), "{}: {}: missing", file.path(), name);
  auto array = file.read<float>(name);
  NJ_REQUIRE(array.shape == (std::vector<hsize_t>{static_cast<hsize_t>(m.rows()), static_cast<hsize_t>(m.cols())}),
             "{}: {}: shape does not match the model ({}x{})", file.path(), name, m.rows(), m.cols());
  const auto bad = std::find_if(array.values.begin(), array.values.end(), [](float x) { return !std::isfinite(x); });
  NJ_REQUIRE(bad == array.values.end(), "{}: {}: entry {} is {}", file.path(), name, bad - array.values.begin(), *bad);
  into = std::move(array.values);
}

// Flushes a closed file's data, then after renaming, the folder entry, so that the name never points at data
// still in the page cache when the machine goes down.
void sync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  NJ_REQUIRE(fd >= 0, "{}: cannot open to flush: {}", path, std::strerror(errno));
  const int status = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  NJ_REQUIRE(status == 0, "{}: fsync failed: {}", path, std::strerror(error));
}

std::string parent_folder(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// The byte image of a vector, for broadcasting it.
template <typename T>
std::span<std::byte> bytes_of(std::span<T> values) {
  return {reinterpret_cast<std::byte*>(values.data()), values.size_bytes()};
}

}  // namespace

RunIdentity identify_run(const ModelConfig& model, const Shard& shard, const std::string& feature_norm,
                         const TrainOptions& options) {
  RunIdentity run;
  run.model = fmt::format(
      "{}, {} layers, hidden {}, heads {}, output heads {}, activation {}, dropout {}, attention dropout {}, seed {}",
      to_string(model.kind), model.layers, model.hidden, model.heads, model.output_heads, to_string(model.activation),
      model.dropout, model.attention_dropout, model.seed);
  run.dataset =
      fmt::format("'{}': {} vertices, {} edges, {} features, {} classes, {} training vertices, {} features", shard.name,
                  shard.global_vertices, shard.global_edges, shard.features.cols(), shard.num_classes,
                  shard.global_train, feature_norm == "none" ? "raw" : feature_norm + "-normalised");
  const PartitionInfo& p = shard.partition;
  run.partitioning = p.parts == 1 ? std::string("one rank, the whole graph")
                                  : fmt::format("{} ranks, {} partition, seed {}, edge cut {}, owned {}", p.parts,
                                                p.method, p.seed, p.edge_cut, fmt::join(p.owned, "/"));
  run.optimizer = fmt::format("Adam lr {}, betas {} {}, eps {}, weight decay {} on {}", options.adam.lr,
                              options.adam.beta1, options.adam.beta2, options.adam.eps, options.adam.weight_decay,
                              options.decay_scope == WeightDecayScope::kAll ? "all layers" : "the first layer");
  return run;
}

std::string describe_differences(const RunIdentity& checkpoint, const RunIdentity& run) {
  std::vector<std::string> differences;
  for (const IdentityPart& part : kIdentityParts) {
    const std::string& theirs = checkpoint.*part.field;
    const std::string& ours = run.*part.field;
    if (theirs != ours)
      differences.push_back(fmt::format("{}: checkpoint has '{}', this run has '{}'", part.name, theirs, ours));
  }
  return fmt::format("{}", fmt::join(differences, "; "));
}

void save_checkpoint(const std::string& path, const RunIdentity& run, const TrainingProgress& progress,
                     const Adam& optimizer, const std::function<void()>& on_written) {
  const std::string partial = path + ".partial";
  {
    auto file = hdf5::File::create(partial);
    file.set_attribute("format", std::string(kFormat));
    for (const IdentityPart& part : kIdentityParts) file.set_attribute(part.name, run.*part.field);
    file.set_attribute("next_epoch", static_cast<std::int64_t>(progress.next_epoch));
    file.set_attribute("best_val_epoch", static_cast<std::int64_t>(progress.best_val_epoch));
    TrainingProgress copy = progress;
    for (const auto& [name, value] : accuracy_fields(copy)) file.set_attribute(name, *value);
    file.set_attribute("adam_steps", optimizer.steps());
    file.create_group("/params");
    file.create_group("/adam_m");
    file.create_group("/adam_v");
    const auto& params = optimizer.parameters();
    for (std::size_t i = 0; i < params.size(); ++i) {
      write_matrix(file, "/params/" + params[i]->name, params[i]->value);
      write_matrix(file, "/adam_m/" + params[i]->name, optimizer.first_moments()[i]);
      write_matrix(file, "/adam_v/" + params[i]->name, optimizer.second_moments()[i]);
    }
  }
  sync_path(partial, O_RDONLY);
  if (on_written) on_written();
  std::error_code error;
  fs::rename(partial, path, error);
  NJ_REQUIRE(!error, "{}: cannot rename from {}: {}", path, partial, error.message());
  sync_path(parent_folder(path), O_RDONLY | O_DIRECTORY);
}

TrainingProgress load_checkpoint(const std::string& path, const RunIdentity& run, Adam& optimizer) {
  const auto file = hdf5::File::open_read(path);
  NJ_REQUIRE(file.has_attribute("format") && file.string_attribute("format") == kFormat,
             "{}: not a NeutronJittor checkpoint (no '{}' format attribute)", path, kFormat);
  RunIdentity stored;
  // Quoted into a one-line error: control characters escaped.
  for (const IdentityPart& part : kIdentityParts) stored.*part.field = printable(file.string_attribute(part.name));
  const std::string differences = describe_differences(stored, run);
  if (!differences.empty())
    throw CheckpointMismatch(fmt::format("{}: written by a different run: {}", path, differences));

  TrainingProgress progress;
  const std::int64_t next_epoch = file.int_attribute("next_epoch");
  const std::int64_t best_val_epoch = file.int_attribute("best_val_epoch");
  const std::int64_t steps = file.int_attribute("adam_steps");
  NJ_REQUIRE(next_epoch >= 0 && next_epoch <= UINT32_MAX && best_val_epoch >= 0 &&
                 (best_val_epoch < next_epoch || best_val_epoch == 0) && steps >= 0,
             "{}: inconsistent progress (next epoch {}, best validation epoch {}, Adam steps {})", path, next_epoch,
             best_val_epoch, steps);
  progress.next_epoch = static_cast<std::uint32_t>(next_epoch);
  progress.best_val_epoch = static_cast<std::uint32_t>(best_val_epoch);
  for (const auto& [name, value] : accuracy_fields(progress)) *value = file.float_attribute(name);

  // Everything is read before anything is replaced, so that a damaged file leaves the model as it was.
  const auto& params = optimizer.parameters();
  std::vector<std::vector<float>> values(params.size());
  std::vector<std::vector<float>> first(params.size());
  std::vector<std::vector<float>> second(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    read_matrix(file, "/params/" + params[i]->name, params[i]->value, values[i]);
    read_matrix(file, "/adam_m/" + params[i]->name, optimizer.first_moments()[i], first[i]);
    read_matrix(file, "/adam_v/" + params[i]->name, optimizer.second_moments()[i], second[i]);
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::copy(values[i].begin(), values[i].end(), params[i]->value.data());
    std::copy(first[i].begin(), first[i].end(), optimizer.first_moments()[i].data());
    std::copy(second[i].begin(), second[i].end(), optimizer.second_moments()[i].data());
  }
  optimizer.set_steps(steps);
  return progress;
}

void broadcast_training_state(Communicator& comm, int root, TrainingProgress& progress, Adam& optimizer) {
  if (comm.size() == 1) return;
  std::int64_t steps = optimizer.steps();
  comm.broadcast(bytes_of(std::span(&progress, 1)), root);
  comm.broadcast(bytes_of(std::span(&steps, 1)), root);
  optimizer.set_steps(steps);
  const auto& params = optimizer.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    comm.broadcast(bytes_of(params[i]->value.span()), root);
    comm.broadcast(bytes_of(optimizer.first_moments()[i].span()), root);
    comm.broadcast(bytes_of(optimizer.second_moments()[i].span()), root);
  }
}

CheckpointFolder::CheckpointFolder(std::string path) : path_(std::move(path)) {
  std::error_code error;
  fs::create_directories(path_, error);
  NJ_REQUIRE(!error && fs::is_directory(path_), "--checkpoint-dir {}: cannot create the folder: {}", path_,
             error ? error.message() : "a file of that name exists");
}

std::string CheckpointFolder::file_for(std::uint32_t epochs_done) const {
  return (fs::path(path_) / fmt::format("checkpoint-{:06d}.h5", epochs_done)).string();
}

std::vector<std::string> CheckpointFolder::checkpoints() const {
  static const std::regex name(R"(checkpoint-(\d+)\.h5)");
  std::vector<std::pair<std::uint64_t, std::string>> found;
  for (const auto& entry : fs::directory_iterator(path_)) {
    const std::string file = entry.path().filename().string();
    std::smatch match;
    if (entry.is_regular_file() && std::regex_match(file, match, name)) {
      found.emplace_back(std::stoull(match[1]), entry.path().string());
    }
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  std::vector<std::string> paths;
  for (auto& [epochs, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::string CheckpointFolder::save(const RunIdentity& run, const TrainingProgress& progress, const Adam& optimizer,
                                   const std::function<void()>& on_written) const {
  const std::string path = file_for(progress.next_epoch);
  save_checkpoint(path, run, progress, optimizer, on_written);
  const std::vector<std::string> all = checkpoints();
  for (std::size_t i = kKept; i < all.size(); ++i) fs::remove(all[i]);
  return path;
}

std::optional<CheckpointFolder::Resumed> CheckpointFolder::resume(const RunIdentity& run, Adam& optimizer) const {
  for (const std::string& path : checkpoints()) {
    try {
      return Resumed{path, load_checkpoint(path, run, optimizer)};
    } catch (const CheckpointMismatch&) {
      throw;
    } catch (const Error& e) {
      spdlog::warn("skipping a damaged checkpoint: {}", e.what());
    }
  }
  return std::nullopt;
}

}  // namespace nj
