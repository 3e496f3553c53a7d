// Checkpoints: what they restore, what they refuse, and the folder that --checkpoint-dir keeps.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "nj/io/dataset_file.hpp"
#include "nj/io/hdf5.hpp"
#include "nj/train/checkpoint.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

ModelConfig gcn() {
  ModelConfig c;
  c.hidden = 4;
  return c;
}

// A model, its optimizer and its progress, with values a checkpoint must carry exactly.
struct TrainingState {
  explicit TrainingState(const ModelConfig& config, float fill) : model(config, 6, 3), adam(model.parameters(), {}) {
    float value = fill;
    for (Parameter* p : model.parameters()) {
      for (float& w : p->value.span()) w = (value += 0.25F);
    }
    for (Matrix& m : adam.first_moments()) m.fill(fill + 1.0F);
    for (Matrix& v : adam.second_moments()) v.fill(fill + 2.0F);
    adam.set_steps(static_cast<std::int64_t>(fill) + 3);
    progress.next_epoch = 5;
    progress.best_val_epoch = 1;
    progress.best_val_accuracy = {0.5, 0.25, 0.125};
    progress.final_accuracy = {0.75, Accuracy::kNone, 0.0};
  }
  std::vector<std::vector<float>> weights() {
    std::vector<std::vector<float>> all;
    for (const Parameter* p : model.parameters()) all.emplace_back(p->value.span().begin(), p->value.span().end());
    return all;
  }
  Model model;
  Adam adam;
  TrainingProgress progress;
};

const RunIdentity kRun{"gcn", "cora", "one rank", "Adam"};

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

class CheckpointTest : public ::testing::Test {
 protected:
  test::TempDir dir;
};

TEST_F(CheckpointTest, RestoresWeightsMomentsStepsAndProgressExactly) {
  TrainingState saved(gcn(), 1.0F);
  save_checkpoint(dir.file("c.h5"), kRun, saved.progress, saved.adam);
  TrainingState loaded(gcn(), 9.0F);
  const TrainingProgress progress = load_checkpoint(dir.file("c.h5"), kRun, loaded.adam);
  EXPECT_EQ(loaded.weights(), saved.weights());
  for (std::size_t i = 0; i < saved.adam.parameters().size(); ++i) {
    EXPECT_EQ(loaded.adam.first_moments()[i].data()[0], 2.0F);
    EXPECT_EQ(loaded.adam.second_moments()[i].data()[0], 3.0F);
  }
  EXPECT_EQ(loaded.adam.steps(), 4);
  EXPECT_EQ(progress.next_epoch, 5U);
  EXPECT_EQ(progress.best_val_epoch, 1U);
  EXPECT_EQ(progress.best_val_accuracy.test, 0.125);
  EXPECT_TRUE(std::isnan(progress.final_accuracy.val));
  EXPECT_FALSE(std::filesystem::exists(dir.file("c.h5.partial")));
}

TEST_F(CheckpointTest, ADifferentRunIsRefusedNamingEveryPartThatDiffers) {
  TrainingState state(gcn(), 1.0F);
  save_checkpoint(dir.file("c.h5"), kRun, state.progress, state.adam);
  RunIdentity other = kRun;
  other.dataset = "citeseer";
  other.partitioning = "2 ranks";
  try {
    load_checkpoint(dir.file("c.h5"), other, state.adam);
    FAIL() << "a checkpoint of another dataset was loaded";
  } catch (const CheckpointMismatch& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("dataset: checkpoint has 'cora', this run has 'citeseer'"), std::string::npos) << message;
    EXPECT_NE(message.find("partitioning: checkpoint has 'one rank', this run has '2 ranks'"), std::string::npos)
        << message;
    EXPECT_EQ(message.find("model:"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST_F(CheckpointTest, IdentityTellsModelsDatasetsPartitionsAndOptimizersApart) {
  const Dataset data = test::random_dataset(40, 160, 6, 3, 1);
  const Shard shard = whole_graph_shard(Dataset(data));
  const TrainOptions options;
  const RunIdentity base = identify_run(gcn(), shard, "none", options);
  EXPECT_EQ(describe_differences(base, identify_run(gcn(), shard, "none", options)), "");

  ModelConfig wider = gcn();
  wider.hidden = 8;
  EXPECT_TRUE(describe_differences(base, identify_run(wider, shard, "none", options)).starts_with("model: "));
  EXPECT_TRUE(describe_differences(base, identify_run(gcn(), shard, "row", options)).starts_with("dataset: "));
  TrainOptions faster = options;
  faster.adam.lr = 0.5F;
  EXPECT_TRUE(describe_differences(base, identify_run(gcn(), shard, "none", faster)).starts_with("optimizer: "));
  Shard part = whole_graph_shard(Dataset(data));
  part.partition.parts = 2;
  part.partition.method = "metis";
  EXPECT_TRUE(describe_differences(base, identify_run(gcn(), part, "none", options)).starts_with("partitioning: "));
  // Training for more epochs is what resuming is for.
  TrainOptions longer = options;
  longer.epochs = options.epochs + 100;
  EXPECT_EQ(describe_differences(base, identify_run(gcn(), shard, "none", longer)), "");
}

TEST_F(CheckpointTest, DamagedFilesAreOneLineErrorsThatLeaveTheModelAsItWas) {
  TrainingState state(gcn(), 1.0F);
  save_checkpoint(dir.file("c.h5"), kRun, state.progress, state.adam);
  std::filesystem::copy_file(dir.file("c.h5"), dir.file("truncated.h5"));
  std::filesystem::resize_file(dir.file("truncated.h5"), std::filesystem::file_size(dir.file("c.h5")) - 100);
  write_dataset(dir.file("dataset.h5"), test::random_dataset(20, 40, 6, 3, 1));
  std::ofstream(dir.file("text.h5")) << "not hdf5\n";

  TrainingState target(gcn(), 9.0F);
  const auto before = target.weights();
  for (const char* name : {"truncated.h5", "dataset.h5", "text.h5", "missing.h5"}) {
    const std::string message = message_of([&] { load_checkpoint(dir.file(name), kRun, target.adam); });
    EXPECT_NE(message.find(dir.file(name)), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(target.weights(), before) << name;
  }
  EXPECT_NE(message_of([&] {
              load_checkpoint(dir.file("dataset.h5"), kRun, target.adam);
            }).find("not a NeutronJittor checkpoint"),
            std::string::npos);
}

TEST_F(CheckpointTest, NonFiniteOrMisshapenValuesAreRefusedNamingTheObject) {
  TrainingState state(gcn(), 1.0F);
  const std::string name = state.adam.parameters()[1]->name;
  state.adam.parameters()[1]->value.data()[2] = std::numeric_limits<float>::quiet_NaN();
  save_checkpoint(dir.file("nan.h5"), kRun, state.progress, state.adam);
  TrainingState target(gcn(), 9.0F);
  const std::string nan = message_of([&] { load_checkpoint(dir.file("nan.h5"), kRun, target.adam); });
  EXPECT_NE(nan.find("/params/" + name + ": entry 2 is nan"), std::string::npos) << nan;

  ModelConfig wider = gcn();
  wider.hidden = 8;
  TrainingState other(wider, 1.0F);
  save_checkpoint(dir.file("wide.h5"), kRun, other.progress, other.adam);  // the same identity, on purpose
  const std::string shape = message_of([&] { load_checkpoint(dir.file("wide.h5"), kRun, target.adam); });
  EXPECT_NE(shape.find("shape does not match the model"), std::string::npos) << shape;
}

TEST_F(CheckpointTest, FolderKeepsTheNewestTwoAndResumesFromTheNewest) {
  const CheckpointFolder folder(dir.file("run/checkpoints"));
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("run/checkpoints")));
  TrainingState state(gcn(), 1.0F);
  EXPECT_FALSE(folder.resume(kRun, state.adam).has_value());
  for (std::uint32_t epochs : {2U, 4U, 6U, 10U}) {
    state.progress.next_epoch = epochs;
    state.adam.set_steps(epochs);
    folder.save(kRun, state.progress, state.adam);
  }
  EXPECT_EQ(folder.checkpoints(), (std::vector<std::string>{folder.file_for(10), folder.file_for(6)}));
  TrainingState target(gcn(), 9.0F);
  const auto resumed = folder.resume(kRun, target.adam);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->path, folder.file_for(10));
  EXPECT_EQ(resumed->progress.next_epoch, 10U);
  EXPECT_EQ(target.adam.steps(), 10);
}

// What a process killed while writing leaves: the previous checkpoint, and a partial file that resume ignores.
TEST_F(CheckpointTest, AWriteThatNeverFinishesLeavesThePreviousCheckpoint) {
  const CheckpointFolder folder(dir.file("checkpoints"));
  TrainingState state(gcn(), 1.0F);
  state.progress.next_epoch = 2;
  folder.save(kRun, state.progress, state.adam);
  state.progress.next_epoch = 4;
  struct Killed {};
  EXPECT_THROW(folder.save(kRun, state.progress, state.adam, [] { throw Killed{}; }), Killed);
  EXPECT_TRUE(std::filesystem::exists(folder.file_for(4) + ".partial"));
  TrainingState target(gcn(), 9.0F);
  const auto resumed = folder.resume(kRun, target.adam);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->progress.next_epoch, 2U);
}

TEST_F(CheckpointTest, ResumeSkipsADamagedNewestCheckpointButNotAnotherRuns) {
  const CheckpointFolder folder(dir.file("checkpoints"));
  TrainingState state(gcn(), 1.0F);
  state.progress.next_epoch = 2;
  folder.save(kRun, state.progress, state.adam);
  state.progress.next_epoch = 4;
  folder.save(kRun, state.progress, state.adam);
  std::filesystem::resize_file(folder.file_for(4), 64);
  TrainingState target(gcn(), 9.0F);
  const auto resumed = folder.resume(kRun, target.adam);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->path, folder.file_for(2));

  RunIdentity other = kRun;
  other.model = "gat";
  EXPECT_THROW(folder.resume(other, target.adam), CheckpointMismatch);
}

TEST_F(CheckpointTest, AFileInPlaceOfTheFolderIsAnError) {
  std::ofstream(dir.file("taken")) << "x";
  const std::string message = message_of([&] { CheckpointFolder folder(dir.file("taken")); });
  EXPECT_NE(message.find("--checkpoint-dir " + dir.file("taken")), std::string::npos) << message;
}

}  // namespace
}  // namespace nj
