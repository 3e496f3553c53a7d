#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>

namespace nj::test {

std::filesystem::path data_dir() {
  const char* env = std::getenv("NJ_DATA_DIR");
  std::filesystem::path dir = env != nullptr ? env : NJ_DEFAULT_DATA_DIR;
  return std::filesystem::is_directory(dir) ? dir : std::filesystem::path{};
}

double time_scale() {
  const char* env = std::getenv("NJ_TEST_TIME_SCALE");
  const double scale = env != nullptr ? std::strtod(env, nullptr) : 1.0;
  return scale > 1.0 ? scale : 1.0;
}

extern "C" std::size_t __sanitizer_get_current_allocated_bytes() __attribute__((weak));

bool sanitizer_allocator() { return __sanitizer_get_current_allocated_bytes != nullptr; }

TempDir::TempDir() {
  std::random_device device;
  const auto base = std::filesystem::temp_directory_path();
  do {
    path_ = base / ("nj-test-" + std::to_string(device()));
  } while (std::filesystem::exists(path_));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

ScopedVariable::ScopedVariable(const char* name, const char* value) : name_(name) {
  if (const char* old = std::getenv(name); old != nullptr) old_ = old;
  setenv(name, value, 1);
}

ScopedVariable::~ScopedVariable() {
  if (old_) {
    setenv(name_, old_->c_str(), 1);
  } else {
    unsetenv(name_);
  }
}

void write_gzip(const std::string& path, const std::string& text) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(gzwrite(file, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

namespace {

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) result.output += buffer.data();
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace

CommandResult run_nj(const std::string& arguments, const std::string& environment) {
  return run_command(environment + (environment.empty() ? "" : " ") + "\"" + NJ_BINARY + "\" " + arguments + " 2>&1");
}

CommandResult run_shell(const std::string& command) { return run_command(command + " 2>&1"); }

CommandResult run_nj_in_terminal(const std::string& arguments) {
  return run_command("script -qec \"'" + std::string(NJ_BINARY) + "' " + arguments + "\" /dev/null </dev/null 2>&1");
}

bool have_mpirun() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::istringstream folders(path);
  for (std::string folder; std::getline(folders, folder, ':');) {
    if (access((std::filesystem::path(folder) / "mpirun").c_str(), X_OK) == 0) return true;
  }
  return false;
}

CommandResult run_nj_ranks(int ranks, const std::string& arguments, std::chrono::seconds limit) {
  return run_command(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 timeout " +
      std::to_string(limit.count()) + " mpirun -np " + std::to_string(ranks) + " --oversubscribe \"" + NJ_BINARY +
      "\" " + arguments + " </dev/null 2>&1");
}

std::string expect_one_line_error(const CommandResult& result) {
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  EXPECT_TRUE(result.output.starts_with("nj: error: ")) << result.output;
  return result.output;
}

bool data_required() {
  const char* required = std::getenv("NJ_REQUIRE_DATA");
  return required != nullptr && *required != '\0' && std::string(required) != "0";
}

std::string the_error_line(const CommandResult& result) {
  EXPECT_NE(result.exit_code, 0) << result.output;
  const std::string marker = "nj: error: ";
  std::vector<std::string> errors;
  std::istringstream lines(result.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(marker) != std::string::npos) errors.push_back(line);
  }
  EXPECT_EQ(errors.size(), 1U) << result.output;
  EXPECT_TRUE(!errors.empty() && errors.front().starts_with(marker)) << result.output;
  return errors.empty() ? "" : errors.front();
}

std::string shell_quote(const std::string& path) { return "'" + path + "'"; }

void expect_same_shard(const Shard& a, const Shard& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.part, b.part);
  EXPECT_EQ(a.partition.method, b.partition.method);
  EXPECT_EQ(a.partition.parts, b.partition.parts);
  EXPECT_EQ(a.partition.seed, b.partition.seed);
  EXPECT_EQ(a.partition.undirected_edges, b.partition.undirected_edges);
  EXPECT_EQ(a.partition.edge_cut, b.partition.edge_cut);
  EXPECT_EQ(a.partition.owned, b.partition.owned);
  EXPECT_EQ(a.partition.mirrors, b.partition.mirrors);
  EXPECT_EQ(a.partition.train, b.partition.train);
  EXPECT_EQ(a.partition.in_edges, b.partition.in_edges);
  EXPECT_EQ(a.global_vertices, b.global_vertices);
  EXPECT_EQ(a.global_edges, b.global_edges);
  EXPECT_EQ(a.global_train, b.global_train);
  EXPECT_EQ(a.local.graph.offsets, b.local.graph.offsets);
  EXPECT_EQ(a.local.graph.sources, b.local.graph.sources);
  EXPECT_EQ(a.local.num_owned, b.local.num_owned);
  EXPECT_EQ(a.local.global_id, b.local.global_id);
  EXPECT_EQ(a.local.global_in_degree, b.local.global_in_degree);
  EXPECT_EQ(a.local.global_self_loop, b.local.global_self_loop);
  ASSERT_EQ(a.local.peers.size(), b.local.peers.size());
  for (std::size_t i = 0; i < a.local.peers.size(); ++i) {
    EXPECT_EQ(a.local.peers[i].peer, b.local.peers[i].peer);
    EXPECT_EQ(a.local.peers[i].send, b.local.peers[i].send);
    EXPECT_EQ(a.local.peers[i].receive, b.local.peers[i].receive);
  }
  test::expect_same_vertex_data(a, b);
}

void expect_same_dataset(const Dataset& a, const Dataset& b) {
  EXPECT_EQ(a.graph.offsets, b.graph.offsets);
  EXPECT_EQ(a.graph.sources, b.graph.sources);
  expect_same_vertex_data(a, b);
}

ModelConfig training_config(ModelKind kind, int layers) {
  ModelConfig c;
  c.kind = kind;
  c.layers = layers;
  c.hidden = 8;
  c.heads = 2;
  c.dropout = 0.5F;
  c.attention_dropout = 0.3F;
  c.gin_eps = 0.2F;
  c.gin_train_eps = true;   // the wider rows, and ε's gradient through every executor (PyG's fixture has both)
  c.propagation_steps = 3;  // APPNP: 5 layers in all
  c.activation = default_activation(kind);
  c.seed = 3;
  return c;
}

Dataset random_dataset(vid_t num_vertices, eid_t num_edges, std::int64_t feature_width, std::int32_t num_classes,
                       std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<vid_t> vertex(0, num_vertices - 1);
  std::vector<vid_t> src(static_cast<std::size_t>(num_edges));
  std::vector<vid_t> dst(static_cast<std::size_t>(num_edges));
  for (eid_t e = 0; e < num_edges; ++e) {
    src[static_cast<std::size_t>(e)] = vertex(rng);
    dst[static_cast<std::size_t>(e)] = vertex(rng);
  }
  Dataset d;
  d.name = "random";
  d.graph = build_csr(num_vertices, src, dst,
                      {.symmetrize = true, .self_loops = SelfLoops::kRemove, .duplicates = Duplicates::kRemove});
  d.symmetrized = true;
  d.self_loops = SelfLoopPolicy::kRemoved;
  d.num_classes = num_classes;
  d.features = Matrix(num_vertices, feature_width);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  for (auto& x : d.features.span()) x = normal(rng);
  std::uniform_int_distribution<std::int32_t> label(0, num_classes - 1);
  d.labels.resize(static_cast<std::size_t>(num_vertices));
  d.train_mask.assign(static_cast<std::size_t>(num_vertices), 0);
  d.val_mask.assign(static_cast<std::size_t>(num_vertices), 0);
  d.test_mask.assign(static_cast<std::size_t>(num_vertices), 0);
  for (vid_t v = 0; v < num_vertices; ++v) {
    const auto i = static_cast<std::size_t>(v);
    d.labels[i] = label(rng);
    (v % 3 == 0 ? d.train_mask : v % 3 == 1 ? d.val_mask : d.test_mask)[i] = 1;
  }
  return d;
}

Dataset with_edges_shifted(Dataset data) {
  const vid_t n = data.num_vertices();
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
  for (vid_t v = 0; v < n; ++v) {
    for (const vid_t u : data.graph.in_neighbors(v)) {
      src.push_back((u + 1) % n);
      dst.push_back((v + 1) % n);
    }
  }
  data.graph = build_csr(n, src, dst);
  return data;
}

Dataset grid_dataset(vid_t rows, vid_t cols, std::uint64_t seed) {
  Dataset d = random_dataset(rows * cols, 0, 12, 4, seed);
  std::vector<vid_t> src;
  std::vector<vid_t> dst;
  for (vid_t r = 0; r < rows; ++r) {
    for (vid_t c = 0; c < cols; ++c) {
      const vid_t v = r * cols + c;
      if (c + 1 < cols) src.push_back(v), dst.push_back(v + 1);
      if (r + 1 < rows) src.push_back(v), dst.push_back(v + cols);
      if (v % 97 == 0) src.push_back(v), dst.push_back((v * 7919 + 13) % (rows * cols));
    }
  }
  d.graph = build_csr(d.num_vertices(), src, dst,
                      {.symmetrize = true, .self_loops = SelfLoops::kRemove, .duplicates = Duplicates::kRemove});
  return d;
}

void expect_gradients_match_finite_differences(Model& model, const std::vector<Matrix>& analytic,
                                               const std::function<double()>& loss) {
  const float eps = 1e-3F;
  const auto parameters = model.parameters();
  ASSERT_EQ(parameters.size(), analytic.size());
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    Parameter* p = parameters[i];
    for (std::int64_t k = 0; k < p->value.size(); ++k) {
      const float saved = p->value.data()[k];
      p->value.data()[k] = saved + eps;
      const double up = loss();
      p->value.data()[k] = saved - eps;
      const double down = loss();
      p->value.data()[k] = saved;
      const double numeric = (up - down) / (2.0 * eps);
      EXPECT_NEAR(analytic[i].data()[k], numeric, 5e-4 + 3e-2 * std::abs(numeric)) << p->name << "[" << k << "]";
    }
  }
}

void expect_directional_derivative(Model& model, const std::vector<Matrix>& analytic,
                                   const std::function<double()>& loss) {
  const float eps = 1e-3F;
  const auto parameters = model.parameters();
  ASSERT_EQ(parameters.size(), analytic.size());
  // Element by element, 3 % lets a gradient scaled by up to 3 % pass. Along one direction through every parameter
  // at once the derivative is the sum of many elements' and the check is tight: a scale off by 0.5 % fails it.
  const auto direction = [](std::size_t i, std::int64_t k) {
    return static_cast<float>((static_cast<std::int64_t>(i) * 13 + k * 7) % 5 - 2) / 2.0F;
  };
  double predicted = 0.0;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    for (std::int64_t k = 0; k < parameters[i]->value.size(); ++k) {
      predicted += static_cast<double>(analytic[i].data()[k]) * direction(i, k);
    }
  }
  const auto step_all = [&](float by) {
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      for (std::int64_t k = 0; k < parameters[i]->value.size(); ++k)
        parameters[i]->value.data()[k] += by * direction(i, k);
    }
  };
  std::vector<Matrix> saved;
  for (const Parameter* p : parameters) saved.push_back(p->value);
  step_all(eps);
  const double up = loss();
  step_all(-2.0F * eps);
  const double down = loss();
  for (std::size_t i = 0; i < parameters.size(); ++i) parameters[i]->value = saved[i];
  const double numeric = (up - down) / (2.0 * eps);
  EXPECT_NEAR(predicted, numeric, 1e-4 + 2e-3 * std::abs(numeric)) << "the directional derivative";
}

}  // namespace nj::test
