// Replays an EpochPlan on a device. The step loop (run_steps) runs a pass's steps phase by phase: the cache pools
// of fixed slots (cache_pools.hpp) carry out the cache plan's transfers, the exchange with other ranks advances
// at the plan's points (pass_exchange.hpp), what stays on the device between steps is kept by its rules
// (step_residency.hpp), and each step runs its layer's kernels on device buffers. The same code replayed on a
// planning device, which moves nothing (moves_data false), measures the plan's memory (forecast_device_memory).
#include "nj/exec/subgraph_executor.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <tuple>

#include "cache_pools.hpp"
#include "gradient_sum.hpp"
#include "host_rows.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/device/arena.hpp"
#include "nj/device/planning_device.hpp"
#include "nj/device/transfers.hpp"
#include "nj/exec/host_footprint.hpp"
#include "nj/kernels/device_block.hpp"
#include "nj/model/device_parameters.hpp"
#include "nj/scheduler/room_schedule.hpp"
#include "pass_exchange.hpp"
#include "replay.hpp"
#include "step_residency.hpp"

namespace nj {
namespace {

// The slot of each entry of a step's lists (what CachePlanDetail::kFull would have recorded).
struct StepSlots {
  std::vector<vid_t> reads, writes, accumulates, next_gradient_reads;
};

}  // namespace

struct SubgraphExecutor::State {
  State(Backend& b, Device& d, const Model& model, const LocalGraph& local, ConstRows f, const SparseRows* sparse,
        const EpochPlan& p, Communicator* ranks)
      : backend(b),
        device(d),
        comm(ranks),
        transfers(device),
        features(f),
        sparse_features(sparse),
        num_owned(local.num_owned),
        global_id(local.global_id),
        plan(p),
        exchange(ranks, local, model, p.first_layer_sums_inputs(), homes, outputs, grad_outputs),
        parameters(transfers, model, p.first_layer_sums_inputs(), !p.options.forward_only),
        pools(
            backend, transfers, 2 * model.num_layers(), plan.staging_limit_bytes,
            [this](std::uint32_t tensor) { return homes[tensor]; }, metrics.wait_seconds),
        model_of_run(&model),
        moves_data(device.moves_data()),
        residency(plan.options.device_budget == kUnlimited, !plan.passes.empty() && plan.passes.front().lasting) {
    if (!plan.closures.empty()) closure_planner.emplace(model, local);
    // Transformed rows and their gradients have homes for mirrors too, shared by tensors whose phases do not
    // overlap; layer outputs only for aggregated rows, and a layer's output gradients overwrite its outputs in
    // place (the step that writes a row's gradient is the last to read the row), except the last layer's, which
    // the loss writes while it reads the logits.
    const std::int64_t rows = plan.largest_pass_rows;
    const std::int64_t aggregated = plan.largest_aggregated_rows;
    const std::size_t layers = model.num_layers();
    const bool sums_inputs = plan.first_layer_sums_inputs();
    const RowHomes layout = row_homes(
        model, sums_inputs, plan.options.device_budget != kUnlimited && plan.options.mode == ExecutionMode::kReuse);
    for (const std::int64_t width : layout.width) home_buffers.emplace_back(rows, width);
    for (std::size_t t = 0; t < 2 * layers; ++t) {
      homes.push_back(home_buffers[layout.buffer_of[t]].view(layout.row_width[t]));
      slot_of.emplace_back(static_cast<std::size_t>(rows), -1);
    }
    for (std::size_t l = 0; l < layers; ++l) {
      const Layer& layer = model.layer(l);
      // Where the next layer transforms its mirrors, their rows of these outputs arrive from their owners.
      const bool mirror_rows = !plan.passes.empty() && plan.passes.front().mirrors_transformed(l + 1);
      output_rows.emplace_back(mirror_rows ? rows : aggregated, layer.out_dim());
      outputs.push_back(output_rows.back().view());
      grad_outputs.push_back(outputs.back());
    }
    if (sums_inputs && !residency.uploads_stay) input_sums = HostRows(aggregated, model.layer(0).input_sums_width());
    last_gradients = HostRows(aggregated, model.layer(layers - 1).out_dim());
    grad_outputs.back() = last_gradients.view();
    // Reuse's one pass has the owned vertices as its first rows: the last layer's outputs are the logits.
    if (plan.closures.empty()) {
      logits = ConstRows(outputs.back()).slice(0, num_owned);
    } else {
      own_logits = HostRows(num_owned, model.layer(layers - 1).out_dim());
      logits = own_logits.view();
    }
    if (residency.lasting) upload_lasting(plan.passes.front());
    if (!plan.passes.empty() && !residency.lasting) upload_staying(plan.passes.front());
  }

  // Within a budget, the packed blocks and features the plan keeps on the device for the run (Pass::blocks_stay,
  // Pass::inputs_stay), uploaded here, once, as a lasting pass's are.
  void upload_staying(const Pass& p) {
    pass = &p;
    subgraphs.emplace(p, global_id);
    for (std::size_t l = 0; l < p.blocks_stay.size(); ++l) {
      for (std::size_t k = 0; k < p.blocks_stay[l].size(); ++k) {
        if (p.block_stays(l, k)) residency.staying_blocks[{l, k}] = block_for_the_run(p, l, k);
      }
    }
    for (std::size_t k = 0; k < p.sums_stay.size(); ++k) {
      if (p.sums_stays(k)) {
        residency.staying_sums[{0, k}] =
            DeviceMatrix(device, static_cast<std::int64_t>(p.destinations(0, k).size()),
                         model_of_run->layer(0).input_sums_width(), "rows: aggregated inputs");
      }
    }
    for (std::size_t k = 0; k < p.inputs_stay.size(); ++k) {
      if (p.input_stays(k)) {
        residency.staying_inputs[{0, k}] =
            upload(features, layer_input_rows(0, p.transform_chunks[0][k]), "rows: features");
      }
    }
    forget_the_upload();
  }

  // Without a budget reuse's one pass keeps its blocks and its first layer's inputs, the features, on the device
  // for the whole run, as in-memory training does: they are uploaded here, once, ahead of every epoch's own
  // allocations, so that every epoch starts from the same device memory and moves only what it computes.
  void upload_lasting(const Pass& p) {
    NJ_EXPECTS(plan.passes.size() == 1 && plan.closures.empty(), "a lasting pass is reuse's one pass");
    pass = &p;
    subgraphs.emplace(p, global_id);
    for (std::size_t l = 0; l < p.layer_parts.size(); ++l) {
      for (std::size_t k = 0; k < p.layer_parts[l].size(); ++k) residency.blocks[{l, k}] = block_for_the_run(p, l, k);
    }
    for (std::size_t k = 0; k < p.transform_chunks[0].size(); ++k) {
      if (sparse_features != nullptr) {
        residency.sparse_inputs[{0, k}] = upload_sparse(p.transform_chunks[0][k], "rows: features");
      } else {
        residency.inputs[{0, k}] = upload(features, layer_input_rows(0, p.transform_chunks[0][k]), "rows: features");
      }
    }
    forget_the_upload();
  }

  // Block (l, k) of pass p made to stay for the run, its sources noted for the steps that read it.
  StepBlock block_for_the_run(const Pass& p, std::size_t l, std::size_t k) {
    part = moves_data || p.keeps_blocks() ? &subgraphs->get(l, k) : nullptr;
    if (part != nullptr) {
      // Kept blocks last as long as the plan; a block built here is gone with the next one.
      residency.lasting_sources[{l, k}] =
          p.keeps_blocks() ? std::span<const vid_t>(part->sources)
                           : std::span<const vid_t>(residency.built_sources.emplace_back(part->sources));
    }
    return new_step_block(l, k);
  }

  // What the run moves once, before its first epoch, is not an epoch's.
  void forget_the_upload() {
    part = nullptr;
    subgraphs.reset();
    pass = nullptr;
    device.synchronize();
    transfers.take_traffic();
    device.reset_transfer_stats();
    metrics = {};
  }

  // Layer l's input rows `rows` of the running pass, as host rows and the indices to read there.
  ConstRows layer_input(std::size_t l) const { return l == 0 ? features : ConstRows(outputs[l - 1]); }
  std::vector<vid_t> layer_input_rows(std::size_t l, std::span<const vid_t> rows) const {
    if (l > 0 || pass->vertices.empty()) return {rows.begin(), rows.end()};
    std::vector<vid_t> vertices;
    vertices.reserve(rows.size());
    for (const vid_t r : rows) vertices.push_back(pass->vertex(r));
    return vertices;
  }
  // The global ids of pass rows, on the device (what dropout masks are addressed by).
  DeviceArray<gid_t> gids_of(std::span<const vid_t> rows) {
    DeviceArray<gid_t> gids(device, static_cast<std::int64_t>(rows.size()), "index: global ids");
    // Gathered straight into the staging (a replay on a planning device counts the copy and gathers nothing).
    transfers.upload_with(gids.view(), Traffic::kIndex, [&](gid_t* staging, std::int64_t first, std::int64_t count) {
      for (std::int64_t i = first; i < first + count; ++i) {
        *staging++ = global_id[static_cast<std::size_t>(pass->vertex(rows[static_cast<std::size_t>(i)]))];
      }
    });
    return gids;
  }

  // Copies host rows `vertices` of `host` into a new device buffer, packed into one transfer.
  DeviceMatrix upload(ConstRows host, std::span<const vid_t> vertices, const char* what) {
    DeviceMatrix rows(device, static_cast<std::int64_t>(vertices.size()), host.cols, what);
    timed([&] { transfers.upload(host, vertices, rows.view()); });
    return rows;
  }

  // The sparse features of pass rows `rows`, as a block on the device.
  DeviceBlock upload_sparse(std::span<const vid_t> rows, const char* what) {
    const SparseBlock block = sparse_rows_block(*sparse_features, layer_input_rows(0, rows));
    DeviceBlock uploaded;
    timed([&] { uploaded = DeviceBlock(transfers, block, what, Traffic::kRows); });
    return uploaded;
  }

  // Copies device rows back into host rows `vertices`.
  void download(ConstDeviceRows device_rows, Rows host, std::span<const vid_t> vertices) {
    timed([&] { transfers.download(device_rows, host, vertices); });
  }

  // Runs fn, counting its time as time compute waited for copies.
  template <typename Fn>
  void timed(Fn&& fn) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    metrics.wait_seconds += seconds_since(start);
  }

  // Runs steps [first, last) of the running pass, phase by phase. Where the plan allows it, the next step's loads are
  // issued before the current step computes, so that the copy engine moves them meanwhile.
  template <typename StepFn>
  void run_steps(std::size_t first, std::size_t last, StepFn&& run_step) {
    CachePools::PendingLoads loads;
    bool prefetched = false;
    const AccessTrace& trace = pass->trace;
    const CachePlan& cache = pass->cache;
    for (std::size_t k = first; k < last; ++k) {
      const std::uint32_t phase = trace.steps[k].phase;
      if (k == first || trace.steps[k - 1].phase != phase) {
        if (planning != nullptr) planning->begin_phase(phase);
        pools.begin_phase(trace, phase);
      }
      exchange.advance(*pass, k);
      const StepPlan& step = cache.steps[k];
      if (!prefetched) {
        pools.write_back(step.evict_writeback);
        loads = pools.issue_loads(step.loads);
      }
      pools.finish_loads(loads);
      pools.zero(step.zeroed);
      const bool phase_ends = k + 1 == last || trace.steps[k + 1].phase != phase;
      prefetched = !phase_ends && cache.steps[k + 1].prefetch;
      if (prefetched) {
        pools.write_back(cache.steps[k + 1].evict_writeback);
        loads = pools.issue_loads(cache.steps[k + 1].loads);
      }
      const auto start = std::chrono::steady_clock::now();
      prepare_step(k);
      run_step(k);
      metrics.compute_seconds += seconds_since(start);
      exchange.poll();
      if (phase_ends) pools.end_phase(cache.phase_ends[phase].writeback);
    }
    exchange.advance(*pass, last);
  }

  // Where step k's rows are: its loads and allocations take their slots (a row that left keeps a stale entry,
  // which nothing reads before a later load or allocation gives it a new one); an aggregation's subgraph is made
  // ready (its kept block, or one built now). A replay on a planning device builds nothing: the slots' values do
  // not matter there, only how many there are.
  void prepare_step(std::size_t k) {
    const StepPlan& step = pass->cache.steps[k];
    for (const auto* assignments : {&step.loads, &step.allocations}) {
      for (const SlotAssignment& a : *assignments) {
        slot_of[a.row.tensor][static_cast<std::size_t>(a.row.row)] = static_cast<vid_t>(a.slot);
      }
    }
    const PlannedStep& s = pass->steps[k];
    part = nullptr;
    std::span<const vid_t> sources;
    if (pass->reads_block(s)) {
      if (const auto kept = residency.lasting_sources.find({s.layer, s.index});
          kept != residency.lasting_sources.end()) {
        sources = kept->second;  // the block is on the device: nothing to build
      } else if (moves_data || pass->keeps_blocks()) {
        part = &subgraphs->get(s.layer, s.index);
        sources = part->sources;
      } else {
        replay_sources.assign(static_cast<std::size_t>(pass->layer_parts[s.layer][s.index].num_src), 0);
        sources = replay_sources;
      }
    }
    const StepRows rows = rows_of_step(*model_of_run, *pass, k, sources);
    const auto find = [&](const RowRun& run, std::vector<vid_t>& found) {
      found.resize(run.rows.size());
      if (!moves_data) return;  // a replay allocates the slots' arrays, whatever they hold
      const std::vector<vid_t>& slot_of_row = slot_of[run.tensor];
      for (std::size_t i = 0; i < run.rows.size(); ++i) found[i] = slot_of_row[static_cast<std::size_t>(run.rows[i])];
    };
    find(rows.reads, slots.reads);
    find(rows.writes, slots.writes);
    find(rows.accumulates, slots.accumulates);
    find(rows.next_gradient_reads, slots.next_gradient_reads);
  }

  // The running aggregation's block on the device.
  const StepBlock& step_block(std::size_t l, std::size_t k, std::optional<StepBlock>& streamed) {
    if (const auto stays = residency.staying_blocks.find({l, k}); stays != residency.staying_blocks.end()) {
      return stays->second;
    }
    return residency.staying(residency.blocks, l, k, streamed, [&] { return new_step_block(l, k); });
  }
  // Layer l's input rows of transform chunk k on the device, as uploaded (before dropout).
  DeviceMatrix& transform_input(std::size_t l, std::size_t k, std::optional<DeviceMatrix>& streamed) {
    if (const auto stays = residency.staying_inputs.find({l, k}); stays != residency.staying_inputs.end()) {
      return stays->second;
    }
    // Within a budget, the outputs of a chained layer's subgraph are its next step's (Pass::chained).
    if (!residency.uploads_stay) {
      if (std::optional<DeviceMatrix> outputs_left = StepResidency::take(residency.inputs, l, k)) {
        return streamed.emplace(std::move(*outputs_left));
      }
    }
    return residency.staying(residency.inputs, l, k, streamed, [&] {
      const std::vector<vid_t>& rows = pass->transform_chunks[l][k];
      return upload(layer_input(l), layer_input_rows(l, rows), "rows: transform inputs");
    });
  }
  // The first layer's sparse input rows of transform chunk k on the device.
  const DeviceBlock& sparse_transform_input(std::size_t k, std::optional<DeviceBlock>& streamed) {
    return residency.staying(residency.sparse_inputs, 0, k, streamed,
                             [&] { return upload_sparse(pass->transform_chunks[0][k], "rows: transform inputs"); });
  }
  StepBlock new_step_block(std::size_t l, std::size_t k) {
    StepBlock b;
    if (!residency.uploads_stay) {
      const BlockShape shape = packed_block_shape(*model_of_run, *pass, l, k, plan.options.narrow_source_limit);
      if (part != nullptr) {
        b.packed.emplace(transfers, part->block, shape, "graph: subgraph");
      } else {
        b.packed.emplace(device, shape, "graph: subgraph");
      }
    } else if (part != nullptr) {
      b.whole = DeviceBlock(transfers, part->block, "graph: subgraph", Traffic::kStructure);
    } else {
      const PartSize& size = pass->layer_parts[l][k];
      const auto destinations = static_cast<std::int64_t>(pass->destinations(l, k).size());
      b.placeholder = DeviceArray<std::byte>(
          device, DeviceBlock::bytes_for(destinations, size.num_src, size.num_edges, pass->graph.weighted()),
          "graph: subgraph");
    }
    return b;
  }

  // The kernels' view of a step's block: a packed block as it lies where the backend reads it so, else expanded into
  // `expanded` (with the out-edges where the step reads them), which the caller keeps while kernels use the view.
  SparseBlockView block_view(const StepBlock& b, bool out_edges, ExpandedBlock& expanded) {
    if (!b.packed) return b.whole.view();
    if (plan.options.library.reads_packed_blocks) return b.packed->direct_view();
    expanded = ExpandedBlock(backend, device, *b.packed, out_edges);
    return expanded.view();
  }
  // The view with its sources read through `src_row` (row src_row[j] of the input holds local source j).
  static SparseBlockView through(SparseBlockView view, DeviceSpan<const vid_t> src_row) {
    view.src_row = src_row.data;
    return view;
  }

  // Pool rows `run` where they are one run of consecutive slots (as pools lay out the rows of a pass that fits
  // whole): kernels then read or write them in place, not through a gather or scatter by the slots. The
  // buffers the gather would have used are allocated either way, so that a replay on the planning device, which
  // does not know the slots, places the same allocations.
  std::optional<DeviceRows> pool_run(std::uint32_t tensor, std::span<const vid_t> run) {
    const std::optional<vid_t> first = consecutive_from(run);
    if (!moves_data || !first) return std::nullopt;
    return pools.pool(tensor).slice(*first, static_cast<std::int64_t>(run.size()));
  }

  // ---- steps ----

  // Layer l's input dropout of pass rows `rows`, from `in` into `out` (which may be the same rows); false where
  // nothing drops, and `out` is left as it was.
  bool dropout_rows(Model& model, std::size_t l, std::uint32_t epoch, bool training, std::span<const vid_t> rows,
                    ConstDeviceRows in, DeviceRows out) {
    const float p = model.dropout_before(l);
    if (!training || p <= 0.0F) return false;
    const DeviceArray<gid_t> gids = gids_of(rows);
    backend.dropout(in, gids.view(), feature_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch), p,
                    out);
    return true;
  }

  // Sparse input rows `input` of pass rows `rows` after the first layer's dropout, its weights in `dropped` (in-edge
  // order for the transform, out-edge order for its backward); `input` itself where nothing drops.
  SparseBlockView dropped_entries(Model& model, std::span<const vid_t> rows, const DeviceBlock& input,
                                  std::uint32_t epoch, bool training, bool for_backward, DeviceArray<float>& dropped) {
    const float p = model.dropout_before(0);
    if (!training || p <= 0.0F) return input.view();
    const DeviceArray<gid_t> gids = gids_of(rows);
    return drop_entries(backend, device, input.view(), gids.view(), feature_dropout_stream(model.config(), 0, epoch), p,
                        for_backward, dropped);
  }

  // Runs `transform_into(z)` for layer l's rows of the running transform chunk, `rows` of them: straight into their
  // pool slots where they are one run of them, else into packed rows scattered there.
  template <typename TransformInto>
  void write_transformed(std::size_t l, std::int64_t rows, TransformInto&& transform_into) {
    DeviceMatrix out(device, rows, model_of_run->layer(l).row_width(), "rows: transformed rows");
    const DeviceArray<vid_t> write_slots = slots_on_device(transfers, slots.writes);
    if (const auto in_place = pool_run(z_index(l), slots.writes)) {
      transform_into(*in_place);
      return;
    }
    transform_into(out.view());
    backend.copy_rows(out.view(), {}, pools.pool(z_index(l)), write_slots.view(), out.rows());
  }

  // The gradients of layer l's transformed rows of the running transform chunk, `rows` of them in slots
  // `slots_of_rows` of their pool: in place where they are one run of it, else gathered into `packed`.
  DeviceRows chunk_gradients(std::size_t l, std::int64_t rows, std::span<const vid_t> slots_of_rows,
                             DeviceMatrix& packed) {
    packed = DeviceMatrix(device, rows, model_of_run->layer(l).row_width(), "rows: transformed-row gradients");
    const DeviceArray<vid_t> read_slots = slots_on_device(transfers, slots_of_rows);
    if (const auto run = pool_run(grad_index(l), slots_of_rows)) return *run;
    backend.copy_rows(pools.pool(grad_index(l)), read_slots.view(), packed.view(), {}, rows);
    return packed.view();
  }

  void transform(Model& model, std::size_t l, std::size_t k, std::uint32_t epoch, bool training) {
    const std::vector<vid_t>& rows = pass->transform_chunks[l][k];
    if (l == 0 && sparse_features != nullptr) {
      // Dropout of sparse rows is drawn again by the backward half (one draw per stored entry), so none stays.
      std::optional<DeviceBlock> streamed;
      const DeviceBlock& input = sparse_transform_input(k, streamed);
      DeviceArray<float> dropped;
      const SparseBlockView x = dropped_entries(model, rows, input, epoch, training, false, dropped);
      write_transformed(l, static_cast<std::int64_t>(rows.size()),
                        [&](DeviceRows z) { Layer::transform(backend, parameters.layer(l).weight.view(), x, z); });
      return;
    }
    std::optional<DeviceMatrix> streamed;
    DeviceMatrix& input = transform_input(l, k, streamed);
    if (pass->sums_inputs(l)) {
      // The rows aggregated are the inputs after dropout, written to their slots; the backward needs none of them.
      DeviceMatrix out(device, input.rows(), input.cols(), "rows: dropped inputs");
      const DeviceArray<vid_t> write_slots = slots_on_device(transfers, slots.writes);
      const auto in_place = pool_run(z_index(l), slots.writes);
      const DeviceRows dropped = in_place ? *in_place : out.view();
      if (!dropout_rows(model, l, epoch, training, rows, input.view(), dropped)) {
        backend.copy_rows(input.view(), {}, dropped, {}, input.rows());
      }
      if (!in_place) backend.copy_rows(out.view(), {}, pools.pool(z_index(l)), write_slots.view(), out.rows());
      return;
    }
    // Dropout works in place on streamed rows; rows that stay keep their values for the backward half, and where
    // they stay until then only (no budget), their dropout too, which the backward half would otherwise draw again.
    DeviceMatrix dropped =
        streamed ? DeviceMatrix() : DeviceMatrix(device, input.rows(), input.cols(), "rows: dropped inputs");
    const DeviceRows dropout_out = streamed ? input.view() : dropped.view();
    const bool drops = dropout_rows(model, l, epoch, training, rows, input.view(), dropout_out);
    const ConstDeviceRows x = drops ? dropout_out : input.view();
    write_transformed(l, x.rows,
                      [&](DeviceRows z) { Layer::transform(backend, parameters.layer(l).weight.view(), x, z); });
    if (residency.uploads_stay && drops) residency.dropped[{l, k}] = std::move(dropped);
  }

  void aggregate(Model& model, std::size_t l, std::size_t k, std::uint32_t epoch, bool training) {
    const std::span<const vid_t> destinations = pass->destinations(l, k);
    std::optional<StepBlock> streamed;
    const StepBlock& block = step_block(l, k, streamed);
    const DeviceArray<vid_t> read_slots = slots_on_device(transfers, slots.reads);
    Layer& layer = model.layer(l);
    const auto num_dst = static_cast<std::int64_t>(destinations.size());
    DeviceMatrix out(device, num_dst, layer.out_dim(), "rows: aggregated rows");
    // A first layer's sums of its inputs: into the room that stays for them, or a buffer of the step's.
    const auto staying_sums = residency.staying_sums.find({l, k});
    const bool sums_stay = staying_sums != residency.staying_sums.end();
    DeviceMatrix sums = pass->sums_inputs(l) && !sums_stay
                            ? DeviceMatrix(device, num_dst, layer.input_sums_width(), "rows: aggregated inputs")
                            : DeviceMatrix();
    const DeviceRows sums_rows = sums_stay ? staying_sums->second.view() : sums.view();
    const DeviceRows aggregated = pass->sums_inputs(l) ? sums_rows : out.view();
    const RandomStream attention = attention_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch);
    const auto sources = pool_run(z_index(l), slots.reads);
    ExpandedBlock expanded;
    const SparseBlockView whole = block_view(block, false, expanded);
    const SparseBlockView view = sources ? whole : through(whole, read_slots.view());
    const ConstDeviceRows rows = sources ? ConstDeviceRows(*sources) : ConstDeviceRows(pools.pool(z_index(l)));
    if (pass->sums_inputs(l)) {
      layer.sum_inputs(backend, view, rows, aggregated);
    } else {
      layer.aggregate(backend, view, attention, training, rows, aggregated);
    }
    if (pass->sums_inputs(l)) {
      Layer::transform(backend, parameters.layer(l).weight.view(), sums_rows, out.view());
      // What the weight gradient multiplies by: on the device without a budget or where they stay, else on the host
      // until then.
      if (training && residency.uploads_stay) {
        residency.sums[{l, k}] = std::move(sums);
      } else if (training && !sums_stay) {
        download(sums.view(), input_sums.view(), destinations);
      }
    }
    backend.bias_activation(out.view(), parameters.layer(l).bias.view().span(), model.activation_after(l), out.view());
    if (pass->output_stays(l, k)) {
      // Within a budget (chained layers) the backward half reads the outputs from the host, where it does not compute
      // them again, and an inference plan's caller reads them there (Executor::layer_outputs); an evaluation's next
      // layer reads them here.
      if (residency.uploads_stay) {
        download_boundary_rows(out.view(), l, k);
      } else if (training ? !pass->output_recomputed(l) : plan.options.forward_only) {
        download(out.view(), outputs[l], destinations);
      }
      residency.inputs[{l + 1, k}] = std::move(out);  // the next layer's transform input, where it is
      return;
    }
    if (training && l + 1 == outputs.size() && !pass->loss_positions.empty()) {
      download_at(out.view(), l, k, pass->loss_positions[k], "rows: logits the loss reads");
      return;
    }
    download(out.view(), outputs[l], destinations);
  }

  // ∂L/∂Y of subgraph k of layer l, the activation's backward done where ∂L/∂H was computed: on the device where the
  // outputs stayed, else in grad_outputs[l].
  DeviceMatrix output_gradients(std::size_t l, std::size_t k) {
    if (l + 1 == grad_outputs.size() && !pass->loss_positions.empty()) return loss_gradients(k);
    std::optional<DeviceMatrix> stayed = StepResidency::take(residency.output_gradients, l, k);
    if (!stayed) return upload(grad_outputs[l], pass->destinations(l, k), "rows: output gradients");
    add_boundary_gradients(stayed->view(), l, k);
    return std::move(*stayed);
  }

  // Where layer l's aggregation backward takes layer l+1's transform backward (Pass::takes_next_transform_backward):
  // layer l's outputs of subgraph k computed again, as its aggregation computed them forward from the transformed rows
  // `z` (read through `block`), then through layer l+1's transform backward of the same rows: their ∂L/∂Y.
  DeviceMatrix next_transform_backward(Model& model, std::size_t l, std::size_t k, std::uint32_t epoch,
                                       const SparseBlockView& block, const RandomStream& attention, ConstDeviceRows z) {
    DeviceMatrix outputs_again(device, static_cast<std::int64_t>(pass->destinations(l, k).size()),
                               model.layer(l).out_dim(), "rows: transform inputs");
    model.layer(l).aggregate(backend, block, attention, true, z, outputs_again.view());
    backend.bias_activation(outputs_again.view(), parameters.layer(l).bias.view().span(), model.activation_after(l),
                            outputs_again.view());
    return *backward_through_transform(model, l + 1, k, epoch, outputs_again, slots.next_gradient_reads);
  }

  void aggregate_backward(Model& model, std::size_t l, std::size_t k, std::uint32_t epoch) {
    Layer& layer = model.layer(l);
    const std::span<const vid_t> destinations = pass->destinations(l, k);
    const PartSize& size = pass->layer_parts[l][k];
    LayerParameters& p = parameters.layer(l);
    if (pass->sums_inputs(l)) {
      const DeviceMatrix grad_y = output_gradients(l, k);
      backend.column_sums(grad_y.view(), p.bias_grad.span(), true);
      const auto staying = residency.staying_sums.find({l, k});
      std::optional<DeviceMatrix> sums = StepResidency::take(residency.sums, l, k);
      if (!residency.uploads_stay && staying == residency.staying_sums.end()) {
        sums = upload(input_sums.view(), destinations, "rows: aggregated inputs");
      }
      NJ_EXPECTS(sums.has_value() || staying != residency.staying_sums.end(),
                 "layer {} subgraph {}: its forward kept no sums", l + 1, k);
      Layer::transform_backward(backend, p.weight.view(), p.weight_grad, sums ? sums->view() : staying->second.view(),
                                grad_y.view(), {});
      return;
    }
    const RandomStream attention = attention_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch);
    std::optional<StepBlock> streamed;
    ExpandedBlock expanded;
    const SparseBlockView view = block_view(step_block(l, k, streamed), true, expanded);
    // The transformed rows the forward aggregation read, where the backward reads them: in place, or through their
    // slots in the pool.
    const DeviceArray<vid_t> read_slots = slots_on_device(transfers, slots.reads);
    const auto z_run = pool_run(z_index(l), slots.reads);
    const DeviceMatrix grad_y =
        pass->takes_next_transform_backward(l)
            ? next_transform_backward(model, l, k, epoch, z_run ? view : through(view, read_slots.view()), attention,
                                      z_run ? ConstDeviceRows(*z_run) : ConstDeviceRows(pools.pool(z_index(l))))
            : output_gradients(l, k);
    backend.column_sums(grad_y.view(), p.bias_grad.span(), true);
    const DeviceArray<vid_t> accumulate_slots = slots_on_device(transfers, slots.accumulates);
    DeviceArray<float> workspace(
        device, layer.aggregate_backward_workspace(static_cast<vid_t>(destinations.size()), size.num_edges),
        "workspace: aggregation backward");
    const DeviceRows grad_pool = pools.pool(grad_index(l));
    if (slots.reads.empty()) {  // the gradient reads no rows: accumulate straight into the slots
      if (const auto sources = pool_run(grad_index(l), slots.accumulates)) {
        layer.aggregate_backward(backend, view, attention, true, ConstDeviceRows{}, grad_y.view(), *sources, true,
                                 workspace.view());
      } else {
        layer.aggregate_backward(backend, through(view, accumulate_slots.view()), attention, true, ConstDeviceRows{},
                                 grad_y.view(), grad_pool, true, workspace.view());
      }
      return;
    }
    // Rows and gradients sit in pools of their own: read and accumulated through their slots in each (or, where
    // both lie in one run of their pool, in place).
    if (const auto grad_run = pool_run(grad_index(l), slots.accumulates); z_run && grad_run) {
      layer.aggregate_backward(backend, view, attention, true, *z_run, grad_y.view(), *grad_run, true,
                               workspace.view());
      return;
    }
    SparseBlockView through_slots = through(view, read_slots.view());
    through_slots.grad_row = accumulate_slots.view().data;
    layer.aggregate_backward(backend, through_slots, attention, true, pools.pool(z_index(l)), grad_y.view(), grad_pool,
                             true, workspace.view());
  }

  void transform_backward(Model& model, std::size_t l, std::size_t k, std::uint32_t epoch) {
    const std::vector<vid_t>& rows = pass->transform_chunks[l][k];
    if (l == 0 && sparse_features != nullptr) {
      std::optional<DeviceBlock> streamed;
      const DeviceBlock& input = sparse_transform_input(k, streamed);
      DeviceArray<float> dropped;
      const SparseBlockView x = dropped_entries(model, rows, input, epoch, true, true, dropped);
      DeviceMatrix packed;
      const DeviceRows grad_z = chunk_gradients(l, static_cast<std::int64_t>(rows.size()), slots.reads, packed);
      Layer::transform_backward(backend, parameters.layer(l).weight_grad, x, grad_z);
      if (!streamed && !residency.lasting) residency.sparse_inputs.erase({0, k});
      return;
    }
    // Where this step takes the first layer's backward too, the sums of its inputs come up, and the first layer's
    // outputs, this layer's inputs, are computed again from them where the forward half left them on the device.
    const bool takes_first_layer = l == 1 && pass->first_layer_backward_fused;
    std::optional<DeviceMatrix> sums;
    if (takes_first_layer) sums = upload(input_sums.view(), rows, "rows: aggregated inputs");
    std::optional<DeviceMatrix> streamed;
    const DeviceMatrix& input = takes_first_layer && pass->output_recomputed(0)
                                    ? streamed.emplace(first_layer_outputs(model, sums->view()))
                                    : transform_input(l, k, streamed);
    std::optional<DeviceMatrix> grad_x = backward_through_transform(model, l, k, epoch, input, slots.reads);
    if (grad_x) {
      if (takes_first_layer) {
        first_layer_backward(grad_x->view(), sums->view());
      } else if (pass->output_stays(l - 1, k)) {
        residency.output_gradients[{l - 1, k}] = std::move(*grad_x);
      } else {
        download(grad_x->view(), grad_outputs[l - 1], rows);
      }
    }
    // This was the input's last reader in the pass.
    if (!streamed && !(residency.lasting && l == 0)) residency.inputs.erase({l, k});
  }

  // Layer l's transform backward of its chunk k, from its dense input rows `input` and the gradients of its
  // transformed rows in slots `gradient_slots`: the weight gradient, and for l > 0 the input gradients, through the
  // previous layer's activation: its ∂L/∂Y (finished here, where its output rows are on the device, so that its
  // aggregation backward reads only ∂L/∂Y).
  std::optional<DeviceMatrix> backward_through_transform(Model& model, std::size_t l, std::size_t k,
                                                         std::uint32_t epoch, const DeviceMatrix& input,
                                                         std::span<const vid_t> gradient_slots) {
    const std::vector<vid_t>& rows = pass->transform_chunks[l][k];
    // Rows that stayed kept their dropout from the forward half; streamed rows draw it again.
    std::optional<DeviceMatrix> dropped = StepResidency::take(residency.dropped, l, k);
    const bool kept_dropout = dropped.has_value();
    if (!kept_dropout) dropped.emplace(device, input.rows(), input.cols(), "rows: dropped inputs");
    const bool drops = kept_dropout || dropout_rows(model, l, epoch, true, rows, input.view(), dropped->view());
    DeviceMatrix packed;
    const DeviceRows grad_z = chunk_gradients(l, input.rows(), gradient_slots, packed);
    DeviceMatrix grad_x =
        l > 0 ? DeviceMatrix(device, input.rows(), model.layer(l).in_dim(), "rows: input gradients") : DeviceMatrix();
    LayerParameters& p = parameters.layer(l);
    Layer::transform_backward(backend, p.weight.view(), p.weight_grad, drops ? dropped->view() : input.view(), grad_z,
                              grad_x.view());
    if (l == 0) return std::nullopt;
    dropout_rows(model, l, epoch, true, rows, grad_x.view(), grad_x.view());
    backend.activation_backward(model.activation_after(l - 1), input.view(), grad_x.view(), grad_x.view());
    return grad_x;
  }

  // The first layer's outputs of rows whose sums of inputs are `sums`, as its aggregation computed them.
  DeviceMatrix first_layer_outputs(Model& model, ConstDeviceRows sums) {
    DeviceMatrix outputs_again(device, sums.rows, model.layer(0).out_dim(), "rows: transform inputs");
    Layer::transform(backend, parameters.layer(0).weight.view(), sums, outputs_again.view());
    backend.bias_activation(outputs_again.view(), parameters.layer(0).bias.view().span(), model.activation_after(0),
                            outputs_again.view());
    return outputs_again;
  }

  // The first layer's backward for rows whose ∂L/∂Y is `grad_y` (Pass::first_layer_backward_fused): its bias's
  // gradient, and its weight's from the sums of their inputs.
  void first_layer_backward(ConstDeviceRows grad_y, ConstDeviceRows sums) {
    LayerParameters& p = parameters.layer(0);
    backend.column_sums(grad_y, p.bias_grad.span(), true);
    Layer::transform_backward(backend, p.weight.view(), p.weight_grad, sums, grad_y, {});
  }

  // The pass rows at `positions` among the destinations of layer l's subgraph k.
  std::vector<vid_t> destinations_at(std::size_t l, std::size_t k, std::span<const vid_t> positions) const {
    const std::span<const vid_t> destinations = pass->destinations(l, k);
    std::vector<vid_t> rows;
    rows.reserve(positions.size());
    for (const vid_t i : positions) rows.push_back(destinations[static_cast<std::size_t>(i)]);
    return rows;
  }

  // Rows `positions` of `out`, the outputs of layer l's subgraph k, to their rows of outputs[l] on the host, packed on
  // the device first (`what` names that buffer).
  void download_at(ConstDeviceRows out, std::size_t l, std::size_t k, std::span<const vid_t> positions,
                   const char* what) {
    if (positions.empty()) return;
    const auto rows = static_cast<std::int64_t>(positions.size());
    DeviceMatrix packed(device, rows, out.cols, what);
    const DeviceArray<vid_t> on_device = slots_on_device(transfers, positions);
    backend.copy_rows(out, on_device.view(), packed.view(), {}, rows);
    download(packed.view(), outputs[l], destinations_at(l, k, positions));
  }

  // Where the next layer transforms its mirrors, the boundary rows of subgraph k's outputs that stay on the device go
  // to the host too, from where the exchange sends them (Pass::staying_boundary).
  void download_boundary_rows(ConstDeviceRows out, std::size_t l, std::size_t k) {
    download_at(out, l, k, pass->staying_boundary_rows(l, k).positions, "rows: exchange staging");
  }

  // Host rows `host_rows` of `host`, uploaded packed (`what` names that buffer) and added into rows `positions` of
  // `into`: download_at's way back.
  void add_uploaded_at(ConstRows host, std::span<const vid_t> host_rows, std::span<const vid_t> positions,
                       DeviceRows into, const char* what) {
    if (positions.empty()) return;
    const DeviceMatrix packed = upload(host, host_rows, what);
    const DeviceArray<vid_t> on_device = slots_on_device(transfers, positions);
    backend.add_rows(packed.view(), {}, into, on_device.view(), packed.rows());
  }

  // ∂L/∂logits of the last layer's subgraph k where the loss read only some of its rows (Pass::loss_positions):
  // theirs from the host, zero for the others.
  DeviceMatrix loss_gradients(std::size_t k) {
    const std::size_t last = grad_outputs.size() - 1;
    const std::span<const vid_t> positions = pass->loss_positions[k];
    DeviceMatrix grad_y(device, static_cast<std::int64_t>(pass->destinations(last, k).size()), grad_outputs[last].cols,
                        "rows: output gradients");
    backend.zero_rows(grad_y.view(), {}, grad_y.rows());
    add_uploaded_at(grad_outputs[last], destinations_at(last, k, positions), positions, grad_y.view(),
                    "rows: loss gradients");
    return grad_y;
  }
  // And what the next layer's mirrors sent back for those rows is added to their output gradients there.
  void add_boundary_gradients(DeviceRows grad_y, std::size_t l, std::size_t k) {
    const StayingBoundary& boundary = pass->staying_boundary_rows(l, k);
    add_uploaded_at(exchange.received_gradients(l + 1), boundary.boundary_index, boundary.positions, grad_y,
                    "rows: exchange staging");
  }

  // Rows of a pool leave the device for their host home, from where the exchange sends them.
  void send_rows(std::uint32_t tensor, std::span<const vid_t> rows) { pools.copy_to_home(tensor, slots.reads, rows); }

  // What the mirrors sent for a chunk of boundary rows is added into their gradients.
  void receive_gradients(std::size_t l, std::size_t chunk) {
    const LayerExchange& e = pass->exchange[l];
    const auto rows = static_cast<std::int64_t>(e.receive_gradients[chunk].size());
    const ConstRows sums = exchange.received_gradients(l).slice(e.receive_first[chunk], rows);
    DeviceMatrix packed(device, rows, sums.cols, "rows: exchange staging");
    timed([&] { transfers.upload(sums, {}, packed.view()); });
    const DeviceArray<vid_t> accumulate_slots = slots_on_device(transfers, slots.accumulates);
    backend.add_rows(packed.view(), {}, pools.pool(grad_index(l)), accumulate_slots.view(), rows);
  }

  std::uint32_t z_index(std::size_t l) const { return static_cast<std::uint32_t>(2 * l); }
  std::uint32_t grad_index(std::size_t l) const { return static_cast<std::uint32_t>(2 * l + 1); }

  // ---- passes ----

  // Runs the forward half of the pass and copies its logits to their vertices' rows.
  void run_forward(Model& model, std::uint32_t epoch, bool training) {
    exchange.begin_forward();
    run_steps(0, pass->forward_steps, [&](std::size_t k) {
      const PlannedStep& s = pass->steps[k];
      if (s.kind == StepKind::kTransform) {
        transform(model, s.layer, s.index, epoch, training);
      } else if (s.kind == StepKind::kSendRows) {
        send_rows(z_index(s.layer), pass->exchange[s.layer].send_rows[s.index]);
      } else {
        aggregate(model, s.layer, s.index, epoch, training);
      }
    });
    if (own_logits.rows() == 0 || !moves_data) return;  // reuse: the last layer's outputs are the logits
    const ConstRows last = outputs.back();
    for (vid_t r = 0; r < pass->num_outputs; ++r) {
      std::copy(last.row(r), last.row(r) + last.cols, own_logits.view().row(pass->vertex(r)));
    }
  }

  // The pass's loss, whose gradient seeds its backward half: of every logit of the pass, or of those it reads
  // (Pass::loss_positions), packed in pass-row order.
  double take_loss(const LossFunction& loss) {
    if (pass->loss_positions.empty()) {
      const ConstRows pass_logits = ConstRows(outputs.back()).slice(0, pass->num_outputs);
      return loss(pass_logits, pass->vertices.empty() ? nullptr : pass->vertices.data(),
                  grad_outputs.back().slice(0, pass->num_outputs));
    }
    const std::size_t last = outputs.size() - 1;
    std::vector<vid_t> rows;
    for (std::size_t k = 0; k < pass->loss_positions.size(); ++k) {
      std::ranges::copy(destinations_at(last, k, pass->loss_positions[k]), std::back_inserter(rows));
    }
    std::ranges::sort(rows);
    const auto count = static_cast<std::int64_t>(rows.size());
    const std::int64_t cols = outputs[last].cols;
    HostRows read(count, cols);
    HostRows gradients(count, cols);
    std::vector<vid_t> vertices;
    vertices.reserve(rows.size());
    for (std::int64_t i = 0; i < count; ++i) {
      const vid_t r = rows[static_cast<std::size_t>(i)];
      std::copy_n(outputs[last].row(r), cols, read.view().row(i));
      vertices.push_back(pass->vertex(r));
    }
    const double value = loss(read.view(), vertices.data(), gradients.view());
    for (std::int64_t i = 0; i < count; ++i) {
      std::copy_n(gradients.view().row(i), cols, grad_outputs[last].row(rows[static_cast<std::size_t>(i)]));
    }
    return value;
  }

  void run_backward(Model& model, std::uint32_t epoch) {
    exchange.begin_backward();
    run_steps(pass->forward_steps, pass->steps.size(), [&](std::size_t k) {
      const PlannedStep& s = pass->steps[k];
      switch (s.kind) {
        case StepKind::kAggregateBackward: aggregate_backward(model, s.layer, s.index, epoch); break;
        case StepKind::kSendGradients:
          send_rows(grad_index(s.layer), pass->exchange[s.layer].send_gradients[s.index]);
          break;
        case StepKind::kReceiveGradients: receive_gradients(s.layer, s.index); break;
        default: transform_backward(model, s.layer, s.index, epoch);
      }
    });
  }

  // A forward pass without dropout over every pass: the logits, and every layer's outputs on the host.
  void evaluate(Model& model) {
    for (std::size_t l = 0; l < model.num_layers(); ++l) model.layer(l).prepare();
    parameters.upload(backend, model);
    for_each_pass([&] { run_forward(model, 0, false); });
  }

  // One training step: every pass forward, its loss, and backward.
  double train(Model& model, std::uint32_t epoch, const LossFunction& loss) {
    NJ_EXPECTS(!plan.options.forward_only, "an inference plan has no backward pass to train with");
    for (std::size_t l = 0; l < model.num_layers(); ++l) model.layer(l).prepare();
    parameters.upload(backend, model);
    double total = 0.0;
    for_each_pass([&] {
      run_forward(model, epoch, true);
      total += take_loss(loss);
      run_backward(model, epoch);
    });
    sum_gradients_and_finish_step(parameters, model, comm);
    count_rows();
    return total;
  }

  // Runs a training step or an evaluation as a whole: one that fails part-way leaves nothing behind. Its step's
  // buffers are freed as it unwinds and its pools here, so that the device holds what it held before the step
  // again (the parameters, and a lasting pass's blocks and features),
  // and what it measured is dropped, so that the next step measures as if it were the first.
  template <typename Fn>
  auto as_whole(Fn&& fn) {
    try {
      return fn();
    } catch (...) {
      pools.release();
      residency.release();
      transfers.take_traffic();
      exchange.take_stats();
      device.reset_transfer_stats();
      metrics = {};
      throw;
    }
  }

  // ---- bookkeeping ----

  void count_rows() {
    metrics.rows_computed += plan.rows_computed;
    metrics.rows_needed += plan.rows_needed;
    metrics.cache_hits += plan.cache_hits;
    metrics.cache_misses += plan.cache_misses;
  }

  // Runs fn() with each pass of the epoch as the running pass, cutting the recompute baseline's as they come.
  template <typename Fn>
  void for_each_pass(Fn&& fn) {
    for (const Pass& p : plan.passes) {
      pass = &p;
      subgraphs.emplace(p, global_id);
      fn();
      residency.release();
    }
    for (const auto& destinations : plan.closures) {
      const auto start = std::chrono::steady_clock::now();
      const Pass closure_pass = closure_planner->plan(plan, destinations);
      metrics.plan_seconds += seconds_since(start);
      pass = &closure_pass;
      subgraphs.emplace(closure_pass, global_id);
      fn();
      residency.release();
    }
    subgraphs.reset();
    pass = nullptr;
  }

  Backend& backend;
  Device& device;
  Communicator* comm;  // sums the gradients over the ranks (null: one rank)
  Transfers transfers;
  ConstRows features;
  const SparseRows* sparse_features;  // the features as sparse rows, where the plan takes them so (else null)
  std::int64_t num_owned = 0;
  std::vector<gid_t> global_id;  // per local vertex
  const EpochPlan& plan;
  // Per trace tensor (2l: layer l's transformed rows, 2l+1: their gradients), the host home of rows that leave
  // the device, in buffers tensors share where their phases do not overlap; and where each row is on the device.
  std::vector<HostRows> home_buffers;
  std::vector<Rows> homes;
  std::vector<std::vector<vid_t>> slot_of;
  PassExchange exchange;
  DeviceParameters parameters;
  std::optional<ClosurePlanner> closure_planner;  // recompute
  const Pass* pass = nullptr;                     // the running pass
  // Per layer, in the running pass's rows:
  std::vector<HostRows> output_rows;
  std::vector<Rows> outputs;       // H^{l+1}; the last holds the logits
  std::vector<Rows> grad_outputs;  // ∂L/∂Y^l, the gradient before layer l's activation: outputs[l] but the last
  HostRows last_gradients;         // grad_outputs.back()
  HostRows input_sums;  // within a budget, a first layer's sums of its inputs (Pass::first_layer_sums_inputs)
  HostRows own_logits;  // recompute: per vertex, gathered from every pass
  ConstRows logits;     // per vertex: the last layer's outputs
  CachePools pools;
  ExecutionMetrics metrics;
  // The running step's subgraph (null for other steps, and where a replay builds none) and slots.
  const Model* model_of_run = nullptr;
  bool moves_data = true;  // false: replaying on the planning device
  // A replay on the planning device marks each phase's start there, so that the forecast has each phase's peak.
  PlanningDevice* planning = nullptr;
  std::optional<PassSubgraphs> subgraphs;
  const Subgraph* part = nullptr;
  StepSlots slots;
  StepResidency residency;
  std::vector<vid_t> replay_sources;
};

namespace {

// The loss of a step replayed on a planning device, which moves no rows: nothing reads its logits or gradients.
double no_loss(ConstRows /*logits*/, const vid_t* /*vertices*/, Rows /*grad*/) { return 0.0; }

// The smallest budget that holds a footprint, written so that it parses back to no less: whole KiB.
std::string budget_for(std::int64_t footprint) { return fmt::format("{}K", (footprint + 1023) / 1024); }

}  // namespace

MemoryForecast forecast_device_memory(Model& model, const LocalGraph& local, ConstRows features, const EpochPlan& plan,
                                      const SparseRows* sparse_features) {
  std::optional<SparseRows> built;
  if (plan.options.inputs.sparse && sparse_features == nullptr)
    sparse_features = &built.emplace(sparse_rows_of(features));
  return replay_step(
      plan.options.library, MemorySpace::kHost, [&](Backend& backend, PlanningDevice& device, Communicator& detached) {
        SubgraphExecutor::State replay(backend, device, model, local, features,
                                       plan.options.inputs.sparse ? sparse_features : nullptr, plan, &detached);
        replay.planning = &device;
        replay.transfers.take_traffic();  // what the run uploads once is not an epoch's
        if (plan.options.forward_only) {
          replay.evaluate(model);
        } else {
          replay.train(model, 0, no_loss);
        }
        return replayed_copies(replay.transfers);
      });
}

namespace {

// What one upload of subgraph k of layer l's packed block moves, and what it takes of the device where it stays.
RoomItem packed_block_item(const Model& model, const Pass& pass, std::size_t l, std::size_t k,
                           std::int64_t narrow_limit) {
  const std::int64_t bytes = PackedBlock::bytes_for(packed_block_shape(model, pass, l, k, narrow_limit));
  return {arena_block_bytes(bytes), bytes};
}

// The structure bytes an epoch of the pass moves: the packed block of every aggregation step whose block does not
// stay (a first layer that sums its inputs runs no block backward).
std::int64_t structure_bytes_moved(const Model& model, const Pass& pass, std::int64_t narrow_limit) {
  std::int64_t bytes = 0;
  for (const PlannedStep& s : pass.steps) {
    if (pass.reads_block(s) && !pass.block_stays(s.layer, s.index)) {
      bytes += packed_block_item(model, pass, s.layer, s.index, narrow_limit).moved_bytes;
    }
  }
  return bytes;
}

// Something a budgeted pass moves every epoch that may stay on the device for the run instead: a first layer's sums
// of its inputs (layer 0, its subgraph), a packed block, or a first-layer transform chunk's features (layer 0, its
// chunk).
struct StayCandidate {
  enum class Kind : std::uint8_t { kSums, kBlock, kInputs };
  Kind kind = Kind::kBlock;
  std::size_t layer = 0;
  std::size_t index = 0;
  std::int64_t bytes = 0;  // on the device, in whole arena units
  std::int64_t trips = 0;  // how often an epoch moves it
};

// What the pass moves every epoch that could stay instead, the most often moved first: a first layer's sums of its
// inputs (down in the forward half, up in the backward), the packed blocks (up for each step that reads them:
// forward and backward, or forward only for a first layer that sums its inputs), and the features where they are
// dense rows (up for the first layer's transform, and again for its backward where it transforms first); in that
// order, and layer by layer, where they move as often.
std::vector<StayCandidate> stay_candidates(const Model& model, const EpochPlan& plan) {
  const Pass& pass = plan.passes.front();
  std::vector<StayCandidate> candidates;
  if (!pass.sums_stay.empty()) {  // settle_device_memory sized it where the sums wait on the host
    const std::int64_t width = model.layer(0).input_sums_width();
    for (std::size_t k = 0; k < pass.layer_parts.front().size(); ++k) {
      const auto rows = static_cast<std::int64_t>(pass.destinations(0, k).size());
      candidates.push_back(
          {StayCandidate::Kind::kSums, 0, k, arena_block_bytes(rows * width * std::int64_t{sizeof(float)}), 2});
    }
  }
  std::vector<std::vector<std::int64_t>> block_reads(pass.layer_parts.size());
  for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) block_reads[l].assign(pass.layer_parts[l].size(), 0);
  std::vector<std::int64_t> input_uploads(pass.transform_chunks.front().size(), 0);
  for (const PlannedStep& s : pass.steps) {
    if (pass.reads_block(s)) ++block_reads[s.layer][s.index];
    if (s.layer == 0 && (s.kind == StepKind::kTransform || s.kind == StepKind::kTransformBackward)) {
      ++input_uploads[s.index];
    }
  }
  for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) {
    for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
      candidates.push_back({StayCandidate::Kind::kBlock, l, k,
                            packed_block_item(model, pass, l, k, plan.options.narrow_source_limit).room_bytes,
                            block_reads[l][k]});
    }
  }
  if (!plan.options.inputs.sparse) {
    const std::int64_t width = model.layer(0).in_dim();
    for (std::size_t k = 0; k < pass.transform_chunks.front().size(); ++k) {
      const auto rows = static_cast<std::int64_t>(pass.transform_chunks.front()[k].size());
      candidates.push_back({StayCandidate::Kind::kInputs, 0, k,
                            arena_block_bytes(rows * width * std::int64_t{sizeof(float)}), input_uploads[k]});
    }
  }
  std::ranges::stable_sort(candidates, std::ranges::greater{}, &StayCandidate::trips);
  return candidates;
}

std::vector<char>& stay_flags(Pass& pass, StayCandidate::Kind kind, std::size_t layer) {
  switch (kind) {
    case StayCandidate::Kind::kSums: return pass.sums_stay;
    case StayCandidate::Kind::kBlock: return pass.blocks_stay[layer];
    case StayCandidate::Kind::kInputs: break;
  }
  return pass.inputs_stay;
}

void mark_staying(Pass& pass, const StayCandidate& c, bool stays) {
  stay_flags(pass, c.kind, c.layer)[c.index] = stays ? 1 : 0;
}

bool stays(const Pass& pass, const StayCandidate& c) {
  switch (c.kind) {
    case StayCandidate::Kind::kSums: return pass.sums_stays(c.index);
    case StayCandidate::Kind::kBlock: return pass.block_stays(c.layer, c.index);
    case StayCandidate::Kind::kInputs: break;
  }
  return pass.input_stays(c.index);
}

// Marks to stay, in order, the candidates that fit in what the budget holds beyond the forecast peak. Placed first,
// they shift what the steps allocate, which the arena may then place otherwise: the forecast is made again, and the
// last ones go where the peak no longer fits.
void keep_in_room(Model& model, const LocalGraph& local, ConstRows features, EpochPlan& plan,
                  const SparseRows* sparse_features, std::span<const StayCandidate> candidates) {
  Pass& pass = plan.passes.front();
  std::int64_t room = plan.options.device_budget / kArenaAlignment * kArenaAlignment - plan.memory.peak_footprint_bytes;
  std::vector<StayCandidate> staying;
  for (const StayCandidate& c : candidates) {
    if (c.bytes > room) continue;
    room -= c.bytes;
    mark_staying(pass, c, true);
    staying.push_back(c);
  }
  while (!staying.empty()) {
    plan.memory = forecast_device_memory(model, local, features, plan, sparse_features);
    std::int64_t short_by = device_memory_shortfall(plan);
    if (short_by == 0) return;
    while (short_by > 0 && !staying.empty()) {
      mark_staying(pass, staying.back(), false);
      short_by -= staying.back().bytes;
      staying.pop_back();
    }
    if (staying.empty()) plan.memory = forecast_device_memory(model, local, features, plan, sparse_features);
  }
}

// Each phase's pools are its own, freed at its end, and most phases peak below the budget: their pools take what the
// budget leaves them, shared among a phase's pools as they share the budget's half, so that fewer rows leave the
// device and come back. The cache is planned again for the larger pools and the forecast made again; a phase that no
// longer fits (the arena may place the larger pools otherwise) gives up what it is short by, and where a few tries
// do not settle every phase, or the larger pools would move more, the pools stay as planned.
void grow_pools_into_phase_room(Model& model, const LocalGraph& local, ConstRows features, EpochPlan& plan,
                                const SparseRows* sparse_features) {
  Pass& pass = plan.passes.front();
  if (!pass.keeps_blocks()) return;  // its trace no longer lists the subgraphs' sources
  const std::vector<std::vector<std::int64_t>> planned = pass.trace.capacity_rows;
  const std::int64_t planned_bytes = pass.cache.total_bytes();
  // Only the pools of a phase's own layer grow (tensors 2l and 2l+1 are layer l's): a chained layer's rows pass
  // through the previous layer's phase a chunk at a time.
  const auto grows = [&](std::size_t phase, std::size_t tensor) { return tensor / 2 == pass.phase_layer(phase); };
  std::vector<std::int64_t> planned_pools(planned.size(), 0);
  for (std::size_t p = 0; p < planned.size(); ++p) {
    for (std::size_t t = 0; t < planned[p].size(); ++t) {
      if (grows(p, t)) planned_pools[p] += planned[p][t] * pass.trace.tensors[t].row_bytes;
    }
  }
  const std::int64_t usable = plan.options.device_budget / kArenaAlignment * kArenaAlignment;
  // A phase the replay never marked (one of no steps) reads a peak of 0: it has no pools to grow.
  const auto phase_room = [&](std::size_t phase) {
    const auto& peaks = plan.memory.phase_peak_footprint_bytes;
    return phase < peaks.size() && peaks[phase] > 0 ? usable - peaks[phase] : std::int64_t{0};
  };
  std::vector<std::int64_t> room(planned.size());
  for (std::size_t p = 0; p < room.size(); ++p) room[p] = std::max<std::int64_t>(0, phase_room(p));
  constexpr int kTries = 4;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    std::vector<std::vector<std::int64_t>> capacity = planned;
    for (std::size_t p = 0; p < capacity.size(); ++p) {
      const std::int64_t pools = planned_pools[p];
      if (pools == 0) continue;
      for (std::size_t t = 0; t < capacity[p].size(); ++t) {
        if (planned[p][t] == 0 || !grows(p, t)) continue;
        const std::int64_t row_bytes = pass.trace.tensors[t].row_bytes;
        const double share = static_cast<double>(planned[p][t] * row_bytes) / static_cast<double>(pools);
        // Each pool is a whole number of arena units: one less for its rounding.
        const auto extra_bytes = std::max<std::int64_t>(
            0, static_cast<std::int64_t>(share * static_cast<double>(room[p])) - kArenaAlignment);
        capacity[p][t] = std::min(pass.num_rows, planned[p][t] + extra_bytes / row_bytes);
      }
    }
    if (capacity == pass.trace.capacity_rows) {
      if (attempt == 0) return;  // no phase has room
      break;                     // a phase still short by something has nothing left to give up
    }
    resize_pools(model, plan, capacity);
    plan.memory = forecast_device_memory(model, local, features, plan, sparse_features);
    bool fits = device_memory_shortfall(plan) == 0;
    for (std::size_t p = 0; p < room.size(); ++p) {
      const std::int64_t short_by = -phase_room(p);
      if (short_by <= 0) continue;
      fits = false;
      room[p] = std::max<std::int64_t>(0, room[p] - short_by - kArenaAlignment);
    }
    if (fits && pass.cache.total_bytes() <= planned_bytes) return;
    if (fits) break;
  }
  resize_pools(model, plan, planned);
  plan.memory = forecast_device_memory(model, local, features, plan, sparse_features);
}

// The streamed bytes one trip of a first layer's sums or features moves (a block's are its packed block's, which
// structure_bytes_moved counts).
std::int64_t stream_trip_bytes(const Model& model, const Pass& pass, const StayCandidate& c) {
  switch (c.kind) {
    case StayCandidate::Kind::kBlock: break;
    case StayCandidate::Kind::kSums:
      return static_cast<std::int64_t>(pass.destinations(0, c.index).size()) * model.layer(0).input_sums_width() *
             std::int64_t{sizeof(float)};
    case StayCandidate::Kind::kInputs:
      return static_cast<std::int64_t>(pass.transform_chunks.front()[c.index].size()) * model.layer(0).in_dim() *
             std::int64_t{sizeof(float)};
  }
  return 0;
}

// The bytes an epoch of the settling pass moves: what its cache plan and streams move, less the trips of the sums and
// features that stay, and the packed blocks that travel.
std::int64_t settled_epoch_bytes(const Model& model, const EpochPlan& plan, std::span<const StayCandidate> candidates) {
  const Pass& pass = plan.passes.front();
  std::int64_t bytes = pass.cache.total_bytes() + pass.stream_h2d_bytes + pass.stream_d2h_bytes +
                       structure_bytes_moved(model, pass, plan.options.narrow_source_limit);
  for (const StayCandidate& c : candidates) {
    if (stays(pass, c)) bytes -= c.trips * stream_trip_bytes(model, pass, c);
  }
  return bytes;
}

// Settles the room in `order` (kStaying or kPools: RoomFirst), from none of it taken (nothing staying, the pools as
// planned), and returns the bytes an epoch then moves.
std::int64_t take_room_in_order(Model& model, const LocalGraph& local, ConstRows features, EpochPlan& plan,
                                const SparseRows* sparse_features, std::span<const StayCandidate> candidates,
                                const std::vector<std::vector<std::int64_t>>& planned, RoomFirst order) {
  Pass& pass = plan.passes.front();
  bool reset = false;  // plan.memory is the forecast of the plan as it is now: made again only where that changes
  for (const StayCandidate& c : candidates) {
    if (!stays(pass, c)) continue;
    mark_staying(pass, c, false);
    reset = true;
  }
  if (pass.trace.capacity_rows != planned) {
    resize_pools(model, plan, planned);
    reset = true;
  }
  if (reset) plan.memory = forecast_device_memory(model, local, features, plan, sparse_features);
  if (order == RoomFirst::kStaying) keep_in_room(model, local, features, plan, sparse_features, candidates);
  grow_pools_into_phase_room(model, local, features, plan, sparse_features);
  if (order == RoomFirst::kPools) keep_in_room(model, local, features, plan, sparse_features, candidates);
  return settled_epoch_bytes(model, plan, candidates);
}

}  // namespace

void settle_device_memory(Model& model, const LocalGraph& local, ConstRows features, EpochPlan& plan,
                          const SparseRows* sparse_features) {
  plan.memory = forecast_device_memory(model, local, features, plan, sparse_features);
  const bool packs_blocks = plan.options.device_budget != kUnlimited && plan.passes.size() == 1 &&
                            plan.closures.empty() && !plan.passes.front().lasting;
  if (!packs_blocks) return;
  Pass& pass = plan.passes.front();
  pass.blocks_stay.assign(pass.layer_parts.size(), {});
  for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) pass.blocks_stay[l].assign(pass.layer_parts[l].size(), 0);
  pass.inputs_stay.assign(pass.transform_chunks.front().size(), 0);
  // A first layer's sums wait on the host for the backward half where a budgeted pass trains and does not take that
  // backward in the second layer's.
  const bool sums_may_stay =
      pass.first_layer_sums_inputs && !pass.first_layer_backward_fused && !plan.options.forward_only;
  pass.sums_stay.assign(sums_may_stay ? pass.layer_parts.front().size() : 0, 0);
  const std::vector<StayCandidate> candidates = stay_candidates(model, plan);
  if (plan.options.use_spare_room) {
    const std::vector<std::vector<std::int64_t>> planned = pass.trace.capacity_rows;
    const auto take_room = [&](RoomFirst order) {
      return take_room_in_order(model, local, features, plan, sparse_features, candidates, planned, order);
    };
    // Pool bytes spare a phase's rows their trips out and back; a block that stays spares its uploads, but takes its
    // room in every phase. Only a pass that keeps its blocks grows its pools: otherwise the orders are the same.
    const RoomFirst first = plan.options.room_first;
    if (first != RoomFirst::kCheaper) {
      take_room(first);
    } else {
      const std::int64_t staying_first = take_room(RoomFirst::kStaying);
      if (pass.keeps_blocks() && take_room(RoomFirst::kPools) > staying_first) take_room(RoomFirst::kStaying);
    }
  }
  // What stays is no epoch's traffic.
  for (const StayCandidate& c : candidates) {
    if (!stays(pass, c)) continue;
    const std::int64_t trip = stream_trip_bytes(model, pass, c);
    switch (c.kind) {
      case StayCandidate::Kind::kBlock: plan.staying_block_bytes += c.bytes; break;
      case StayCandidate::Kind::kSums:  // neither down after the forward aggregation nor up for the backward one
        plan.staying_sums_bytes += c.bytes;
        pass.stream_h2d_bytes -= trip;
        pass.stream_d2h_bytes -= trip;
        plan.h2d_bytes -= trip;
        plan.d2h_bytes -= trip;
        break;
      case StayCandidate::Kind::kInputs:
        plan.staying_input_bytes += c.bytes;
        pass.stream_h2d_bytes -= c.trips * trip;
        plan.h2d_bytes -= c.trips * trip;
        break;
    }
  }
  plan.peak_bytes_bound += plan.staying_block_bytes + plan.staying_input_bytes + plan.staying_sums_bytes;
  plan.structure_h2d_bytes = structure_bytes_moved(model, pass, plan.options.narrow_source_limit);
}

std::int64_t structure_bytes_in_room(const Model& model, const EpochPlan& plan, CachePolicy policy) {
  if (plan.passes.size() != 1 || plan.passes.front().blocks_stay.empty()) return 0;
  const Pass& pass = plan.passes.front();
  // Items: every subgraph's block, layer by layer; reads: the steps that read one, in step order.
  std::vector<std::size_t> first_item;
  std::vector<RoomItem> items;
  for (std::size_t l = 0; l < pass.layer_parts.size(); ++l) {
    first_item.push_back(items.size());
    for (std::size_t k = 0; k < pass.layer_parts[l].size(); ++k) {
      items.push_back(packed_block_item(model, pass, l, k, plan.options.narrow_source_limit));
    }
  }
  std::vector<std::uint32_t> reads;
  for (const PlannedStep& s : pass.steps) {
    if (pass.reads_block(s)) reads.push_back(static_cast<std::uint32_t>(first_item[s.layer] + s.index));
  }
  return room_upload_bytes(items, reads, plan.staying_block_bytes, policy);
}

std::int64_t device_memory_shortfall(const EpochPlan& plan) {
  if (plan.options.device_budget == kUnlimited) return 0;
  // The arena places whole alignment units of the budget.
  const std::int64_t usable = plan.options.device_budget / kArenaAlignment * kArenaAlignment;
  return std::max<std::int64_t>(0, plan.memory.peak_footprint_bytes - usable);
}

std::string describe_forecast(const MemoryForecast& forecast) {
  std::string parts;
  for (const auto& [category, bytes] : forecast.at_peak) {
    if (bytes > 0) parts += fmt::format("{} {}, ", category, format_bytes(bytes));
  }
  return fmt::format("{}alignment and fragmentation {}", parts, format_bytes(forecast.padding_at_peak()));
}

EpochPlan settled_plan(Model& model, const LocalGraph& local, ConstRows features, SubgraphExecutorOptions options,
                       const SparseRows* sparse_features) {
  options.inputs = sparse_features != nullptr ? InputShape{true, sparse_features->max_row_nonzeros()} : InputShape{};
  EpochPlan plan = plan_epoch(model, local, options);
  settle_device_memory(model, local, features, plan, sparse_features);
  if (const std::int64_t short_by = device_memory_shortfall(plan); short_by > 0) {
    throw InputError(fmt::format(
        "device memory budget {} is {} short of what this plan needs at its peak ({}: {}); use --device-memory {} "
        "or more",
        format_bytes(plan.options.device_budget), format_bytes(short_by),
        format_bytes(plan.memory.peak_footprint_bytes), describe_forecast(plan.memory),
        budget_for(plan.memory.peak_footprint_bytes)));
  }
  return plan;
}

SubgraphExecutor::SubgraphExecutor(Resources& resources, Model& model, const LocalGraph& local, ConstRows features,
                                   const SubgraphExecutorOptions& options, Communicator* comm, SparseInputs inputs)
    : sparse_features_(sparse_inputs(inputs, features, comm)) {
  SubgraphExecutorOptions completed = options;
  completed.library = resources.backend->library_memory();
  plan_ = settled_plan(model, local, features, completed, sparse_features_ ? &*sparse_features_ : nullptr);
  start(resources, model, local, features, comm);
}

SubgraphExecutor::SubgraphExecutor(Resources& resources, Model& model, const LocalGraph& local, ConstRows features,
                                   EpochPlan settled, std::optional<SparseRows> sparse_features, Communicator* comm)
    : sparse_features_(std::move(sparse_features)), plan_(std::move(settled)) {
  start(resources, model, local, features, comm);
}

void SubgraphExecutor::start(Resources& resources, Model& model, const LocalGraph& local, ConstRows features,
                             Communicator* comm) {
  NJ_EXPECTS(features.rows == local.num_owned, "features have {} rows for {} owned vertices", features.rows,
             local.num_owned);
  // A plan within less than the device's budget (a host budget lowered it: plan_within_host_memory) runs as planned:
  // first-fit places its allocations where a device of its own budget would.
  NJ_EXPECTS(plan_.options.device_budget <= resources.device->budget_bytes(),
             "a device budget of {} bytes for a plan of {}", resources.device->budget_bytes(),
             plan_.options.device_budget);
  NJ_EXPECTS(plan_.options.inputs.sparse == sparse_features_.has_value(), "a plan of {} inputs for {} features",
             plan_.options.inputs.sparse ? "sparse" : "dense", sparse_features_ ? "sparse" : "dense");
  const SparseRows* sparse = sparse_features_ ? &*sparse_features_ : nullptr;
  state_ = std::make_unique<State>(*resources.backend, *resources.device, model, local, features, sparse, plan_, comm);
}

SubgraphExecutor::~SubgraphExecutor() = default;

const EpochPlan& SubgraphExecutor::plan() const { return plan_; }

ConstRows SubgraphExecutor::evaluate(Model& model) {
  State& s = *state_;
  s.as_whole([&] { s.evaluate(model); });
  return s.logits;
}

ConstRows SubgraphExecutor::layer_outputs(std::size_t l) {
  State& s = *state_;
  if (l + 1 == s.outputs.size()) return s.logits;
  NJ_EXPECTS(l < s.outputs.size(), "layer {} of a model of {}", l + 1, s.outputs.size());
  // Training plans keep some outputs on the device, and the recompute baseline's passes overwrite each other's.
  NJ_EXPECTS(plan_.options.forward_only && plan_.closures.empty(),
             "only an inference plan of reuse keeps every layer's outputs on the host");
  return ConstRows(s.outputs[l]).slice(0, s.num_owned);
}

double SubgraphExecutor::train_step(Model& model, std::uint32_t epoch, const LossFunction& loss) {
  return state_->as_whole([&] { return state_->train(model, epoch, loss); });
}
ExecutionMetrics SubgraphExecutor::take_metrics() {
  State& s = *state_;
  ExecutionMetrics m = s.metrics;
  take_device_metrics(s.transfers, m);
  m.exchange = s.exchange.take_stats();
  s.metrics = {};
  return m;
}

}  // namespace nj
