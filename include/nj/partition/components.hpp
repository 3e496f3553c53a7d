#pragma once
// The connected components of a distributed graph, and parts for the light ones. A graph of one large component and
// many small ones (CiteSeer: 438 components, the largest 2,120 of 3,327 vertices) is cut best with each small component
// whole in one part and the large one spread over as few parts as its weight needs; a partitioner handed the whole
// graph spread CiteSeer's largest component over every part and cut up to 2.3 times METIS's edges.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "nj/comm/communicator.hpp"
#include "nj/comm/slice_messages.hpp"
#include "nj/partition/slice_adjacency.hpp"

namespace nj {

// The connected component of each of the slice's rows, named by the least global id among its vertices (the slice's
// adjacency is symmetric). A collective of every rank: each joins its rows through the edges inside its slice, then the
// ranks trade the names of the rows that other slices reach, a round at a time, until no name changes. A round
// crosses one edge between slices on every path, so a graph whose paths run back and forth between slices (a long
// path with ids drawn at random) may need many: past `max_rounds` this returns nothing, on every rank.
std::optional<std::vector<gid_t>> slice_components(const SliceAdjacency& slice, const Slices& slices,
                                                   Communicator& comm, int max_rounds);

// What a component holds: its weight and its training vertices.
struct ComponentAmount {
  std::int64_t weight = 0;
  std::int64_t training = 0;
};

// The components of a slice's rows (`component`, as slice_components names them), weighed over every rank, with their
// training vertices counted. A component no heavier than `light_limit` is light and goes whole to one part; the heavy
// ones are divided among as few parts as their weight needs, first (by a partitioner), and the light ones fill what
// they leave. Collectives of every rank; the results are functions of the graph and the number of ranks.
class WeighedComponents {
 public:
  WeighedComponents(std::span<const gid_t> component, std::span<const std::int64_t> weights,
                    std::span<const std::uint8_t> training, std::int64_t light_limit, const Slices& slices,
                    Communicator& comm);

  bool heavy(std::size_t row) const { return heavy_[row] != 0; }
  // How many components the slice's rows are in.
  std::int64_t named() const { return static_cast<std::int64_t>(named_.size()); }
  std::int64_t total_weight() const { return totals_[kWeight]; }
  std::int64_t heavy_weight() const { return totals_[kHeavyWeight]; }

  // Sets the part of each row of a light component, leaving the others. `heavy_load[k]` and `heavy_training[k]` are
  // what the heavy components weigh in part k and the training vertices they have there, over every rank. Part k is
  // to weigh a 1/parts share of the whole and hold as even a share of the training vertices (each as even as whole
  // units allow); the light components fill what the heavy ones leave. Each rank fills its share of that room (the
  // ranks' light amounts side by side): its light components with training vertices first, most first, each into the
  // part with the most training room left, so that the training vertices need not be evened out by cutting
  // components (training_balance.hpp); then the others, heaviest first, each into the part with the most weight room
  // left.
  void place_light(std::span<std::int32_t> part, std::span<const std::int64_t> heavy_load,
                   std::span<const std::int64_t> heavy_training) const;

 private:
  // totals_: every weight, every training vertex, the heavy components' weight, then each rank's light components'
  // weight, then their training vertices.
  static constexpr std::size_t kWeight = 0;
  static constexpr std::size_t kTraining = 1;
  static constexpr std::size_t kHeavyWeight = 2;
  static constexpr std::size_t kLight = 3;

  std::span<const gid_t> component_;
  std::int64_t light_limit_;
  const Slices& slices_;
  Communicator& comm_;
  std::vector<gid_t> named_;  // the components this rank's rows are in, ascending
  std::vector<char> heavy_;   // a row's
  std::vector<std::int64_t> totals_;
  std::vector<gid_t> owned_names_;              // the components whose least vertex this rank holds, ascending
  std::vector<ComponentAmount> owned_amounts_;  // what they weigh and their training vertices, over every rank
};

}  // namespace nj
