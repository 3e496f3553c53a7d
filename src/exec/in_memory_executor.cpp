// The in-memory executor: every layer on the whole local graph, with the features, the activations, their
// gradients, the graph and the parameters on the device for the whole run.
#include <algorithm>
#include <optional>
#include <utility>

#include "gradient_sum.hpp"
#include "nj/device/transfers.hpp"
#include "nj/exec/exchange_side.hpp"
#include "nj/exec/executor.hpp"
#include "nj/exec/host_footprint.hpp"
#include "nj/exec/subgraph.hpp"
#include "nj/kernels/device_block.hpp"
#include "nj/model/device_parameters.hpp"
#include "replay.hpp"

namespace nj {

RandomStream feature_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch) {
  return {config.seed, RandomPurpose::kFeatureDropout, layer, epoch};
}

RandomStream attention_dropout_stream(const ModelConfig& config, std::uint32_t layer, std::uint32_t epoch) {
  return {config.seed, RandomPurpose::kAttentionDropout, layer, epoch};
}

bool aggregates_before_transform(const Layer& layer, std::size_t l, bool sparse_inputs) {
  return l == 0 && !sparse_inputs && layer.sums_inputs_first_pays();
}

namespace {

// The owned rows with all their in-edges, as one part that writes the outputs in place; or, where there are
// peers, as a part of the owned rows that read no mirror and a part of those that do, so that the first runs
// while the mirrors' rows travel.
std::vector<Subgraph> owned_parts(const Model& model, const LocalGraph& local) {
  PreparedGraph prepared = model.prepare(local);
  std::vector<Subgraph> parts;
  if (local.peers.empty()) {
    parts.push_back({{},
                     local_graph_block(prepared.graph, edge_weights(prepared.graph, prepared.weights()),
                                       local.num_owned, local.global_id)});
    return parts;
  }
  std::vector<vid_t> interior;
  std::vector<vid_t> boundary;
  for (vid_t v = 0; v < local.num_owned; ++v) (local.reads_mirror(v) ? boundary : interior).push_back(v);
  for (const auto* destinations : {&interior, &boundary}) {
    if (!destinations->empty()) {
      parts.push_back(make_subgraph(prepared.graph, prepared.weights(), *destinations, local.global_id));
    }
  }
  return parts;
}

// A part on the device. Its block reads source rows through `sources` (empty: row j is source j) and writes
// output rows `destinations` (empty: every owned row, in order, in place).
struct DevicePart {
  DeviceBlock block;
  DeviceArray<vid_t> sources;
  DeviceArray<vid_t> destinations;
  vid_t num_dst = 0;
  eid_t num_edges = 0;
  bool reads_mirrors = false;
  bool in_place() const { return destinations.size() == 0; }
  SparseBlockView view() const { return block.view(sources.view()); }
};

// The exchange sends straight from device memory where the communicator can.
BoundaryExchange make_exchange(Communicator* comm, const LocalGraph& local, const Model& model, Backend& backend,
                               Transfers& transfers) {
  if (comm != nullptr && comm->exchange_space() == MemorySpace::kDevice) {
    return BoundaryExchange(comm, local, model.num_layers(), backend, transfers);
  }
  return BoundaryExchange(comm, local, model.num_layers());
}

}  // namespace

struct InMemoryExecutor::State {
  State(Backend& b, Device& d, const Model& model, const LocalGraph& local, ConstRows features, Communicator* ranks,
        const SparseRows* sparse_features)
      : backend(b),
        device(d),
        comm(ranks),
        transfers(device),
        parameters(transfers, model, aggregates_before_transform(model.layer(0), 0, sparse_features != nullptr)),
        exchange(make_exchange(ranks, local, model, backend, transfers)),
        num_owned(local.num_owned),
        num_mirrors(local.num_mirrors()),
        owned_gid(to_device<gid_t>(transfers, {local.global_id.data(), static_cast<std::size_t>(local.num_owned)},
                                   "index: global ids")),
        mirror_gid(to_device<gid_t>(
            transfers,
            std::span<const gid_t>(local.global_id)
                .subspan(static_cast<std::size_t>(local.num_owned), static_cast<std::size_t>(local.num_mirrors())),
            "index: global ids")),
        boundary(to_device<vid_t>(transfers, exchange.boundary_rows(), "index: boundary rows")),
        input(device, sparse_features ? 0 : features.rows, features.cols, "rows: features"),
        homes(row_homes(model, aggregates_before_transform(model.layer(0), 0, sparse_features != nullptr))),
        logits(local.num_owned, model.layer(model.num_layers() - 1).out_dim()),
        grad_logits(logits.rows(), logits.cols()) {
    NJ_EXPECTS(features.rows == local.num_owned, "features have {} rows for {} owned vertices", features.rows,
               local.num_owned);
    if (sparse_features) {
      sparse_input = DeviceBlock(transfers, sparse_rows_block(*sparse_features, {}), "rows: features", Traffic::kRows);
    } else {
      transfers.upload(features, {}, input.view());
    }
    std::int64_t largest_scattered = 0;
    for (const Subgraph& part : owned_parts(model, local)) {
      DevicePart& p = parts.emplace_back();
      p.block = DeviceBlock(transfers, part.block, "graph: blocks", Traffic::kStructure);
      p.num_dst = part.num_dst();
      p.num_edges = static_cast<eid_t>(part.block.src_index.size());
      if (part.sources.empty()) continue;  // the whole owned graph, in place
      p.sources = to_device<vid_t>(transfers, part.sources, "index: block sources");
      p.destinations = to_device<vid_t>(transfers, part.destinations(), "index: block destinations");
      p.reads_mirrors = reads_mirror(part, local.num_owned);
      largest_scattered = std::max<std::int64_t>(largest_scattered, p.num_dst);
    }
    const vid_t num_local = local.num_local();
    // What the aggregations read (the transformed rows, or a first layer's dropped inputs) and their gradients, for
    // every local row: tensors whose phases do not overlap share a buffer.
    for (const std::int64_t width : homes.width) {
      row_buffers.emplace_back(device, num_local, width, "rows: transformed rows and their gradients");
    }
    std::int64_t widest_sums = 0;
    std::int64_t widest_exchanged = 0;
    for (std::size_t l = 0; l < model.num_layers(); ++l) {
      const Layer& layer = model.layer(l);
      const bool sums_inputs = aggregates_before_transform(layer, l, sparse_features != nullptr);
      sums_inputs_first.push_back(sums_inputs);
      // What the aggregation writes: the sums of the (dropped) inputs, or the outputs.
      const std::int64_t sums_width = sums_inputs ? layer.input_sums_width() : layer.out_dim();
      widest_sums = std::max(widest_sums, sums_width);
      widest_exchanged = std::max(widest_exchanged, exchanged_width(model, l, sums_inputs));
      outputs.emplace_back(device, num_owned, layer.out_dim(), "rows: layer outputs");
      grad_outputs.emplace_back(device, num_owned, layer.out_dim(), "rows: output gradients");
      dropped.push_back(model.dropout_before(l) > 0.0F && !sums_inputs && !(l == 0 && sparse_features)
                            ? DeviceMatrix(device, num_owned, layer.in_dim(), "rows: dropped inputs")
                            : DeviceMatrix());
      input_sums.push_back(sums_inputs ? DeviceMatrix(device, num_owned, sums_width, "rows: aggregated inputs")
                                       : DeviceMatrix());
      // A layer that transforms its mirrors' rows receives their inputs, and sends back their gradients.
      const bool mirrors_transformed = exchange.has_peers() && transforms_mirrors(model, l);
      transforms_mirror_rows.push_back(mirrors_transformed);
      const std::int64_t mirror_input_rows = mirrors_transformed ? num_mirrors : 0;
      mirror_inputs.emplace_back(device, mirror_input_rows, layer.in_dim(), "rows: mirrors' inputs");
      mirror_input_gradients.emplace_back(device, mirror_input_rows, layer.in_dim(), "rows: mirrors' input gradients");
      mirror_dropped.emplace_back(device, model.dropout_before(l) > 0.0F ? mirror_input_rows : 0, layer.in_dim(),
                                  "rows: mirrors' dropped inputs");
    }
    // One layer at a time scatters a part's rows, and exchanges.
    part_rows = DeviceMatrix(device, largest_scattered, widest_sums, "rows: part rows");
    if (exchange.has_peers()) {
      boundary_rows = DeviceMatrix(device, static_cast<std::int64_t>(exchange.boundary_rows().size()), widest_exchanged,
                                   "rows: boundary rows");
    }
    mirror_kept.resize(model.num_layers());
    kept.resize(model.num_layers());
    // What the run uploads once, before its first epoch, is not an epoch's, nor is the staging it went through.
    device.synchronize();
    transfers.take_traffic();
    transfers.release_staging();
    device.reset_transfer_stats();
  }

  // Layer l's tensors of rows: what its aggregation reads, and their gradients.
  DeviceRows z(std::size_t l) { return home(2 * l); }
  DeviceRows grad_z(std::size_t l) { return home(2 * l + 1); }
  DeviceRows home(std::size_t tensor) {
    DeviceMatrix& buffer = row_buffers[homes.buffer_of[tensor]];
    return buffer.view(buffer.rows(), homes.row_width[tensor]);
  }

  // The exchange's buffer, as one row of `cols` floats per boundary row: the rows leaving, or their gradients' sums.
  DeviceRows boundary_rows_of_width(std::int64_t cols) {
    return boundary_rows.view(static_cast<std::int64_t>(exchange.boundary_rows().size()), cols);
  }

  ConstDeviceRows layer_input(std::size_t l) const { return l == 0 ? input.view() : outputs[l - 1].view(); }

  // The layer's input after dropout, written into `out`; the input itself without dropout (`out` untouched).
  ConstDeviceRows dropped_input(const Model& model, std::size_t l, std::uint32_t epoch, bool training, DeviceRows out) {
    return drop_out(model, l, epoch, training, layer_input(l), owned_gid, out);
  }
  // Layer l's input dropout of rows `in`, whose global ids are `gids`, written into `out` (which may be `in`: its
  // backward applies the same mask and scale to a gradient); `in` itself without dropout (`out` untouched).
  ConstDeviceRows drop_out(const Model& model, std::size_t l, std::uint32_t epoch, bool training, ConstDeviceRows in,
                           const DeviceArray<gid_t>& gids, DeviceRows out) {
    const float p = model.dropout_before(l);
    if (!training || p <= 0.0F) return in;
    backend.dropout(in, gids.view(), feature_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch), p,
                    out);
    return out;
  }

  // Where layer l's aggregation writes: the sums of its inputs, or its outputs.
  DeviceRows aggregated(std::size_t l) { return sums_inputs_first[l] ? input_sums[l].view() : outputs[l].view(); }

  void aggregate(const Model& model, std::size_t l, const DevicePart& part, std::uint32_t epoch, bool training) {
    const DeviceRows out = part.in_place() ? aggregated(l) : part_rows.view(part.num_dst, aggregated(l).cols);
    if (sums_inputs_first[l]) {
      model.layer(l).sum_inputs(backend, part.view(), z(l), out);
    } else {
      model.layer(l).aggregate(backend, part.view(),
                               attention_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch), training,
                               z(l), out);
    }
    if (!part.in_place()) backend.copy_rows(out, {}, aggregated(l), part.destinations.view(), out.rows);
  }

  void aggregate_backward(const Model& model, std::size_t l, const DevicePart& part, std::uint32_t epoch) {
    ConstDeviceRows grad_y = grad_outputs[l].view();
    if (!part.in_place()) {
      const DeviceRows gathered = part_rows.view(part.num_dst, grad_y.cols);
      backend.copy_rows(grad_y, part.destinations.view(), gathered, {}, gathered.rows);
      grad_y = gathered;
    }
    const Layer& layer = model.layer(l);
    const SparseBlockView block = part.view();
    DeviceArray<float> workspace(device, layer.aggregate_backward_workspace(part.num_dst, part.num_edges),
                                 "workspace: aggregation backward");
    // One part writes every row's gradient; several add theirs into rows zeroed first. Rows the backward does not
    // read may share their buffer with the gradients: none are passed.
    const ConstDeviceRows rows = layer.aggregation().backward_reads_rows ? ConstDeviceRows(z(l)) : ConstDeviceRows{};
    layer.aggregate_backward(backend, block,
                             attention_dropout_stream(model.config(), static_cast<std::uint32_t>(l), epoch), true, rows,
                             grad_y, grad_z(l), parts.size() > 1, workspace.view());
  }

  // The mirrors' rows of what layer l aggregates (its transformed rows, or its dropped inputs) arrive from their
  // owners while the parts that read no mirror aggregate; or their inputs, which this rank then transforms
  // (exchange_side.hpp).
  void exchange_rows(const Model& model, std::size_t l, std::uint32_t epoch, bool training) {
    if (exchange.has_peers()) {
      const ConstDeviceRows sent = transforms_mirror_rows[l] ? outputs[l - 1].view() : z(l);
      const DeviceRows rows = boundary_rows_of_width(sent.cols);
      backend.copy_rows(sent, boundary.view(), rows, {}, rows.rows);
      send(l, ExchangeDirection::kForward, rows);
    }
    for (const bool after_exchange : {false, true}) {
      if (after_exchange && exchange.has_peers()) {
        if (transforms_mirror_rows[l]) {
          receive_rows(mirror_inputs[l].view());
          transform_mirrors(model, l, epoch, training);
        } else {
          receive_rows(z(l).slice(num_owned, num_mirrors));
        }
      }
      for (const DevicePart& part : parts) {
        if (part.reads_mirrors == after_exchange) aggregate(model, l, part, epoch, training);
      }
    }
  }

  // The mirrors' transformed rows, from the inputs their owners sent, dropped out as the owners would.
  void transform_mirrors(const Model& model, std::size_t l, std::uint32_t epoch, bool training) {
    mirror_kept[l] = drop_out(model, l, epoch, training, mirror_inputs[l].view(), mirror_gid, mirror_dropped[l].view());
    Layer::transform(backend, parameters.layer(l).weight.view(), mirror_kept[l], z(l).slice(num_owned, num_mirrors));
  }

  // The mirrors' share of layer l's transform backward: their part of the weight gradient here, and the gradient of
  // their inputs through this layer's dropout and the previous layer's activation, ∂L/∂Y^{l-1}, which their owners
  // add to their own.
  ConstDeviceRows mirrors_transform_backward(const Model& model, std::size_t l, std::uint32_t epoch) {
    LayerParameters& p = parameters.layer(l);
    const DeviceRows grad_x = mirror_input_gradients[l].view();
    Layer::transform_backward(backend, p.weight.view(), p.weight_grad, mirror_kept[l],
                              grad_z(l).slice(num_owned, num_mirrors), grad_x);
    drop_out(model, l, epoch, true, grad_x, mirror_gid, grad_x);
    backend.activation_backward(model.activation_after(l - 1), mirror_inputs[l].view(), grad_x, grad_x);
    return grad_x;
  }

  // The ends of an exchange: from and into device memory, through the device communicator where it sends from
  // there, else staged through the host. Forward the boundary rows leave, backward the mirrors' gradients.
  void send(std::size_t l, ExchangeDirection direction, ConstDeviceRows rows) {
    const auto layer = static_cast<std::uint32_t>(l);
    const bool forward = direction == ExchangeDirection::kForward;
    const auto start = [&](auto sent) {
      if (forward) {
        exchange.start_rows(layer, sent);
      } else {
        exchange.start_gradients(layer, sent);
      }
    };
    if (exchange.on_device()) {
      start(rows);
      return;
    }
    const Rows staged = host_rows(forward ? host_boundary : host_mirrors, rows.rows, rows.cols);
    transfers.download(rows, staged);
    start(ConstRows(staged));
  }
  void receive_rows(DeviceRows mirrors) {
    if (exchange.on_device()) {
      exchange.finish_rows(mirrors);
      return;
    }
    const Rows staged = host_rows(host_mirrors, mirrors.rows, mirrors.cols);
    exchange.finish_rows(staged);
    transfers.upload(staged, {}, mirrors);
  }
  // What the mirrors on other ranks sent for the boundary rows, summed, added into `gradients` (owned rows).
  void add_received_gradients(DeviceRows gradients) {
    const DeviceRows sums = boundary_rows_of_width(gradients.cols);
    if (exchange.on_device()) {
      exchange.finish_gradients(sums);
    } else {
      const Rows staged = host_rows(host_boundary, sums.rows, sums.cols);
      exchange.finish_gradients(staged);
      transfers.upload(staged, {}, sums);
    }
    backend.add_rows(sums, {}, gradients, boundary.view(), sums.rows);
  }

  ConstDeviceRows forward(Model& model, std::uint32_t epoch, bool training) {
    for (std::size_t l = 0; l < model.num_layers(); ++l) model.layer(l).prepare();
    parameters.upload(backend, model);
    for (std::size_t l = 0; l < model.num_layers(); ++l) {
      const LayerParameters& p = parameters.layer(l);
      if (sums_inputs_first[l]) {
        // The owned rows aggregated are the layer's inputs after dropout; the sums are transformed.
        const DeviceRows owned_rows = z(l).slice(0, num_owned);
        const ConstDeviceRows x = dropped_input(model, l, epoch, training, owned_rows);
        if (x.data != owned_rows.data) backend.copy_rows(x, {}, owned_rows, {}, num_owned);
        exchange_rows(model, l, epoch, training);
        Layer::transform(backend, p.weight.view(), input_sums[l].view(), outputs[l].view());
      } else if (l == 0 && sparse_input) {
        const SparseBlockView x = drop_entries(backend, device, sparse_input->view(), owned_gid.view(),
                                               feature_dropout_stream(model.config(), 0, epoch),
                                               training ? model.dropout_before(0) : 0.0F, false, dropped_entries);
        Layer::transform(backend, p.weight.view(), x, z(l).slice(0, num_owned));
        dropped_entries = {};
        exchange_rows(model, l, epoch, training);
      } else {
        kept[l] = dropped_input(model, l, epoch, training, dropped[l].view());
        Layer::transform(backend, p.weight.view(), kept[l], z(l).slice(0, num_owned));
        exchange_rows(model, l, epoch, training);
      }
      backend.bias_activation(outputs[l].view(), p.bias.view().span(), model.activation_after(l), outputs[l].view());
    }
    transfers.download(outputs.back().view(), logits.view());
    return outputs.back().view();
  }

  void backward(Model& model, std::uint32_t epoch) {
    const std::size_t last = model.num_layers() - 1;
    transfers.upload(grad_logits.view(), {}, grad_outputs[last].view());
    for (std::size_t l = last + 1; l-- > 0;) {
      LayerParameters& p = parameters.layer(l);
      const DeviceRows grad_y = grad_outputs[l].view();
      backend.activation_backward(model.activation_after(l), outputs[l].view(), grad_y, grad_y);
      // The next layer's mirrors sent their share of ∂L/∂Y here, after this activation's backward.
      if (l < last && transforms_mirror_rows[l + 1]) add_received_gradients(grad_y);
      backend.column_sums(grad_y, p.bias_grad.span(), true);
      if (sums_inputs_first[l]) {
        // The input needs no gradient (the first layer), so neither do the rows aggregated: no aggregation, and
        // no exchange, runs backward.
        Layer::transform_backward(backend, p.weight.view(), p.weight_grad, input_sums[l].view(), grad_y, {});
        continue;
      }
      if (parts.size() > 1) backend.zero_rows(grad_z(l), {}, grad_z(l).rows);
      // The parts that read mirrors first: the mirrors' gradients then travel home while the others run.
      for (const bool reading_mirrors : {true, false}) {
        for (const DevicePart& part : parts) {
          if (part.reads_mirrors == reading_mirrors) aggregate_backward(model, l, part, epoch);
        }
        if (!reading_mirrors || !exchange.has_peers()) continue;
        const DeviceRows mirrors = grad_z(l).slice(num_owned, num_mirrors);
        send(l, ExchangeDirection::kBackward,
             transforms_mirror_rows[l] ? mirrors_transform_backward(model, l, epoch) : ConstDeviceRows(mirrors));
      }
      if (exchange.has_peers() && !transforms_mirror_rows[l]) add_received_gradients(grad_z(l));
      if (l == 0 && sparse_input) {
        const SparseBlockView x = drop_entries(backend, device, sparse_input->view(), owned_gid.view(),
                                               feature_dropout_stream(model.config(), 0, epoch),
                                               model.dropout_before(0), true, dropped_entries);
        Layer::transform_backward(backend, p.weight_grad, x, grad_z(l).slice(0, num_owned));
        dropped_entries = {};
        continue;
      }
      const DeviceRows grad_x = l > 0 ? grad_outputs[l - 1].view() : DeviceRows{};
      Layer::transform_backward(backend, p.weight.view(), p.weight_grad, kept[l], grad_z(l).slice(0, num_owned),
                                grad_x);
      if (l > 0) drop_out(model, l, epoch, true, grad_x, owned_gid, grad_x);
    }
    sum_gradients_and_finish_step(parameters, model, comm);
  }

  static Rows host_rows(std::vector<float>& values, std::int64_t rows, std::int64_t cols) {
    values.resize(static_cast<std::size_t>(rows * cols));
    return {values.data(), rows, cols};
  }

  // Runs a step or an evaluation whose measurements are dropped if it fails part-way, so that the next step
  // measures as if it were the first (as the subgraph executor's as_whole does).
  template <typename Fn>
  auto as_whole(Fn&& fn) {
    try {
      return fn();
    } catch (...) {
      transfers.take_traffic();
      exchange.take_stats();
      device.reset_transfer_stats();
      throw;
    }
  }

  Backend& backend;
  Device& device;
  Communicator* comm;  // sums the gradients over the ranks (null: one rank)
  Transfers transfers;
  DeviceParameters parameters;
  BoundaryExchange exchange;
  std::int64_t num_owned = 0;
  std::int64_t num_mirrors = 0;
  DeviceArray<gid_t> owned_gid;             // what dropout masks are addressed by
  DeviceArray<gid_t> mirror_gid;            // and the mirrors', where this rank transforms their rows
  DeviceArray<vid_t> boundary;              // the exchange's boundary rows
  DeviceMatrix input;                       // the owned rows' features, dense
  std::optional<DeviceBlock> sparse_input;  // or as sparse rows (sparse_inputs.hpp)
  DeviceArray<float> dropped_entries;       // their dropout, while a transform or its backward reads it
  std::vector<DevicePart> parts;
  // Per layer:
  std::vector<char> sums_inputs_first;  // aggregates_before_transform
  // What the aggregations read (owned and mirrors: transformed rows, or dropped inputs), and their gradients, in
  // buffers they share where their phases do not overlap.
  RowHomes homes;
  std::vector<DeviceMatrix> row_buffers;
  std::vector<DeviceMatrix> outputs;  // act(Y + b) (owned); the last holds the logits
  std::vector<DeviceMatrix> grad_outputs;
  std::vector<DeviceMatrix> dropped;     // when dropout is on and the transform reads them
  std::vector<DeviceMatrix> input_sums;  // Â·X where the layer aggregates before it transforms
  DeviceMatrix part_rows;                // a part's output rows, or their gradients, before they are scattered
  DeviceMatrix boundary_rows;            // the boundary rows leaving, or their received gradient sums
  std::vector<ConstDeviceRows> kept;     // what transform_backward multiplies by
  // Where the layer transforms its mirrors' rows (transforms_mirrors): their inputs as received, dropped out, and
  // the gradients of those inputs that return to their owners.
  std::vector<char> transforms_mirror_rows;
  std::vector<DeviceMatrix> mirror_inputs;
  std::vector<DeviceMatrix> mirror_dropped;
  std::vector<DeviceMatrix> mirror_input_gradients;
  std::vector<ConstDeviceRows> mirror_kept;
  Matrix logits;
  Matrix grad_logits;
  Matrix downloaded_outputs;  // a layer's outputs, as layer_outputs last downloaded them
  // The host side of an exchange from host memory (Transfers stages the copies through page-locked memory).
  std::vector<float> host_boundary;
  std::vector<float> host_mirrors;
};

InMemoryExecutor::InMemoryExecutor(Resources& resources, const Model& model, const LocalGraph& local,
                                   ConstRows features, Communicator* comm, SparseInputs inputs) {
  const std::optional<SparseRows> sparse = sparse_inputs(inputs, features, comm);
  state_ = std::make_unique<State>(*resources.backend, *resources.device, model, local, features, comm,
                                   sparse ? &*sparse : nullptr);
}

InMemoryExecutor::InMemoryExecutor(Resources& resources, const Model& model, const LocalGraph& local,
                                   ConstRows features, const SparseRows* sparse_features, Communicator* comm)
    : state_(std::make_unique<State>(*resources.backend, *resources.device, model, local, features, comm,
                                     sparse_features)) {}

MemoryForecast forecast_in_memory(Model& model, const LocalGraph& local, ConstRows features,
                                  const SparseRows* sparse_features, bool forward_only, MemorySpace exchange_space,
                                  const LibraryMemory& library) {
  return replay_step(library, exchange_space, [&](Backend& backend, Device& device, Communicator& detached) {
    InMemoryExecutor::State replay(backend, device, model, local, features, &detached, sparse_features);
    replay.forward(model, 0, !forward_only);
    if (!forward_only) replay.backward(model, 0);
    return replayed_copies(replay.transfers);
  });
}

InMemoryExecutor::~InMemoryExecutor() = default;

ConstRows InMemoryExecutor::evaluate(Model& model) {
  state_->as_whole([&] { state_->forward(model, 0, false); });
  return state_->logits.view();
}

double InMemoryExecutor::train_step(Model& model, std::uint32_t epoch, const LossFunction& loss) {
  State& s = *state_;
  return s.as_whole([&] {
    s.forward(model, epoch, true);
    const double total = loss(s.logits.view(), nullptr, s.grad_logits.view());
    s.backward(model, epoch);
    return total;
  });
}

ConstRows InMemoryExecutor::layer_outputs(std::size_t l) {
  State& s = *state_;
  NJ_EXPECTS(l < s.outputs.size(), "layer {} of a model of {}", l + 1, s.outputs.size());
  if (l + 1 == s.outputs.size()) return s.logits.view();
  const DeviceMatrix& rows = s.outputs[l];
  if (s.downloaded_outputs.rows() != rows.rows() || s.downloaded_outputs.cols() != rows.cols()) {
    s.downloaded_outputs = Matrix(rows.rows(), rows.cols());
  }
  s.transfers.download(rows.view(), s.downloaded_outputs.view());
  return s.downloaded_outputs.view();
}

ExecutionMetrics InMemoryExecutor::take_metrics() {
  ExecutionMetrics metrics;
  take_device_metrics(state_->transfers, metrics);
  metrics.exchange = state_->exchange.take_stats();
  return metrics;
}

void take_device_metrics(Transfers& transfers, ExecutionMetrics& m) {
  Device& device = transfers.device();
  device.synchronize();
  const DeviceStats stats = device.stats();
  auto [h2d, d2h] = transfers.take_traffic();
  NJ_EXPECTS(h2d.total() == stats.h2d_bytes && d2h.total() == stats.d2h_bytes,
             "the device copied {} bytes to itself and {} back; the transfers counted {} and {}", stats.h2d_bytes,
             stats.d2h_bytes, h2d.total(), d2h.total());
  m.h2d_bytes = std::exchange(h2d[Traffic::kRows], 0);
  m.d2h_bytes = std::exchange(d2h[Traffic::kRows], 0);
  m.h2d_other = h2d;
  m.d2h_other = d2h;
  m.pageable_copies = stats.pageable_copies;
  m.peak_device_bytes = stats.peak_bytes;
  m.peak_device_footprint_bytes = stats.peak_footprint_bytes;
  m.copy_seconds = stats.copy_seconds;
  device.reset_transfer_stats();
}

}  // namespace nj
