#include "nj/partition/components.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <utility>

#include "nj/core/error.hpp"

namespace nj {
namespace {

// The least row joined to each row through edges inside the slice (union-find, each class rooted at its least row).
std::vector<std::int32_t> least_row_joined(const SliceAdjacency& slice) {
  std::vector<std::int32_t> root(static_cast<std::size_t>(slice.rows()));
  std::iota(root.begin(), root.end(), 0);
  const auto find = [&](std::int32_t r) {
    while (root[static_cast<std::size_t>(r)] != r) {
      r = root[static_cast<std::size_t>(r)] = root[static_cast<std::size_t>(root[static_cast<std::size_t>(r)])];
    }
    return r;
  };
  for (std::int64_t row = 0; row < slice.rows(); ++row) {
    for (auto e = slice.offsets[static_cast<std::size_t>(row)]; e < slice.offsets[static_cast<std::size_t>(row) + 1];
         ++e) {
      const gid_t v = slice.neighbours[static_cast<std::size_t>(e)];
      if (!slice.holds(v)) continue;
      const std::int32_t a = find(static_cast<std::int32_t>(row));
      const std::int32_t b = find(static_cast<std::int32_t>(v - slice.first));
      root[static_cast<std::size_t>(std::max(a, b))] = std::min(a, b);
    }
  }
  for (std::size_t r = 0; r < root.size(); ++r) root[r] = find(static_cast<std::int32_t>(r));
  return root;
}

// The length of [a0, a1) within [b0, b1).
std::int64_t overlap(std::int64_t a0, std::int64_t a1, std::int64_t b0, std::int64_t b1) {
  return std::max<std::int64_t>(0, std::min(a1, b1) - std::max(a0, b0));
}

// The components whose least vertex this rank's slice holds, with what they hold over every rank.
struct OwnedComponents {
  std::vector<gid_t> names;  // ascending
  std::vector<ComponentAmount> amounts;
};

OwnedComponents sum_at_owners(std::span<const gid_t> named, std::span<const ComponentAmount> partial,
                              const Slices& slices, Communicator& comm) {
  std::vector<Writer> writers(static_cast<std::size_t>(slices.ranks()));
  std::size_t begin = 0;
  const std::vector<std::size_t> ends = owner_run_ends(named, slices);
  for (std::size_t q = 0; q < ends.size(); ++q) {
    const std::size_t count = ends[q] - begin;
    writers[q].reserve(Writer::bytes_of_array<gid_t>(count) + Writer::bytes_of_array<ComponentAmount>(count));
    writers[q].put(named.subspan(begin, count));
    writers[q].put(partial.subspan(begin, count));
    begin = ends[q];
  }
  const std::vector<std::vector<std::byte>> messages = exchange(writers, comm);
  std::size_t count = 0;
  for (const auto& message : messages) count += Reader(message).next<gid_t>().size();
  std::vector<std::pair<gid_t, ComponentAmount>> heard;
  heard.reserve(count);
  for (const auto& message : messages) {
    Reader reader(message);
    const PackedArray<gid_t> names = reader.next<gid_t>();
    const PackedArray<ComponentAmount> amounts = reader.next<ComponentAmount>();
    for (std::size_t i = 0; i < names.size(); ++i) heard.emplace_back(names[i], amounts[i]);
  }
  std::sort(heard.begin(), heard.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  OwnedComponents owned;
  std::size_t distinct = 0;
  for (std::size_t i = 0; i < heard.size(); ++i) distinct += i == 0 || heard[i].first != heard[i - 1].first ? 1 : 0;
  owned.names.reserve(distinct);
  owned.amounts.reserve(distinct);
  for (const auto& [name, amount] : heard) {
    if (owned.names.empty() || owned.names.back() != name) {
      owned.names.push_back(name);
      owned.amounts.emplace_back();
    }
    owned.amounts.back().weight += amount.weight;
    owned.amounts.back().training += amount.training;
  }
  return owned;
}

// What is left of each part's room, the most first (the lower part among equals).
class Rooms {
 public:
  explicit Rooms(std::span<const std::int64_t> room) {
    for (std::size_t k = 0; k < room.size(); ++k) most_.emplace(room[k], -static_cast<std::int32_t>(k));
  }
  // Takes `amount` from the part with the most room left among those that `fits`, or from the part with the most
  // room left where none does; returns that part.
  template <typename Fits>
  std::int32_t take(std::int64_t amount, Fits fits) {
    std::vector<Entry> passed;
    while (most_.size() > 1 && !fits(-most_.top().second)) {
      passed.push_back(most_.top());
      most_.pop();
    }
    Entry chosen = most_.top();
    most_.pop();
    if (!passed.empty() && !fits(-chosen.second)) std::swap(chosen, passed.front());
    for (const Entry& entry : passed) most_.push(entry);
    most_.emplace(chosen.first - amount, chosen.second);
    return -chosen.second;
  }

 private:
  using Entry = std::pair<std::int64_t, std::int32_t>;  // room left, part negated
  std::priority_queue<Entry> most_;
};

// The owned light components' parts (-1 for the heavy ones): those with training vertices first, most first, each
// into the part with the most training room left that has weight room for it; then the others, heaviest first, each
// into the part with the most weight room left.
std::vector<std::int32_t> fill_rooms(std::span<const ComponentAmount> owned, std::int64_t light_limit,
                                     std::span<const std::int64_t> weight_room,
                                     std::span<const std::int64_t> training_room) {
  std::vector<std::size_t> light;
  light.reserve(static_cast<std::size_t>(
      std::count_if(owned.begin(), owned.end(), [&](const ComponentAmount& a) { return a.weight <= light_limit; })));
  for (std::size_t c = 0; c < owned.size(); ++c) {
    if (owned[c].weight <= light_limit) light.push_back(c);
  }
  std::stable_sort(light.begin(), light.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(owned[a].training, owned[a].weight) > std::pair(owned[b].training, owned[b].weight);
  });
  std::vector<std::int32_t> part(owned.size(), -1);
  std::vector<std::int64_t> weight_left(weight_room.begin(), weight_room.end());
  Rooms for_training(training_room);
  auto rest = light.begin();
  for (; rest != light.end() && owned[*rest].training > 0; ++rest) {
    const ComponentAmount& amount = owned[*rest];
    part[*rest] = for_training.take(
        amount.training, [&](std::int32_t k) { return weight_left[static_cast<std::size_t>(k)] >= amount.weight; });
    weight_left[static_cast<std::size_t>(part[*rest])] -= amount.weight;
  }
  Rooms for_weight(weight_left);
  for (; rest != light.end(); ++rest)
    part[*rest] = for_weight.take(owned[*rest].weight, [](std::int32_t) { return true; });
  return part;
}

// Each part's room scaled to hold `amount` in all (where the rooms hold more: parts that the heavy components filled
// past their share left room elsewhere), in proportion, as whole units.
std::vector<std::int64_t> scaled_to(std::span<const std::int64_t> room, std::int64_t amount) {
  const std::int64_t total = std::accumulate(room.begin(), room.end(), std::int64_t{0});
  if (total <= amount) return {room.begin(), room.end()};
  std::vector<std::int64_t> scaled;
  std::int64_t before = 0;
  std::int64_t taken = 0;
  for (const std::int64_t r : room) {
    before += r;
    const auto upto = static_cast<std::int64_t>(
        std::llround(static_cast<double>(before) * static_cast<double>(amount) / static_cast<double>(total)));
    scaled.push_back(upto - taken);
    taken = upto;
  }
  return scaled;
}

// This rank's share of each part's room: the parts' rooms side by side make a line, which the ranks' light amounts
// share in rank order (`amounts`: each rank's).
std::vector<std::int64_t> share_of_rooms(std::span<const std::int64_t> whole_room,
                                         std::span<const std::int64_t> amounts, int rank) {
  const std::vector<std::int64_t> room =
      scaled_to(whole_room, std::accumulate(amounts.begin(), amounts.end(), std::int64_t{0}));
  const std::int64_t from = std::accumulate(amounts.begin(), amounts.begin() + rank, std::int64_t{0});
  const std::int64_t to = from + amounts[static_cast<std::size_t>(rank)];
  std::vector<std::int64_t> share;
  std::int64_t room_from = 0;
  for (const std::int64_t whole : room) {
    share.push_back(overlap(from, to, room_from, room_from + whole));
    room_from += whole;
  }
  return share;
}

}  // namespace

std::optional<std::vector<gid_t>> slice_components(const SliceAdjacency& slice, const Slices& slices,
                                                   Communicator& comm, int max_rounds) {
  const std::vector<std::int32_t> root = least_row_joined(slice);
  std::vector<gid_t> name(root.size());
  for (std::size_t r = 0; r < root.size(); ++r) name[r] = slice.first + root[r];
  const std::vector<gid_t> outside = outside_neighbours(slice);
  for (int round = 0; round < max_rounds; ++round) {
    const std::vector<gid_t> heard = ask_owners<gid_t>(
        outside, slices, comm, [&](gid_t id) { return name[static_cast<std::size_t>(id - slice.first)]; });
    std::vector<std::int64_t> changed{0};
    for (std::size_t r = 0; r < root.size(); ++r) {
      gid_t& least = name[static_cast<std::size_t>(root[r])];
      for (auto e = slice.offsets[r]; e < slice.offsets[r + 1]; ++e) {
        const gid_t v = slice.neighbours[static_cast<std::size_t>(e)];
        if (slice.holds(v)) continue;
        const gid_t other = heard[index_of(outside, v)];
        if (other < least) {
          least = other;
          ++changed[0];
        }
      }
    }
    for (std::size_t r = 0; r < root.size(); ++r) name[r] = name[static_cast<std::size_t>(root[r])];
    comm.all_reduce_sum(changed);
    if (changed[0] == 0) return name;
  }
  return std::nullopt;
}

WeighedComponents::WeighedComponents(std::span<const gid_t> component, std::span<const std::int64_t> weights,
                                     std::span<const std::uint8_t> training, std::int64_t light_limit,
                                     const Slices& slices, Communicator& comm)
    : component_(component),
      light_limit_(light_limit),
      slices_(slices),
      comm_(comm),
      named_(sorted_unique_where(component, [](gid_t) { return true; })),
      totals_(kLight + 2 * static_cast<std::size_t>(comm.size()), 0) {
  NJ_EXPECTS(component.size() == weights.size() && training.size() == weights.size(),
             "{} components and {} training flags for {} weights", component.size(), training.size(), weights.size());
  std::vector<ComponentAmount> partial(named_.size());
  for (std::size_t r = 0; r < component.size(); ++r) {
    ComponentAmount& amount = partial[index_of(named_, component[r])];
    amount.weight += weights[r];
    amount.training += training[r];
  }
  OwnedComponents owned = sum_at_owners(named_, partial, slices, comm);
  const auto ranks = static_cast<std::size_t>(comm.size());
  const auto rank = static_cast<std::size_t>(comm.rank());
  for (const ComponentAmount& amount : owned.amounts) {
    totals_[kWeight] += amount.weight;
    totals_[kTraining] += amount.training;
    if (amount.weight > light_limit) {
      totals_[kHeavyWeight] += amount.weight;
    } else {
      totals_[kLight + rank] += amount.weight;
      totals_[kLight + ranks + rank] += amount.training;
    }
  }
  comm.all_reduce_sum(totals_);
  owned_names_ = std::move(owned.names);
  owned_amounts_ = std::move(owned.amounts);
  const std::vector<std::int8_t> heavy_named = ask_owners<std::int8_t>(named_, slices, comm, [&](gid_t name) {
    return static_cast<std::int8_t>(owned_amounts_[index_of(owned_names_, name)].weight > light_limit_);
  });
  heavy_.reserve(component.size());
  for (const gid_t name : component) heavy_.push_back(heavy_named[index_of(named_, name)] != 0);
}

void WeighedComponents::place_light(std::span<std::int32_t> part, std::span<const std::int64_t> heavy_load,
                                    std::span<const std::int64_t> heavy_training) const {
  NJ_EXPECTS(part.size() == component_.size() && heavy_training.size() == heavy_load.size(),
             "{} parts for {} rows, {} training counts for {} loads", part.size(), component_.size(),
             heavy_training.size(), heavy_load.size());
  // Part k is to hold [line.first(k), line.first(k + 1)) of the weight and as even a share of the training vertices;
  // what the heavy components leave of that is its room.
  const auto parts = static_cast<int>(heavy_load.size());
  const Slices weight_line(totals_[kWeight], parts);
  const Slices training_line(totals_[kTraining], parts);
  std::vector<std::int64_t> weight_room;
  std::vector<std::int64_t> training_room;
  for (int k = 0; k < parts; ++k) {
    const auto at = static_cast<std::size_t>(k);
    weight_room.push_back(std::max<std::int64_t>(0, weight_line.rows(k) - heavy_load[at]));
    training_room.push_back(std::max<std::int64_t>(0, training_line.rows(k) - heavy_training[at]));
  }
  const auto ranks = static_cast<std::size_t>(comm_.size());
  const std::span<const std::int64_t> light(totals_);
  const std::vector<std::int32_t> owned_part =
      fill_rooms(owned_amounts_, light_limit_, share_of_rooms(weight_room, light.subspan(kLight, ranks), comm_.rank()),
                 share_of_rooms(training_room, light.subspan(kLight + ranks, ranks), comm_.rank()));
  const std::vector<std::int32_t> part_of_named = ask_owners<std::int32_t>(
      named_, slices_, comm_, [&](gid_t name) { return owned_part[index_of(owned_names_, name)]; });
  for (std::size_t r = 0; r < part.size(); ++r) {
    if (!heavy_[r]) part[r] = part_of_named[index_of(named_, component_[r])];
  }
}

}  // namespace nj
