#include "nj/train/checkpoint.hpp"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>

#include "nj/core/printable.hpp"
#include "nj/io/hdf5.hpp"

namespace nj {
namespace {

namespace fs = std::filesystem;

// Written into every checkpoint, followed by the format's number; a file without it is not one of ours.
constexpr std::string_view kFormatPrefix = "nj-checkpoint ";

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

// The model's options, one attribute each, beside its description: what a run that does not give them takes.
void write_model_options(hdf5::File& file, const ModelConfig& model) {
  file.set_attribute("model_kind", std::string(to_string(model.kind)));
  file.set_attribute("model_layers", std::int64_t{model.layers});
  file.set_attribute("model_hidden", std::int64_t{model.hidden});
  file.set_attribute("model_heads", std::int64_t{model.heads});
  file.set_attribute("model_output_heads", std::int64_t{model.output_heads});
  file.set_attribute("model_activation", std::string(to_string(model.activation)));
  file.set_attribute("model_dropout", double{model.dropout});
  file.set_attribute("model_attention_dropout", double{model.attention_dropout});
  file.set_attribute("model_gin_eps", double{model.gin_eps});
  file.set_attribute("model_gin_train_eps", std::int64_t{model.gin_train_eps ? 1 : 0});
  file.set_attribute("model_propagation_steps", std::int64_t{model.propagation_steps});
  file.set_attribute("model_teleport", double{model.teleport});
  file.set_attribute("model_seed", static_cast<std::int64_t>(model.seed));  // the seed's 64 bits
}

void warn_graph_not_recorded(const std::string& path) {
  spdlog::warn("{}: records no graph (a checkpoint of format 2 or older): cannot check that it was trained on this one",
               path);
}

// "graph 'cora' (2708 vertices, 10556 edges)"
std::string describe_graph(const GraphIdentity& graph) {
  return fmt::format("{} ({} vertices, {} edges)",
                     graph.name.empty() ? std::string("a graph without a name") : fmt::format("graph '{}'", graph.name),
                     graph.vertices, graph.edges);
}

// "c.h5 was trained on graph 'cora' (...), not on graph 'citeseer' (...): the name, vertex count and edge count
// differ", or, where only the edges tell two graphs apart, that the structure differs.
std::string graph_difference(const std::string& path, const GraphIdentity& trained, const GraphIdentity& here) {
  std::vector<std::string> parts;
  if (trained.name != here.name) parts.emplace_back("name");
  if (trained.vertices != here.vertices) parts.emplace_back("vertex count");
  // Edges of another count are another structure: it is named where the counts cannot tell.
  if (trained.edges != here.edges) {
    parts.emplace_back("edge count");
  } else if (trained.structure != here.structure) {
    parts.emplace_back("structure");
  }
  const bool structure_alone = parts.size() == 1 && parts.front() == "structure";
  const std::string what =
      parts.size() == 1 ? parts.front()
                        : fmt::format("{} and {}", fmt::join(parts.begin(), parts.end() - 1, ", "), parts.back());
  return fmt::format("{} was trained on {}, not on {}: the {} {}", path, describe_graph(trained),
                     structure_alone ? std::string("this graph of the same name and counts") : describe_graph(here),
                     what, parts.size() == 1 ? "differs" : "differ");
}

// The graph's identity, one attribute each; the structure hash as 16 hexadecimal digits, as nj prints it.
void write_graph(hdf5::File& file, const GraphIdentity& graph) {
  file.set_attribute("graph_name", graph.name);
  file.set_attribute("graph_vertices", graph.vertices);
  file.set_attribute("graph_edges", graph.edges);
  file.set_attribute("graph_structure", fmt::format("{:016x}", graph.structure));
}

std::optional<GraphIdentity> read_graph(const hdf5::File& file) {
  if (!file.has_attribute("graph_name")) return std::nullopt;
  GraphIdentity graph;
  graph.name = printable(file.string_attribute("graph_name"));
  graph.vertices = file.int_attribute("graph_vertices");
  graph.edges = file.int_attribute("graph_edges");
  const std::string structure = file.string_attribute("graph_structure");
  const auto [end, error] = std::from_chars(structure.data(), structure.data() + structure.size(), graph.structure, 16);
  NJ_REQUIRE(graph.vertices >= 0 && graph.edges >= 0 && structure.size() == 16 && error == std::errc() &&
                 end == structure.data() + structure.size(),
             "{}: attributes graph_vertices, graph_edges and graph_structure must be counts and 16 hexadecimal "
             "digits, got {}, {} and '{}'",
             file.path(), graph.vertices, graph.edges, printable(structure));
  return graph;
}

int positive_int_attribute(const hdf5::File& file, const std::string& key) {
  const std::int64_t value = file.int_attribute(key);
  NJ_REQUIRE(value >= 1 && value <= std::numeric_limits<int>::max(), "{}: attribute {} must be positive, got {}",
             file.path(), key, value);
  return static_cast<int>(value);
}

float probability_attribute(const hdf5::File& file, const std::string& key) {
  const double value = file.float_attribute(key);
  NJ_REQUIRE(value >= 0.0 && value < 1.0, "{}: attribute {} must be in [0, 1), got {}", file.path(), key, value);
  return static_cast<float>(value);
}

ModelConfig read_model_options(const hdf5::File& file) {
  ModelConfig model;
  try {
    model.kind = parse_model_kind(file.string_attribute("model_kind"));
    model.activation = parse_activation(file.string_attribute("model_activation"));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", file.path(), printable(e.what())));
  }
  model.layers = positive_int_attribute(file, "model_layers");
  model.hidden = positive_int_attribute(file, "model_hidden");
  model.heads = positive_int_attribute(file, "model_heads");
  model.output_heads = positive_int_attribute(file, "model_output_heads");
  model.dropout = probability_attribute(file, "model_dropout");
  model.attention_dropout = probability_attribute(file, "model_attention_dropout");
  // Checkpoints of GCN and GAT written before GIN and APPNP existed lack their options, which those models ignore.
  if (file.has_attribute("model_gin_eps")) model.gin_eps = static_cast<float>(file.float_attribute("model_gin_eps"));
  if (file.has_attribute("model_gin_train_eps")) model.gin_train_eps = file.int_attribute("model_gin_train_eps") != 0;
  if (file.has_attribute("model_propagation_steps")) {
    model.propagation_steps = positive_int_attribute(file, "model_propagation_steps");
  }
  if (file.has_attribute("model_teleport")) {
    const double teleport = file.float_attribute("model_teleport");
    NJ_REQUIRE(teleport >= 0.0 && teleport <= 1.0, "{}: attribute model_teleport must be in [0, 1], got {}",
               file.path(), teleport);
    model.teleport = static_cast<float>(teleport);
  }
  model.seed = static_cast<std::uint64_t>(file.int_attribute("model_seed"));
  return model;
}

// Format 1 described every model option: "gcn, 2 layers, hidden 16, heads 8, output heads 1, activation relu,
// dropout 0.5, attention dropout 0.6, seed 0". Nothing where the text is not such a description.
std::optional<ModelConfig> parse_format1_model(const std::string& text) {
  static const std::regex form(
      R"((gcn|gat), (\d{1,9}) layers, hidden (\d{1,9}), heads (\d{1,9}), output heads (\d{1,9}), activation )"
      R"((relu|elu), dropout ([0-9.e+-]{1,20}), attention dropout ([0-9.e+-]{1,20}), seed (\d{1,20}))");
  std::smatch match;
  if (!std::regex_match(text, match, form)) return std::nullopt;
  try {
    ModelConfig model;
    model.kind = parse_model_kind(match[1]);
    model.layers = std::stoi(match[2]);
    model.hidden = std::stoi(match[3]);
    model.heads = std::stoi(match[4]);
    model.output_heads = std::stoi(match[5]);
    model.activation = parse_activation(match[6]);
    model.dropout = std::stof(match[7]);
    model.attention_dropout = std::stof(match[8]);
    model.seed = std::stoull(match[9]);
    return model;
  } catch (const std::exception&) {  // a number beyond its type
    return std::nullopt;
  }
}

// Format 1 named the learning rate in the optimizer's description: "Adam lr 0.01, betas ...". Splits it off, so
// that the description is this format's; NaN where it is not there.
float split_format1_lr(std::string& optimizer) {
  static const std::regex form(R"(Adam lr ([^,]{1,30}), (.*))");
  std::smatch match;
  if (!std::regex_match(optimizer, match, form)) return std::numeric_limits<float>::quiet_NaN();
  try {
    const float lr = std::stof(match[1]);
    optimizer = "Adam " + match[2].str();
    return lr;
  } catch (const std::exception&) {
    return std::numeric_limits<float>::quiet_NaN();
  }
}

// The format number that the `format` attribute gives; throws where the file is not a checkpoint this build reads.
int format_of(const hdf5::File& file) {
  const std::string format = file.has_attribute("format") ? file.string_attribute("format") : "";
  NJ_REQUIRE(format.starts_with(kFormatPrefix), "{}: not a NeutronJittor checkpoint (no '{}N' format attribute)",
             file.path(), kFormatPrefix);
  const std::string number = format.substr(kFormatPrefix.size());
  int parsed = 0;
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), parsed);
  NJ_REQUIRE(error == std::errc() && end == number.data() + number.size() && parsed >= 1 && parsed <= kCheckpointFormat,
             "{}: checkpoint format '{}' is not one this build reads (1 to {}): written by a newer nj?", file.path(),
             printable(number), kCheckpointFormat);
  return parsed;
}

// Each parameter's name in a checkpoint of `format` written for a model of `config`: before format 3, the layers were
// numbered as built (names_by_built_layer).
std::vector<std::string> names_in_file(const std::vector<Parameter*>& params, int format, const ModelConfig& config) {
  const auto before = format >= 3 ? std::map<std::string, std::string>() : names_by_built_layer(config);
  std::vector<std::string> names;
  for (const Parameter* p : params) {
    const auto old = before.find(p->name);
    names.push_back(old == before.end() ? p->name : old->second);
  }
  return names;
}

// Where training stood. Format 1 counted the best validation epoch from 0; this format counts epochs from 1, with
// 0 for none evaluated.
TrainingProgress read_progress(const hdf5::File& file, int format) {
  TrainingProgress progress;
  for (const auto& [name, value] : accuracy_fields(progress)) *value = file.float_attribute(name);
  const std::int64_t done = file.int_attribute(format == 1 ? "next_epoch" : "epochs_done");
  const std::int64_t best = file.int_attribute("best_val_epoch");
  const bool consistent = format == 1 ? best >= 0 && (best < done || best == 0) : best >= 0 && best <= done;
  NJ_REQUIRE(done >= 0 && done <= UINT32_MAX && consistent,
             "{}: inconsistent progress ({} epochs done, best validation at epoch {})", file.path(), done,
             format == 1 ? best + 1 : best);
  progress.next_epoch = static_cast<std::uint32_t>(done);
  progress.best_val_epoch = static_cast<std::uint32_t>(format == 1 || best == 0 ? best : best - 1);
  return progress;
}

// The part of `run`'s identity that a checkpoint at `path` must match, after checking its graph as `other_graph`
// says: another graph allowed (or one not recorded) has its own dataset and partitioning, which are not compared.
RunIdentity identity_to_compare(const std::string& path, const RunIdentity& checkpoint, const RunIdentity& run,
                                OtherGraph other_graph) {
  RunIdentity compared = run;
  if (other_graph == OtherGraph::kDifferentRun) {
    if (!checkpoint.graph) warn_graph_not_recorded(path);
    return compared;
  }
  NJ_EXPECTS(run.graph.has_value(), "a run that may go on from another graph knows its own");
  check_graph(path, checkpoint.graph, *run.graph, other_graph);
  if (other_graph == OtherGraph::kAllowed && checkpoint.graph != run.graph) {
    compared.dataset = checkpoint.dataset;
    compared.partitioning = checkpoint.partitioning;
    compared.graph = checkpoint.graph;
  }
  return compared;
}

}  // namespace

GraphIdentity identify_graph(const Shard& shard, Communicator& comm) {
  const std::uint64_t own = owned_edges_hash(shard.local);
  // Summed in two 32-bit halves, so that no rank count overflows a signed sum; the carry wraps as the hash does.
  std::vector<std::int64_t> halves = {static_cast<std::int64_t>(own & 0xFFFFFFFFU),
                                      static_cast<std::int64_t>(own >> 32U)};
  comm.all_reduce_sum(halves);
  const std::uint64_t structure =
      static_cast<std::uint64_t>(halves[0]) + (static_cast<std::uint64_t>(halves[1]) << 32U);
  return {.name = shard.name, .vertices = shard.global_vertices, .edges = shard.global_edges, .structure = structure};
}

void check_graph(const std::string& path, const std::optional<GraphIdentity>& trained, const GraphIdentity& here,
                 OtherGraph policy) {
  NJ_EXPECTS(policy != OtherGraph::kDifferentRun, "a different run's graph is one of its differences");
  if (!trained) {
    if (policy != OtherGraph::kAllowed) warn_graph_not_recorded(path);
    return;
  }
  if (*trained == here) return;
  const std::string difference = graph_difference(path, *trained, here);
  if (policy == OtherGraph::kRefused)
    throw CheckpointMismatch(difference + "; give --allow-other-graph to use it anyway");
  spdlog::warn("{}; using it anyway (--allow-other-graph)", difference);
}

RunIdentity identify_run(const ModelConfig& model, const Shard& shard, const GraphIdentity& graph,
                         const std::string& feature_norm, const TrainOptions& options) {
  RunIdentity run;
  run.model = describe_model(model);
  run.dataset =
      fmt::format("'{}': {} vertices, {} edges, {} features, {} classes, {} training vertices, {} features", shard.name,
                  shard.global_vertices, shard.global_edges, shard.features.cols(), shard.num_classes,
                  shard.global_train, feature_norm == "none" ? "raw" : feature_norm + "-normalised");
  const PartitionInfo& p = shard.partition;
  run.partitioning = p.parts == 1 ? std::string("one rank, the whole graph")
                                  : fmt::format("{} ranks, {} partition, seed {}, edge cut {}, owned {}", p.parts,
                                                p.method, p.seed, p.edge_cut, fmt::join(p.owned, "/"));
  run.optimizer = fmt::format("Adam betas {} {}, eps {}, weight decay {} on {}", options.adam.beta1, options.adam.beta2,
                              options.adam.eps, options.adam.weight_decay,
                              options.decay_scope == WeightDecayScope::kAll ? "all layers" : "the first layer");
  run.graph = graph;
  run.model_options = model;
  run.lr = options.adam.lr;
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
  // The dataset's description names the graph and its counts; the structure is the graph's alone.
  if (checkpoint.graph && run.graph && checkpoint.graph->structure != run.graph->structure) {
    differences.push_back(fmt::format("graph structure: checkpoint has '{:016x}', this run has '{:016x}'",
                                      checkpoint.graph->structure, run.graph->structure));
  }
  return fmt::format("{}", fmt::join(differences, "; "));
}

void save_checkpoint(const std::string& path, const RunIdentity& run, const TrainingProgress& progress,
                     const Adam& optimizer, const std::function<void()>& on_written) {
  const std::string partial = path + ".partial";
  {
    auto file = hdf5::File::create(partial);
    file.set_attribute("format", fmt::format("{}{}", kFormatPrefix, kCheckpointFormat));
    for (const IdentityPart& part : kIdentityParts) file.set_attribute(part.name, run.*part.field);
    if (run.graph) write_graph(file, *run.graph);
    write_model_options(file, run.model_options);
    file.set_attribute("lr", double{run.lr});
    file.set_attribute("epochs_done", static_cast<std::int64_t>(progress.next_epoch));
    file.set_attribute("best_val_epoch",
                       progress.best_val_accuracy.valid() ? static_cast<std::int64_t>(progress.best_val_epoch) + 1 : 0);
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

bool is_checkpoint_file(const std::string& path) {
  try {
    const auto file = hdf5::File::open_read(path);
    return file.has_attribute("format") && file.string_attribute("format").starts_with(kFormatPrefix);
  } catch (const InputError&) {
    return false;
  }
}

CheckpointSummary read_checkpoint_summary(const std::string& path) {
  const auto file = hdf5::File::open_read(path);
  CheckpointSummary summary;
  summary.format = format_of(file);
  RunIdentity& run = summary.run;
  // Quoted into a one-line error: control characters escaped.
  for (const IdentityPart& part : kIdentityParts) run.*part.field = printable(file.string_attribute(part.name));
  if (summary.format == 1) {
    summary.model = parse_format1_model(run.model);
    if (summary.model) run.model = describe_model(*summary.model);
    run.lr = split_format1_lr(run.optimizer);
  } else {
    summary.model = read_model_options(file);
    run.lr = static_cast<float>(file.float_attribute("lr"));
  }
  if (summary.model) run.model_options = *summary.model;
  if (summary.format >= 3) run.graph = read_graph(file);
  summary.progress = read_progress(file, summary.format);
  summary.adam_steps = file.int_attribute("adam_steps");
  NJ_REQUIRE(summary.adam_steps >= 0, "{}: attribute adam_steps must not be negative, got {}", path,
             summary.adam_steps);
  for (const std::string& name : file.members("/params")) {
    const std::vector<hsize_t> shape = file.shape("/params/" + name);
    summary.parameters.emplace_back(printable(name), std::vector<std::int64_t>(shape.begin(), shape.end()));
  }
  return summary;
}

TrainingProgress load_checkpoint(const std::string& path, const RunIdentity& run, Adam& optimizer,
                                 OtherGraph other_graph) {
  const CheckpointSummary summary = read_checkpoint_summary(path);
  const std::string differences =
      describe_differences(summary.run, identity_to_compare(path, summary.run, run, other_graph));
  if (!differences.empty())
    throw CheckpointMismatch(fmt::format("{}: written by a different run: {}", path, differences));
  if (!std::isnan(summary.run.lr) && summary.run.lr != run.lr) {
    spdlog::info("{}: trained at lr {}, going on at lr {} (fine-tuning)", path, summary.run.lr, run.lr);
  }
  const auto file = hdf5::File::open_read(path);
  const TrainingProgress& progress = summary.progress;
  const std::int64_t steps = summary.adam_steps;

  // Everything is read before anything is replaced, so that a damaged file leaves the model as it was.
  const auto& params = optimizer.parameters();
  const std::vector<std::string> names = names_in_file(params, summary.format, run.model_options);
  std::vector<std::vector<float>> values(params.size());
  std::vector<std::vector<float>> first(params.size());
  std::vector<std::vector<float>> second(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    read_matrix(file, "/params/" + names[i], params[i]->value, values[i]);
    read_matrix(file, "/adam_m/" + names[i], optimizer.first_moments()[i], first[i]);
    read_matrix(file, "/adam_v/" + names[i], optimizer.second_moments()[i], second[i]);
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::copy(values[i].begin(), values[i].end(), params[i]->value.data());
    std::copy(first[i].begin(), first[i].end(), optimizer.first_moments()[i].data());
    std::copy(second[i].begin(), second[i].end(), optimizer.second_moments()[i].data());
  }
  optimizer.set_steps(steps);
  return progress;
}

std::string feature_norm_of(const RunIdentity& run) {
  return run.dataset.ends_with("row-normalised features") ? "row" : "none";
}

void load_weights(const std::string& path, Model& model) {
  const auto file = hdf5::File::open_read(path);
  const std::vector<Parameter*> params = model.parameters();
  const std::vector<std::string> names = names_in_file(params, format_of(file), model.config());
  // Every shape is checked before anything is read, and everything read before anything is replaced.
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    const std::string name = "/params/" + names[i];
    NJ_REQUIRE(file.exists(name), "{}: has no parameter {}: written for another model", path, names[i]);
    const std::vector<hsize_t> shape = file.shape(name);
    const std::vector<hsize_t> expected = {static_cast<hsize_t>(p.value.rows()), static_cast<hsize_t>(p.value.cols())};
    NJ_REQUIRE(shape == expected,
               "{}: its model does not fit this data: parameter {} is {} in the checkpoint and {} here (the input "
               "features and the classes must be the training data's)",
               path, names[i], fmt::join(shape, "x"), fmt::join(expected, "x"));
  }
  std::vector<std::vector<float>> values(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) read_matrix(file, "/params/" + names[i], params[i]->value, values[i]);
  for (std::size_t i = 0; i < params.size(); ++i)
    std::copy(values[i].begin(), values[i].end(), params[i]->value.data());
}

void broadcast_weights(Communicator& comm, int root, Model& model) {
  if (comm.size() == 1) return;
  for (Parameter* p : model.parameters()) comm.broadcast(bytes_of(p->value.span()), root);
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

std::string CheckpointFolder::best_file() const { return (fs::path(path_) / "best.h5").string(); }

std::string CheckpointFolder::save_best(const RunIdentity& run, const TrainingProgress& progress,
                                        const Adam& optimizer) const {
  save_checkpoint(best_file(), run, progress, optimizer);
  return best_file();
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

std::optional<CheckpointSummary> CheckpointFolder::newest_summary() const {
  for (const std::string& path : checkpoints()) {
    try {
      return read_checkpoint_summary(path);
    } catch (const Error&) {
    }
  }
  return std::nullopt;
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
