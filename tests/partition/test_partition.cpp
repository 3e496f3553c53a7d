#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "nj/io/dataset_file.hpp"
#include "nj/io/edge_list.hpp"
#include "nj/io/hdf5.hpp"
#include "nj/io/plain_text.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/partition/parallel.hpp"
#include "nj/partition/partition.hpp"
#include "support/test_support.hpp"

namespace nj {
namespace {

constexpr int kParts = 3;

Dataset small_dataset() { return test::random_dataset(400, 2000, 5, 4, 11); }

std::string input_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no InputError";
}

std::vector<gid_t> sorted_in_neighbors(const CsrGraph& graph, vid_t v) {
  const auto sources = graph.in_neighbors(v);
  std::vector<gid_t> out(sources.begin(), sources.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<gid_t> global_ids(const LocalGraph& local, const std::vector<vid_t>& rows) {
  std::vector<gid_t> out;
  for (const vid_t r : rows) out.push_back(local.global_id[static_cast<std::size_t>(r)]);
  return out;
}

const PeerRows* find_peer(const LocalGraph& local, int peer) {
  for (const auto& p : local.peers) {
    if (p.peer == peer) return &p;
  }
  return nullptr;
}

// The edge cut counted directly: distinct unordered pairs {u, v}, u != v, joined by an edge in either
// direction, whose ends lie in different parts.
std::int64_t brute_force_cut(const CsrGraph& graph, const std::vector<std::int32_t>& part_of) {
  std::set<std::pair<vid_t, vid_t>> cut;
  for (vid_t v = 0; v < graph.num_vertices(); ++v) {
    for (const vid_t s : graph.in_neighbors(v)) {
      if (part_of[static_cast<std::size_t>(s)] != part_of[static_cast<std::size_t>(v)]) {
        cut.insert({std::min(s, v), std::max(s, v)});
      }
    }
  }
  return static_cast<std::int64_t>(cut.size());
}

class ShardsOfEveryMethod : public ::testing::TestWithParam<PartitionMethod> {};

TEST_P(ShardsOfEveryMethod, CoverTheGraphExactly) {
  const Dataset d = small_dataset();
  const vid_t n = d.num_vertices();
  PartitionInfo info;
  const auto part_of = assign_parts(d, {GetParam(), kParts, 5}, info);
  ASSERT_EQ(part_of.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(info.method, to_string(GetParam()));
  EXPECT_EQ(info.parts, kParts);
  EXPECT_EQ(info.edge_cut, brute_force_cut(d.graph, part_of));
  EXPECT_EQ(info.undirected_edges, d.graph.num_edges() / 2);  // random_dataset is symmetric and simple

  std::vector<Shard> shards;
  for (int p = 0; p < kParts; ++p) shards.push_back(make_shard(d, part_of, p, info));

  std::vector<int> owner(static_cast<std::size_t>(n), -1);
  for (int p = 0; p < kParts; ++p) {
    const Shard& shard = shards[static_cast<std::size_t>(p)];
    const LocalGraph& local = shard.local;
    SCOPED_TRACE(fmt::format("part {}", p));
    EXPECT_NO_THROW(shard.validate("shard"));
    EXPECT_EQ(shard.part, p);
    EXPECT_EQ(info.owned[static_cast<std::size_t>(p)], local.num_owned);
    EXPECT_EQ(info.mirrors[static_cast<std::size_t>(p)], local.num_mirrors());
    EXPECT_EQ(info.train[static_cast<std::size_t>(p)], count(shard.train_mask));
    EXPECT_EQ(info.in_edges[static_cast<std::size_t>(p)], local.graph.num_edges());

    std::set<gid_t> expected_mirrors;
    for (vid_t i = 0; i < local.num_owned; ++i) {
      const gid_t g = local.global_id[static_cast<std::size_t>(i)];
      const auto v = static_cast<vid_t>(g);
      EXPECT_EQ(owner[static_cast<std::size_t>(g)], -1) << "vertex " << g << " owned twice";
      owner[static_cast<std::size_t>(g)] = p;
      EXPECT_EQ(part_of[static_cast<std::size_t>(g)], p);
      // Its in-edges, mapped back to global ids, are those of the whole graph.
      std::vector<gid_t> sources;
      for (const vid_t s : local.graph.in_neighbors(i)) sources.push_back(local.global_id[static_cast<std::size_t>(s)]);
      std::sort(sources.begin(), sources.end());
      EXPECT_EQ(sources, sorted_in_neighbors(d.graph, v)) << "vertex " << g;
      for (const vid_t s : d.graph.in_neighbors(v)) {
        if (part_of[static_cast<std::size_t>(s)] != p) expected_mirrors.insert(s);
      }
      // Its rows are the dataset's.
      EXPECT_EQ(shard.labels[static_cast<std::size_t>(i)], d.labels[static_cast<std::size_t>(g)]);
      EXPECT_EQ(shard.train_mask[static_cast<std::size_t>(i)], d.train_mask[static_cast<std::size_t>(g)]);
      EXPECT_EQ(shard.features(i, 2), d.features(g, 2));
    }
    std::vector<gid_t> mirrors(local.global_id.begin() + local.num_owned, local.global_id.end());
    std::sort(mirrors.begin(), mirrors.end());
    EXPECT_EQ(mirrors, std::vector<gid_t>(expected_mirrors.begin(), expected_mirrors.end()));
    for (vid_t i = 0; i < local.num_local(); ++i) {
      const auto g = static_cast<vid_t>(local.global_id[static_cast<std::size_t>(i)]);
      EXPECT_EQ(local.global_in_degree[static_cast<std::size_t>(i)], d.graph.in_degree(g));
      EXPECT_EQ(local.global_self_loop[static_cast<std::size_t>(i)], 0);
    }
  }
  EXPECT_EQ(std::count(owner.begin(), owner.end(), -1), 0);

  // p's send list to q names the vertices of q's receive list from p, in the same order.
  for (int p = 0; p < kParts; ++p) {
    for (int q = 0; q < kParts; ++q) {
      if (p == q) continue;
      const LocalGraph& from = shards[static_cast<std::size_t>(p)].local;
      const LocalGraph& to = shards[static_cast<std::size_t>(q)].local;
      const PeerRows* send = find_peer(from, q);
      const PeerRows* receive = find_peer(to, p);
      ASSERT_EQ(send == nullptr, receive == nullptr) << p << " -> " << q;
      if (send == nullptr) continue;
      EXPECT_FALSE(send->send.empty());
      EXPECT_EQ(global_ids(from, send->send), global_ids(to, receive->receive)) << p << " -> " << q;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Methods, ShardsOfEveryMethod,
                         ::testing::Values(PartitionMethod::kMetis, PartitionMethod::kRandom,
                                           PartitionMethod::kContiguous),
                         [](const auto& param) { return std::string(to_string(param.param)); });

TEST(AssignParts, RandomIsBalancedAndContiguousIsBlocks) {
  const Dataset d = small_dataset();  // 400 vertices: 3 parts of 133 or 134
  PartitionInfo random;
  assign_parts(d, {PartitionMethod::kRandom, kParts, 1}, random);
  EXPECT_LE(*std::max_element(random.owned.begin(), random.owned.end()) -
                *std::min_element(random.owned.begin(), random.owned.end()),
            1);
  PartitionInfo blocks;
  const auto part_of = assign_parts(d, {PartitionMethod::kContiguous, kParts, 1}, blocks);
  EXPECT_TRUE(std::is_sorted(part_of.begin(), part_of.end()));
  EXPECT_EQ(blocks.owned, (std::vector<std::int64_t>{134, 133, 133}));  // floor(v * 3 / 400)
}

TEST(AssignParts, SameSeedSameAssignment) {
  const Dataset d = small_dataset();
  for (const auto method : {PartitionMethod::kMetis, PartitionMethod::kRandom}) {
    PartitionInfo info;
    const auto first = assign_parts(d, {method, 4, 9}, info);
    EXPECT_EQ(assign_parts(d, {method, 4, 9}, info), first) << to_string(method);
  }
  PartitionInfo info;
  EXPECT_NE(assign_parts(d, {PartitionMethod::kRandom, 4, 9}, info),
            assign_parts(d, {PartitionMethod::kRandom, 4, 10}, info));
}

TEST(AssignParts, OnePartIsTheWholeGraph) {
  const Dataset d = small_dataset();
  PartitionInfo info;
  const auto part_of = assign_parts(d, {PartitionMethod::kMetis, 1, 0}, info);
  EXPECT_EQ(std::count(part_of.begin(), part_of.end(), 0), d.num_vertices());
  EXPECT_EQ(info.edge_cut, 0);
  EXPECT_EQ(info.mirrors, std::vector<std::int64_t>{0});
}

TEST(AssignParts, MetisWithoutTrainingVerticesBalancesVertices) {
  Dataset d = small_dataset();
  std::fill(d.train_mask.begin(), d.train_mask.end(), 0);
  PartitionInfo info;
  assign_parts(d, {PartitionMethod::kMetis, 4, 0}, info);
  EXPECT_EQ(info.train, (std::vector<std::int64_t>{0, 0, 0, 0}));
  EXPECT_LE(info.vertex_imbalance(), 1.05);
}

TEST(AssignParts, BadPartCountsAreInputErrors) {
  const Dataset d = small_dataset();
  PartitionInfo info;
  EXPECT_EQ(input_error([&] {
              assign_parts(d, {PartitionMethod::kMetis, 0, 0}, info);
            }),
            "random: cannot split 400 vertices into 0 parts (parts must be between 1 and the number of vertices)");
  EXPECT_EQ(input_error([&] {
              assign_parts(d, {PartitionMethod::kRandom, 401, 0}, info);
            }),
            "random: cannot split 400 vertices into 401 parts (parts must be between 1 and the number of vertices)");
  EXPECT_EQ(input_error([] { parse_partition_method("spectral"); }),
            "unknown partition method 'spectral' (expected metis, random, contiguous or scotch)");
}

TEST(AssignParts, GraphsBeyondMetisIndicesAreInputErrors) {
  EXPECT_NO_THROW(require_fits_metis("g", 1000, std::numeric_limits<std::int32_t>::max()));
  const auto message =
      input_error([] { require_fits_metis("big", 1000, std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1); });
  EXPECT_NE(message.find("big: "), std::string::npos) << message;
  EXPECT_NE(message.find("32-bit idx_t (at most 2147483647 each)"), std::string::npos) << message;
}

// ---------------------------------------------------------------------------------------------------------------
// Shard and manifest files

TEST(ShardFile, RoundTripKeepsEveryField) {
  const test::TempDir dir;
  Dataset d = small_dataset();
  d.self_loops = SelfLoopPolicy::kKept;
  PartitionInfo info;
  // A seed beyond int64 survives the int64 attribute.
  const auto part_of = assign_parts(d, {PartitionMethod::kRandom, kParts, ~std::uint64_t{0}}, info);
  for (int p = 0; p < kParts; ++p) {
    const Shard shard = make_shard(d, part_of, p, info);
    const auto path = dir.file(shard_file_name(p));
    write_shard(path, shard);
    EXPECT_TRUE(is_shard_file(path));
    const Shard read = read_shard(path);
    test::expect_same_shard(read, shard);
    EXPECT_EQ(read.partition.seconds, shard.partition.seconds);
  }
  const auto whole = whole_graph_shard(d);
  write_shard(dir.file("whole.h5"), whole);
  test::expect_same_shard(read_shard(dir.file("whole.h5")), whole);
}

TEST(ShardFile, AShardMustHoldWhatItsPartitionRecords) {
  Dataset d = small_dataset();
  PartitionInfo info;
  const auto part_of = assign_parts(d, {PartitionMethod::kMetis, kParts, 0}, info);
  Shard shard = make_shard(d, part_of, 1, info);
  EXPECT_NO_THROW(shard.validate("part 1"));
  ++shard.partition.mirrors[1];
  try {
    shard.validate("part 1");
    FAIL() << "a shard whose mirrors differ from its partition's record passed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mirrors for part 1"), std::string::npos) << e.what();
  }
}

TEST(ShardFile, NonFiniteFeaturesAreRejectedNamingTheGlobalVertex) {
  const test::TempDir dir;
  const Dataset d = small_dataset();
  PartitionInfo info;
  const auto part_of = assign_parts(d, {PartitionMethod::kContiguous, kParts, 0}, info);
  Shard shard = make_shard(d, part_of, 1, info);
  shard.features(3, 1) = std::numeric_limits<float>::infinity();
  const auto path = dir.file("part-1.h5");
  write_shard(path, shard);
  const std::string message = input_error([&] { read_shard(path); });
  EXPECT_NE(message.find(fmt::format("vertex {}, column 1 is inf", shard.local.global_id[3])), std::string::npos)
      << message;
}

TEST(ShardFile, APartBeyond32BitsIsRejected) {
  const test::TempDir dir;
  const Dataset d = small_dataset();
  PartitionInfo info;
  const auto part_of = assign_parts(d, {PartitionMethod::kContiguous, kParts, 0}, info);
  const auto path = dir.file("part-1.h5");
  write_shard(path, make_shard(d, part_of, 1, info));
  hdf5::File::open_write(path).set_attribute("part", (std::int64_t{1} << 32) + 1);  // part 1 once narrowed
  const std::string message = input_error([&] { read_shard(path); });
  EXPECT_NE(message.find("part (4294967297)"), std::string::npos) << message;
}

TEST(ShardFile, ADatasetFileIsNotAShard) {
  const test::TempDir dir;
  const auto path = dir.file("d.h5");
  write_dataset(path, small_dataset());
  EXPECT_FALSE(is_shard_file(path));
  EXPECT_EQ(input_error([&] { read_shard(path); }), path + ": not a shard file (its attribute kind is not 'nj-shard')");
}

class PartitionFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    info_ = PartitionInfo{};
    part_of_ = assign_parts(dataset_, {PartitionMethod::kMetis, kParts, 2}, info_);
    written_ = write_partition(dataset_, "data/random.h5", part_of_, info_, dir_.path().string());
  }

  test::TempDir dir_;
  Dataset dataset_ = small_dataset();
  PartitionInfo info_;
  std::vector<std::int32_t> part_of_;
  PartitionManifest written_;
};

TEST_F(PartitionFolder, ManifestRoundTrip) {
  for (const auto& path : {dir_.path().string(), dir_.file(kManifestFileName)}) {
    const PartitionManifest m = read_manifest(path);
    EXPECT_EQ(m.directory, dir_.path().string());
    EXPECT_EQ(m.dataset_name, "random");
    EXPECT_EQ(m.dataset_path, (std::filesystem::current_path() / "data/random.h5").string());
    EXPECT_EQ(m.global_vertices, dataset_.num_vertices());
    EXPECT_EQ(m.global_edges, dataset_.graph.num_edges());
    EXPECT_EQ(m.global_train, count(dataset_.train_mask));
    EXPECT_EQ(m.shard_files, (std::vector<std::string>{"part-0.h5", "part-1.h5", "part-2.h5"}));
    EXPECT_EQ(m.partition.method, "metis");
    EXPECT_EQ(m.partition.parts, kParts);
    EXPECT_EQ(m.partition.seed, 2U);
    EXPECT_EQ(m.partition.seconds, info_.seconds);
    EXPECT_EQ(m.partition.edge_cut, info_.edge_cut);
    EXPECT_EQ(m.partition.undirected_edges, info_.undirected_edges);
    EXPECT_EQ(m.partition.owned, info_.owned);
    EXPECT_EQ(m.partition.mirrors, info_.mirrors);
    EXPECT_EQ(m.partition.train, info_.train);
    EXPECT_EQ(m.partition.in_edges, info_.in_edges);
  }
}

TEST_F(PartitionFolder, LoadPartReadsThatPart) {
  for (int p = 0; p < kParts; ++p)
    test::expect_same_shard(load_part(dir_.path().string(), p, kParts), make_shard(dataset_, part_of_, p, info_));
}

TEST_F(PartitionFolder, LoadPartChecksThePartCount) {
  const auto dir = dir_.path().string();
  EXPECT_EQ(input_error([&] { load_part(dir, 0, 4); }), "partition " + dir + " has 3 parts but the job has 4 ranks");
}

TEST_F(PartitionFolder, BadManifestsAreOneLineErrors) {
  const auto path = dir_.file(kManifestFileName);
  auto document = nlohmann::json::parse(std::ifstream(path));
  document["parts"] = "three";
  std::ofstream(path) << document.dump();
  EXPECT_EQ(input_error([&] { read_manifest(path); }), path + ": key 'parts' has the wrong type (string)");
  document["parts"] = 3;
  document["per_part"][1].erase("mirrors");
  std::ofstream(path) << document.dump();
  EXPECT_EQ(input_error([&] { read_manifest(path); }), path + ": per_part[1]: key 'mirrors' is missing");
  std::ofstream(path) << "{\"kind\": ";
  EXPECT_EQ(input_error([&] { read_manifest(path); }), path + ": not valid JSON (byte 10)");
  std::filesystem::remove(path);
  EXPECT_EQ(input_error([&] { read_manifest(dir_.path().string()); }),
            path + ": no such file (a partition folder holds manifest.json)");
}

// ---------------------------------------------------------------------------------------------------------------
// Partition quality on real graphs: METIS against random assignment at 2, 4 and 8 parts.

// METIS's default ufactor for k-way is 30: at most 1.03 times the mean weight per part, for every constraint
// (METIS adds 0.0000499 to that bound). Refinement aims at it without a hard guarantee, so the check allows a
// little slack; on Cora and Slashdot METIS stays at or under 1.0300.
constexpr double kBalanceBound = 1.03 + 0.005;

// `cut_ratio` is the largest METIS cut allowed, as a fraction of the random assignment's.
void expect_metis_beats_random(const Dataset& d, double cut_ratio) {
  for (const int parts : {2, 4, 8}) {
    PartitionInfo metis;
    PartitionInfo random;
    assign_parts(d, {PartitionMethod::kMetis, parts, 0}, metis);
    assign_parts(d, {PartitionMethod::kRandom, parts, 0}, random);
    const auto summary = fmt::format(
        "{} at {} parts: METIS cut {} ({:.4f}), imbalance {:.4f} / {:.4f}; random cut {} ({:.4f}), imbalance {:.4f} / "
        "{:.4f}",
        d.name, parts, metis.edge_cut, metis.cut_fraction(), metis.vertex_imbalance(), metis.train_imbalance(),
        random.edge_cut, random.cut_fraction(), random.vertex_imbalance(), random.train_imbalance());
    ::testing::Test::RecordProperty(fmt::format("{}_{}_parts", d.name, parts), summary);
    EXPECT_LE(static_cast<double>(metis.edge_cut), cut_ratio * static_cast<double>(random.edge_cut)) << summary;
    EXPECT_LE(metis.vertex_imbalance(), kBalanceBound) << summary;
    EXPECT_LE(metis.train_imbalance(), kBalanceBound) << summary;
  }
}

TEST(PartitionQuality, Cora) {
  NJ_SKIP_WITHOUT_DATA();
  // Measured: METIS cuts 8%, 9% and 12% of random's edge cut at 2, 4 and 8 parts.
  const auto cora = read_plain_folder((test::data_dir() / "cora").string(), ConvertOptions{.name = "cora"});
  expect_metis_beats_random(cora, 1.0 / 3.0);
}

TEST(PartitionQuality, Slashdot) {
  NJ_SKIP_WITHOUT_DATA();
  // Undirected and simple, as scripts/bench/ablation.py converts it; the converter's default split (60% train
  // over all vertices) gives the training constraint.
  const auto edges = read_edge_list((test::data_dir() / "snap/soc-Slashdot0902.txt.gz").string(), {});
  ConvertOptions options{.name = "slashdot"};
  options.graph = {.symmetrize = true, .self_loops = SelfLoops::kRemove, .duplicates = Duplicates::kRemove};
  // A social graph with a dense core has no small cut: METIS cuts 47%, 58% and 65% of random's edge cut at 2,
  // 4 and 8 parts (24%, 43% and 57% of the edges), and neither more cuts (NCUTS), more refinement (NITER), a
  // looser balance (UFACTOR), one constraint instead of two nor recursive bisection brings that near a third
  // (partition/README.md).
  expect_metis_beats_random(build_dataset(edges, options), 0.7);
}

// The training vertices after PT-Scotch: each exchange gives only what a part holds above the mean rounded up, and
// every part ends at or below it, also where no part is below the mean rounded down to take the excess (Cora at 8
// parts on 4 ranks: 140 training vertices as 18, 17, 19, 17, 17, 18, 17, 17).
TEST(TrainingExchanges, EveryPartEndsAtMostAtTheMeanRoundedUp) {
  const std::vector<std::int64_t> cora{18, 17, 19, 17, 17, 18, 17, 17};
  const std::vector<TrainingExchange> exchanges = training_exchanges(cora);
  ASSERT_EQ(exchanges.size(), 1U);
  EXPECT_EQ(exchanges[0].from, 2);
  EXPECT_EQ(exchanges[0].to, 1);
  EXPECT_EQ(exchanges[0].count, 1);
  std::mt19937 random(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::int64_t> training(2 + random() % 9);
    for (std::int64_t& count : training) count = static_cast<std::int64_t>(random() % 40);
    const std::int64_t total = std::accumulate(training.begin(), training.end(), std::int64_t{0});
    const auto parts = static_cast<std::int64_t>(training.size());
    const std::int64_t high = (total + parts - 1) / parts;
    const std::int64_t low = total / parts;
    std::vector<std::int64_t> after = training;
    for (const TrainingExchange& e : training_exchanges(training)) {
      ASSERT_GT(e.count, 0);
      after[static_cast<std::size_t>(e.from)] -= e.count;
      after[static_cast<std::size_t>(e.to)] += e.count;
    }
    for (std::size_t p = 0; p < after.size(); ++p) {
      EXPECT_LE(after[p], high);
      EXPECT_GE(after[p], std::min(training[p], low)) << "a part gave below the mean rounded down, or took none";
      EXPECT_LE(training[p] - after[p], std::max<std::int64_t>(0, training[p] - high)) << "gave more than its excess";
    }
  }
}

}  // namespace
}  // namespace nj
