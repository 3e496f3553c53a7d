#pragma once
// What stays on the device between the steps of a running pass. Without a budget, what a step uploads (a
// subgraph's block, a transform chunk's input rows) stays until its last reader in the pass, so that the backward
// half finds what the forward half uploaded or computed; reuse's one pass keeps its blocks and features for the
// whole run (it "lasts"). Within a budget the plan counted an upload for its own step only, and it is streamed,
// but for the packed blocks and feature chunks settle_device_memory keeps in the budget's spare room for the run.
// Some things stay whatever the budget, as the plan counted them: a layer's outputs that are the next layer's
// input, the dropout of rows that stay, a first layer's sums, and the gradients of outputs that stayed.
#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "nj/core/types.hpp"
#include "nj/device/device.hpp"
#include "nj/kernels/device_block.hpp"

namespace nj {

// Kept per (layer, subgraph or transform chunk) of the running pass.
template <typename T>
using ByChunk = std::map<std::pair<std::size_t, std::size_t>, T>;

// A subgraph's block on the device: without a budget uploaded whole, to stay for the pass or the run (replayed on a
// planning device, which moves nothing, as its allocation alone); within a budget packed, and expanded by each step
// that reads it (PackedBlock, ExpandedBlock).
struct StepBlock {
  DeviceBlock whole;
  DeviceArray<std::byte> placeholder;
  std::optional<PackedBlock> packed;
};

struct StepResidency {
  StepResidency(bool keep_uploads, bool keep_for_the_run) : uploads_stay(keep_uploads), lasting(keep_for_the_run) {}

  // What layer l's chunk k uploads: kept in `resident` where uploads stay, else made into `streamed` for the
  // caller's step alone.
  template <typename T, typename Make>
  T& staying(ByChunk<T>& resident, std::size_t l, std::size_t k, std::optional<T>& streamed, Make&& make) {
    if (!uploads_stay) return streamed.emplace(make());
    auto [it, inserted] = resident.try_emplace({l, k});
    if (inserted) it->second = make();
    return it->second;
  }

  // What `resident` holds for layer l's chunk k, taken out of it (its last reader frees it); nothing if it holds
  // none.
  static std::optional<DeviceMatrix> take(ByChunk<DeviceMatrix>& resident, std::size_t l, std::size_t k) {
    const auto it = resident.find({l, k});
    if (it == resident.end()) return std::nullopt;
    std::optional<DeviceMatrix> taken(std::move(it->second));
    resident.erase(it);
    return taken;
  }

  // At the end of a pass (or of a step that failed), all goes but what lasts for the run.
  void release() {
    if (!lasting) {
      blocks.clear();
      inputs.clear();
      sparse_inputs.clear();
    }
    std::erase_if(inputs, [](const auto& entry) { return entry.first.first > 0; });
    dropped.clear();
    sums.clear();
    output_gradients.clear();
  }

  const bool uploads_stay;  // no budget: uploads stay until their last reader in the pass
  const bool lasting;       // reuse's one pass without a budget: its blocks and features stay for the run
  ByChunk<std::span<const vid_t>> lasting_sources;  // of the lasting blocks and the staying ones
  std::deque<std::vector<vid_t>> built_sources;     // what lasting_sources views where the pass builds its blocks
  ByChunk<StepBlock> blocks;
  // Within a budget, what stays for the run: packed blocks (Pass::blocks_stay), features (Pass::inputs_stay), and
  // the room for a first layer's sums of its inputs (Pass::sums_stay), which each epoch's forward writes and its
  // backward reads.
  ByChunk<StepBlock> staying_blocks;
  ByChunk<DeviceMatrix> staying_inputs;
  ByChunk<DeviceMatrix> staying_sums;
  ByChunk<DeviceMatrix> inputs;        // transform inputs; a layer above the first takes the previous one's outputs
  ByChunk<DeviceBlock> sparse_inputs;  // the first layer's, where they are sparse rows (sparse_inputs.hpp)
  ByChunk<DeviceMatrix> dropped;       // their dropout, where it drops
  ByChunk<DeviceMatrix> sums;          // per first-layer subgraph, its inputs' sums (Pass::first_layer_sums_inputs)
  // Per layer and subgraph whose outputs stay: their gradients, from the next layer's transform backward.
  ByChunk<DeviceMatrix> output_gradients;
};

}  // namespace nj
