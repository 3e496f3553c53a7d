#pragma once
// Checkpoints in HDF5: every parameter, Adam's moments and step count, where training stands (the next epoch,
// the best validation so far) and what the run is (model, dataset, partitioning, optimizer), so that a
// checkpoint is never resumed by a different run. A checkpoint is written under a temporary name, flushed to
// disk and renamed, so that a process killed while writing leaves the previous checkpoint as it was.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/core/error.hpp"
#include "nj/graph/shard.hpp"
#include "nj/model/model.hpp"
#include "nj/train/adam.hpp"
#include "nj/train/trainer.hpp"

namespace nj {

// The graph a model was trained on: its name, its counts and a hash of its edges in the dataset's global vertex ids
// (owned_edges_hash summed over the ranks), which no partitioning, vertex order or number of ranks changes. What
// keeps a checkpoint's weights from being used on another graph unnoticed.
struct GraphIdentity {
  std::string name;
  std::int64_t vertices = 0;
  std::int64_t edges = 0;
  std::uint64_t structure = 0;

  bool operator==(const GraphIdentity&) const = default;
};
// The identity of the graph that `shard` is this rank's part of: a collective over `comm`, whose ranks hold the
// parts of one partition.
GraphIdentity identify_graph(const Shard& shard, Communicator& comm);

// What a run must share with a checkpoint to resume from it, one description per part, and the graph. Resuming
// under a different partitioning would change how sums are rounded, and under a different optimizer the
// trajectory. The model's description names only the options its kind uses (a GCN's has no heads), and the
// optimizer's leaves out the learning rate, which fine-tuning changes.
struct RunIdentity {
  std::string model;
  std::string dataset;
  std::string partitioning;
  std::string optimizer;
  // Absent from checkpoints written before format 3.
  std::optional<GraphIdentity> graph;
  // Recorded beside the identity, not compared: every model option, so that a run that does not give them can
  // take them from the checkpoint, and the learning rate.
  ModelConfig model_options{};
  float lr = 0.0F;
};
// `feature_norm` is how the run normalises features after loading ("none", "row").
RunIdentity identify_run(const ModelConfig& model, const Shard& shard, const GraphIdentity& graph,
                         const std::string& feature_norm, const TrainOptions& options);
// One line per part that differs, "model: checkpoint has '...', this run has '...'", joined by "; ", the graph
// where both record one. Empty when they match.
std::string describe_differences(const RunIdentity& checkpoint, const RunIdentity& run);

// A checkpoint written by a different run, or trained on another graph: resuming from an older checkpoint of the
// same folder would not help, so a folder's resume stops at it.
class CheckpointMismatch : public InputError {
 public:
  using InputError::InputError;
};

// What becomes of a checkpoint trained on another graph than this run's.
enum class OtherGraph {
  kDifferentRun,  // one of the differences of a different run (--resume: the run goes on as it was)
  kRefused,       // refused on its own, naming what differs (nj infer, --load-checkpoint)
  kAllowed,       // used with a warning saying what differs (--allow-other-graph: fine-tuning, transfer)
};
// Checks the graph a checkpoint at `path` records (`trained`) against `here` for nj infer and --load-checkpoint:
// throws CheckpointMismatch naming what differs (the name, a count, or the structure alone) where `policy` refuses
// it, and logs that as a warning where it allows it. A checkpoint that records no graph (before format 3) is
// taken with a warning that it cannot be checked.
void check_graph(const std::string& path, const std::optional<GraphIdentity>& trained, const GraphIdentity& here,
                 OtherGraph policy);

// Writes the optimizer's parameters and moments with the run's identity and progress. `on_written` runs once
// the data is on disk and before it takes its name: where tests kill the process.
void save_checkpoint(const std::string& path, const RunIdentity& run, const TrainingProgress& progress,
                     const Adam& optimizer, const std::function<void()>& on_written = {});
// Reads a checkpoint into the optimizer's parameters and moments, all or nothing, and returns its progress; logs
// a learning rate other than the checkpoint's (fine-tuning). Throws CheckpointMismatch naming every part of the
// identity that differs, and InputError naming the file and the object where it is not a checkpoint, is damaged,
// or holds a non-finite value. Another graph is as `other_graph` says (check_graph); where it is allowed and
// differs, the dataset and the partitioning, which describe that graph, are not compared.
TrainingProgress load_checkpoint(const std::string& path, const RunIdentity& run, Adam& optimizer,
                                 OtherGraph other_graph = OtherGraph::kDifferentRun);

// The checkpoint format this build writes. It reads the ones before it too: format 1 counted the best validation
// epoch from 0 and described every model option and the learning rate in the identity; formats 1 and 2 numbered the
// layers as the model builds them (names_by_built_layer) and recorded no graph.
inline constexpr int kCheckpointFormat = 3;

// What a checkpoint records besides the arrays, read and checked without them.
struct CheckpointSummary {
  int format = kCheckpointFormat;
  RunIdentity run;                   // its descriptions as this build writes them
  std::optional<ModelConfig> model;  // every model option; absent from a format 1 file not written by nj train
  TrainingProgress progress;
  std::int64_t adam_steps = 0;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> parameters;  // name and shape, in the file's order
};
// True when `path` is an HDF5 file that says it is a checkpoint (of any format).
bool is_checkpoint_file(const std::string& path);
CheckpointSummary read_checkpoint_summary(const std::string& path);

// How the run that wrote a checkpoint normalised its features after loading ("none", "row"), as its dataset's
// description records it: what inference from it must do too.
std::string feature_norm_of(const RunIdentity& run);

// Reads only a checkpoint's parameters into `model`, all or nothing: what inference needs from any training run of
// this model, whatever its optimizer, partitioning or progress. Throws InputError naming the file where a parameter
// is missing, of another shape (the model does not fit the data) or not finite.
void load_weights(const std::string& path, Model& model);
// Makes every rank's parameter values rank `root`'s.
void broadcast_weights(Communicator& comm, int root, Model& model);

// Makes every rank's parameters, moments and progress rank `root`'s: the one rank that read a checkpoint
// hands it to the others, which need not see the file.
void broadcast_training_state(Communicator& comm, int root, TrainingProgress& progress, Adam& optimizer);

// --checkpoint-dir: one checkpoint per saved epoch, checkpoint-<epochs done>.h5, of which the newest two are
// kept (one to resume from while the next is written).
class CheckpointFolder {
 public:
  static constexpr int kKept = 2;
  // Creates the folder where it is missing.
  explicit CheckpointFolder(std::string path);

  const std::string& path() const { return path_; }
  std::string file_for(std::uint32_t epochs_done) const;
  // Saves the state after progress.next_epoch epochs, then removes all but the newest kKept checkpoints.
  std::string save(const RunIdentity& run, const TrainingProgress& progress, const Adam& optimizer,
                   const std::function<void()>& on_written = {}) const;
  // The checkpoint of the best validation accuracy (--keep-best), beside the numbered ones and never removed by them.
  std::string best_file() const;
  std::string save_best(const RunIdentity& run, const TrainingProgress& progress, const Adam& optimizer) const;
  // Checkpoints in the folder, newest first.
  std::vector<std::string> checkpoints() const;
  // The newest checkpoint whose summary reads, without a warning for those that do not (resume gives them);
  // nothing where there is none.
  std::optional<CheckpointSummary> newest_summary() const;

  struct Resumed {
    std::string path;
    TrainingProgress progress;
  };
  // Loads the newest checkpoint that reads, skipping damaged ones with a warning; nothing where the folder has
  // none. A checkpoint of a different run is an error (CheckpointMismatch).
  std::optional<Resumed> resume(const RunIdentity& run, Adam& optimizer) const;

 private:
  std::string path_;
};

}  // namespace nj
