#pragma once
// The first layer's inputs as sparse rows. Bag-of-words features are mostly zero: the first layer then multiplies
// their stored entries (SpMM over a block whose destinations are the rows and whose sources are the columns,
// sparse_rows_block), draws dropout on those entries alone, and takes its weight gradient as Xᵀ·∂Z over them (SpMM's
// transpose), instead of GEMMs over dense rows. The device holds the entries, not the rows. Results differ from dense
// inputs only in rounding: dropout's mask is addressed by (global id, column) either way.
#include <cstdint>
#include <optional>
#include <string>

#include "nj/comm/communicator.hpp"
#include "nj/core/matrix.hpp"
#include "nj/device/device.hpp"
#include "nj/graph/sparse_block.hpp"
#include "nj/kernels/backend.hpp"

namespace nj {

enum class SparseInputs {
  kAuto,  // sparse where at most one entry in kSparseInputsDensity is non-zero
  kOff,
  kOn,
};
SparseInputs parse_sparse_inputs(const std::string& text);  // auto, off or on
const char* to_string(SparseInputs choice);
// Where SpMM over the stored entries beats a GEMM over the dense rows (scripts/bench/sparse_inputs.py measures it).
inline constexpr std::int64_t kSparseInputsDensity = 16;

// Whether the first layer takes `features` as sparse rows. `on` and `off` say so. `auto` takes them where, over every
// rank of `comm` (a collective; null: this rank alone), at most one entry in kSparseInputsDensity is non-zero and
// every rank's file stores its features sparse (`stored_sparse`): nj plan, which reads no values of features stored
// dense, then decides alike.
bool takes_sparse_inputs(SparseInputs choice, ConstRows features, bool stored_sparse, Communicator* comm);
// The features' sparse rows where takes_sparse_inputs(choice, features, true, comm) (logged); std::nullopt where the
// first layer multiplies dense rows.
std::optional<SparseRows> sparse_inputs(SparseInputs choice, ConstRows features, Communicator* comm = nullptr);
// The features' sparse rows, logged as sparse_inputs logs them.
SparseRows sparse_input_rows(ConstRows features);

// What a plan knows of the first layer's inputs.
struct InputShape {
  bool sparse = false;
  std::int64_t max_row_nonzeros = 0;  // of sparse inputs
  bool operator==(const InputShape&) const = default;
};
InputShape input_shape(const std::optional<SparseRows>& inputs);

// Sparse input rows `x` (a sparse_rows_block on the device) after dropout, their rows' global ids in `gids`: the
// dropped weights go into `dropped`, in in-edge order for the transform, or in out-edge order for its backward. x
// itself where p is 0.
SparseBlockView drop_entries(Backend& backend, Device& device, const SparseBlockView& x, DeviceSpan<const gid_t> gids,
                             const RandomStream& stream, float p, bool for_backward, DeviceArray<float>& dropped);

}  // namespace nj
