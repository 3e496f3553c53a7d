#include "nj/exec/sparse_inputs.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "nj/core/enum_names.hpp"

namespace nj {
namespace {

constexpr EnumNames<SparseInputs, 3> kSparseInputsNames{
    "sparse inputs", {{{SparseInputs::kAuto, "auto"}, {SparseInputs::kOff, "off"}, {SparseInputs::kOn, "on"}}}};

}  // namespace

SparseInputs parse_sparse_inputs(const std::string& text) { return kSparseInputsNames.parse(text); }
const char* to_string(SparseInputs choice) { return kSparseInputsNames.name(choice); }

bool takes_sparse_inputs(SparseInputs choice, ConstRows features, bool stored_sparse, Communicator* comm) {
  if (choice != SparseInputs::kAuto) return choice == SparseInputs::kOn;
  std::int64_t counts[] = {0, features.size(), stored_sparse ? 0 : 1};  // non-zeros, entries, ranks stored dense
  for (std::int64_t r = 0; r < features.rows; ++r) {
    const float* row = features.row(r);
    counts[0] += std::count_if(row, row + features.cols, [](float x) { return x != 0.0F; });
  }
  if (comm != nullptr && comm->size() > 1) comm->all_reduce_sum(counts);
  return counts[2] == 0 && counts[0] * kSparseInputsDensity <= counts[1];
}

std::optional<SparseRows> sparse_inputs(SparseInputs choice, ConstRows features, Communicator* comm) {
  if (!takes_sparse_inputs(choice, features, true, comm)) return std::nullopt;
  return sparse_input_rows(features);
}

SparseRows sparse_input_rows(ConstRows features) {
  SparseRows rows = sparse_rows_of(features);
  spdlog::info("first layer: the features as sparse rows, {} non-zero entries of {} (one in {:.0f})", rows.nonzeros(),
               features.size(),
               static_cast<double>(features.size()) / static_cast<double>(std::max<std::int64_t>(rows.nonzeros(), 1)));
  return rows;
}

InputShape input_shape(const std::optional<SparseRows>& inputs) {
  if (!inputs) return {};
  return {true, inputs->max_row_nonzeros()};
}

SparseBlockView drop_entries(Backend& backend, Device& device, const SparseBlockView& x, DeviceSpan<const gid_t> gids,
                             const RandomStream& stream, float p, bool for_backward, DeviceArray<float>& dropped) {
  if (p <= 0.0F || x.num_edges() == 0) return x;  // rows without entries (a block without weights) drop nothing
  dropped = DeviceArray<float>(device, x.num_edges(), "rows: dropped inputs");
  SparseBlockView out = x;
  if (for_backward) {
    backend.dropout_entries(x, gids, stream, p, {}, dropped.view());
    out.out_weight = dropped.view().data;
  } else {
    backend.dropout_entries(x, gids, stream, p, dropped.view(), {});
    out.edge_weight = dropped.view().data;
  }
  return out;
}

}  // namespace nj
