#include "nj/graph/dataset.hpp"

#include <cmath>

#include "nj/core/enum_names.hpp"
#include "nj/core/error.hpp"
#include "nj/core/printable.hpp"

namespace nj {

namespace {

constexpr EnumNames<SelfLoopPolicy, 3> kSelfLoopPolicyNames{
    "self-loop policy",
    {{{SelfLoopPolicy::kKept, "kept"}, {SelfLoopPolicy::kRemoved, "removed"}, {SelfLoopPolicy::kAdded, "added"}}}};

}  // namespace

const char* to_string(SelfLoopPolicy policy) { return kSelfLoopPolicyNames.name(policy); }
SelfLoopPolicy parse_self_loop_policy(const std::string& text) { return kSelfLoopPolicyNames.parse(text); }

std::int64_t count(std::span<const std::uint8_t> mask) {
  std::int64_t n = 0;
  for (const auto m : mask) n += m != 0 ? 1 : 0;
  return n;
}

void Dataset::validate(const std::string& where) const {
  validate_all_but_features(where);
  const auto n = static_cast<std::int64_t>(num_vertices());
  NJ_REQUIRE(features.rows() == n, "{}: /features: {} rows but the graph has {} vertices", where, features.rows(), n);
  require_finite_features(features, where);
}

void Dataset::validate_all_but_features(const std::string& where) const {
  graph.validate(where + ": graph");
  validate_vertex_data(where);
}

void Dataset::validate_vertex_data(const std::string& where) const {
  const auto n = static_cast<std::int64_t>(num_vertices());
  NJ_REQUIRE(static_cast<std::int64_t>(labels.size()) == n, "{}: {} labels for {} vertices", where, labels.size(), n);
  NJ_REQUIRE(num_classes > 0, "{}: number of classes must be positive, got {}", where, num_classes);
  const std::pair<const char*, const std::vector<std::uint8_t>*> masks[] = {
      {"train", &train_mask}, {"val", &val_mask}, {"test", &test_mask}};
  for (const auto& [mask_name, mask] : masks) {
    NJ_REQUIRE(static_cast<std::int64_t>(mask->size()) == n, "{}: {} mask has {} entries for {} vertices", where,
               mask_name, mask->size(), n);
  }
  for (std::int64_t v = 0; v < n; ++v) {
    const auto label = labels[static_cast<std::size_t>(v)];
    NJ_REQUIRE(label >= -1 && label < num_classes, "{}: /labels: vertex {} has label {} outside [0, {})", where, v,
               label, num_classes);
    if (label == -1) {
      for (const auto& [mask_name, mask] : masks) {
        NJ_REQUIRE((*mask)[static_cast<std::size_t>(v)] == 0,
                   "{}: /masks/{}: vertex {} is in the split but has no label", where, mask_name, v);
      }
    }
  }
  NJ_REQUIRE(count(train_mask) > 0, "{}: the train split is empty", where);
  if (!community_order.empty()) {
    NJ_REQUIRE(static_cast<std::int64_t>(community_order.size()) == n,
               "{}: /graph/community_order: {} entries for {} vertices", where, community_order.size(), n);
    std::vector<char> seen(static_cast<std::size_t>(n), 0);
    for (std::size_t i = 0; i < community_order.size(); ++i) {
      const vid_t v = community_order[i];
      NJ_REQUIRE(v >= 0 && v < n && seen[static_cast<std::size_t>(v)] == 0,
                 "{}: /graph/community_order: entry {} is {}, which is {} (the order must be a permutation of the "
                 "vertices)",
                 where, i, v, v >= 0 && v < n ? "listed twice" : "not a vertex");
      seen[static_cast<std::size_t>(v)] = 1;
    }
  }
  if (!vertex_ids.empty()) {
    NJ_REQUIRE(static_cast<std::int64_t>(vertex_ids.size()) == n, "{}: /graph/vertex_ids: {} entries for {} vertices",
               where, vertex_ids.size(), n);
    for (std::size_t v = 0; v < vertex_ids.size(); ++v) {
      NJ_REQUIRE(vertex_ids[v] >= 0 && (v == 0 || vertex_ids[v] > vertex_ids[v - 1]),
                 "{}: /graph/vertex_ids: entry {} is {} (ids must be non-negative and ascending)", where, v,
                 vertex_ids[v]);
    }
  }
}

void require_finite_features(ConstRows features, const std::string& where, std::span<const gid_t> vertex_ids,
                             std::int64_t first_row) {
  for (std::int64_t r = 0; r < features.rows; ++r) {
    const float* row = features.row(r);
    for (std::int64_t c = 0; c < features.cols; ++c) {
      if (std::isfinite(row[c])) continue;
      const std::int64_t vertex = vertex_ids.empty() ? first_row + r : vertex_ids[static_cast<std::size_t>(r)];
      throw InputError(
          fmt::format("{}: /features: vertex {}, column {} is {} (features must be finite)", where, vertex, c, row[c]));
    }
  }
}

void row_normalize(Matrix& features) {
  for (std::int64_t r = 0; r < features.rows(); ++r) {
    float* row = features.row(r);
    double sum = 0.0;
    for (std::int64_t c = 0; c < features.cols(); ++c) sum += std::fabs(row[c]);
    if (sum == 0.0) continue;
    const auto scale = static_cast<float>(1.0 / sum);
    for (std::int64_t c = 0; c < features.cols(); ++c) row[c] *= scale;
  }
}

}  // namespace nj
