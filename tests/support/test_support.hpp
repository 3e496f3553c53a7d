#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nj/graph/dataset.hpp"
#include "nj/graph/shard.hpp"
#include "nj/model/model.hpp"

namespace nj::test {

// The shared real-data folder (NJ_DATA_DIR, else ../shared/data beside the source tree), or empty if absent.
std::filesystem::path data_dir();
// Whether the real-graph tests must run: NJ_REQUIRE_DATA set (as CI sets it), so that an absent data folder is a
// failure and not a skip.
bool data_required();
// Skips the calling test when the shared data folder is absent, or fails it where data_required(); use as
// `NJ_SKIP_WITHOUT_DATA();`.
#define NJ_SKIP_WITHOUT_DATA()                                                                     \
  do {                                                                                             \
    if (::nj::test::data_dir().empty()) {                                                          \
      if (::nj::test::data_required()) FAIL() << "shared data folder not found (NJ_REQUIRE_DATA)"; \
      GTEST_SKIP() << "shared data folder not found (set NJ_DATA_DIR)";                            \
    }                                                                                              \
  } while (false)

// How many times longer than in a plain build a test's own time limits allow: NJ_TEST_TIME_SCALE, which the
// sanitizer test presets set since instrumented code runs several times slower; 1 where unset.
double time_scale();

// Whether a sanitizer's allocator (ASan, TSan) replaced malloc in this build, and so in the nj it runs: the resident
// set then also holds the sanitizer's shadow memory and quarantine.
bool sanitizer_allocator();

// A fresh, empty temporary folder for one test, removed by the destructor.
class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Sets an environment variable for one scope, restoring what was there.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value);
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;
  ~ScopedVariable();

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Writes `text` gzip-compressed to `path`, as datasets are often downloaded.
void write_gzip(const std::string& path, const std::string& text);

struct CommandResult {
  int exit_code = 0;
  std::string output;  // stdout and stderr together
};
// Runs the built `nj` binary with the given arguments (a shell string).
// `environment`: variable assignments for it ("NAME=value ...").
CommandResult run_nj(const std::string& arguments, const std::string& environment = "");

// Any shell command line, its stdout and stderr together.
CommandResult run_shell(const std::string& command);
// The same on a pseudo-terminal (script(1)), as from a user's shell: what a terminal would show.
CommandResult run_nj_in_terminal(const std::string& arguments);

// Whether `mpirun` is on PATH; the multi-rank tests skip without it.
bool have_mpirun();
#define NJ_SKIP_WITHOUT_MPIRUN()                                             \
  do {                                                                       \
    if (!::nj::test::have_mpirun()) GTEST_SKIP() << "mpirun is not on PATH"; \
  } while (false)
// Runs the built `nj` binary as `ranks` Open MPI ranks on this machine (`mpirun -np ranks --oversubscribe`).
// Ranks beyond the cores yield while they wait, and root may launch them (test machines often run as root).
// A job still running after `limit` is killed (exit code 124), so a rank that never ends fails its test instead
// of holding up the suite. Stdin is empty: `timeout` runs mpirun outside the terminal's foreground, where
// reading the terminal would stop it.
CommandResult run_nj_ranks(int ranks, const std::string& arguments,
                           std::chrono::seconds limit = std::chrono::seconds(300));
// Checks that a command failed with exactly one line, `nj: error: ...`, and returns that line.
std::string expect_one_line_error(const CommandResult& result);
// Where the error comes after log lines (of loading, or of other ranks): the one line that starts "nj: error: "
// in a failed command's output, checked to be the only one.
std::string the_error_line(const CommandResult& result);
// Single-quotes a path for the shell.
std::string shell_quote(const std::string& path);

// A 2-D grid (rows x cols, 4-neighbours) with a few long-range edges, and random features, labels and splits:
// local, so that small subgraphs have small closures and a partition has interior vertices, yet every
// subgraph shares rows with its neighbours.
Dataset grid_dataset(vid_t rows, vid_t cols, std::uint64_t seed);

// Expects the per-vertex data of two datasets or two shards (features bit for bit, labels, classes, splits, and
// what is known of the graph's symmetry and self-loops) to be equal.
template <typename VertexData>
void expect_same_vertex_data(const VertexData& a, const VertexData& b) {
  EXPECT_EQ(a.features.rows(), b.features.rows());
  EXPECT_EQ(a.features.cols(), b.features.cols());
  EXPECT_TRUE(std::ranges::equal(a.features.span(), b.features.span()));
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.num_classes, b.num_classes);
  EXPECT_EQ(a.train_mask, b.train_mask);
  EXPECT_EQ(a.val_mask, b.val_mask);
  EXPECT_EQ(a.test_mask, b.test_mask);
  EXPECT_EQ(a.symmetrized, b.symmetrized);
  EXPECT_EQ(a.self_loops, b.self_loops);
}

// Expects every part of two datasets (name excepted) to be equal, feature values bit for bit.
void expect_same_dataset(const Dataset& a, const Dataset& b);
// Expects two shards to be equal in every part but the seconds their partition took (the features bit for bit).
void expect_same_shard(const Shard& a, const Shard& b);

// A small model of `kind` whose training exercises every random stream: input and attention dropout, ELU after
// GAT layers (ReLU after GCN's), two heads.
ModelConfig training_config(ModelKind kind, int layers = 2);

// A global id beyond 32 bits for vertex v: spread out (11 apart), offset by 2^32, 2^33 or 3·2^32 by v mod 3, so that
// ids are in no order of v and their high words differ; distinct for v below 2^32 / 11.
constexpr gid_t spread_id(std::int64_t v) { return ((1 + v % 3) << 32) + 11 * v + 5; }

// A small random dataset with features, labels and all three splits; deterministic by seed.
Dataset random_dataset(vid_t num_vertices, eid_t num_edges, std::int64_t feature_width, std::int32_t num_classes,
                       std::uint64_t seed);
// `data` with every edge u -> v moved to u + 1 -> v + 1 (modulo the vertex count), its name, counts and rows kept:
// a graph of the same shape and another structure.
Dataset with_edges_shifted(Dataset data);

// Expects analytic[i], the gradient of the model's i-th parameter, to match central finite differences of
// loss() element by element.
void expect_gradients_match_finite_differences(Model& model, const std::vector<Matrix>& analytic,
                                               const std::function<double()>& loss);
// The derivative of `loss` along one direction through every parameter at once against the sum of `analytic`
// along it, to 0.2 %: element by element finite differences pass a gradient scaled by up to their tolerance, this
// does not. Only for losses that are smooth around the parameters.
void expect_directional_derivative(Model& model, const std::vector<Matrix>& analytic,
                                   const std::function<double()>& loss);

}  // namespace nj::test
