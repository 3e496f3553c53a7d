#include "nj/run/rank_setup.hpp"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "nj/core/bytes.hpp"
#include "nj/core/host_memory.hpp"
#include "nj/core/stopwatch.hpp"
#include "nj/io/dataset_file.hpp"
#include "nj/io/shard_file.hpp"
#include "nj/partition/parallel.hpp"
#include "nj/runtime/rank_communicator.hpp"

namespace nj {
namespace {

// Ranks that each read a slice of the dataset file partition it together, and each keeps the shard of its own part.
Shard partition_rank_part(const DataSource& source, Communicator& comm) {
  const PartitionOptions options{.method = source.partition_method, .parts = comm.size()};
  Shard own;
  const PartitionManifest manifest =
      partition_in_parallel(source.dataset, options, comm, [&](Shard&& shard) { own = std::move(shard); });
  spdlog::info("partitioned in parallel ({}, {} parts) in {:.2f} s: edge cut {:.1f}%", manifest.partition.method,
               options.parts, manifest.partition.seconds, 100.0 * manifest.partition.cut_fraction());
  return own;
}

Shard read_rank_part(const DataSource& source, Communicator& comm) {
  if (!source.partitions.empty()) return load_part(source.partitions, comm.rank(), comm.size());
  if (comm.size() > 1 && runs_in_parallel(source.partition_method)) return partition_rank_part(source, comm);
  Dataset dataset = read_dataset(source.dataset);
  if (comm.size() == 1) return whole_graph_shard(std::move(dataset));
  PartitionOptions options;
  options.method = source.partition_method;
  options.parts = comm.size();
  PartitionInfo info;
  const std::vector<std::int32_t> part_of = assign_parts(dataset, options, info);
  spdlog::info("partitioned in memory ({}, {} parts) in {:.2f} s: edge cut {:.1f}%", to_string(options.method),
               options.parts, info.seconds, 100.0 * info.cut_fraction());
  return make_shard(dataset, part_of, comm.rank(), info);
}

}  // namespace

Shard load_rank_shard(const DataSource& source, VertexOrder order, Communicator& comm) {
  const auto start = std::chrono::steady_clock::now();
  Shard shard = read_rank_part(source, comm);
  order_vertices(shard, order);
  if (source.normalize_rows) row_normalize(shard.features);
  spdlog::info(
      "dataset {}: {} vertices, {} edges, {} features, {} classes, {} training vertices (loaded and "
      "ordered in {:.2f} s)",
      shard.name.empty() ? source.dataset : shard.name, shard.global_vertices, shard.global_edges,
      shard.features.cols(), shard.num_classes, shard.global_train, seconds_since(start));
  if (comm.size() > 1) {
    spdlog::info("{} ranks, {} partition: edge cut {:.1f}%, rank 0 owns {} vertices and mirrors {}", comm.size(),
                 shard.partition.method, 100.0 * shard.partition.cut_fraction(), shard.num_owned(),
                 shard.local.num_mirrors());
  }
  return shard;
}

std::int64_t PlannedRun::exchange_bytes_sent() const {
  std::int64_t bytes = 0;
  for (const ExchangeForecast& layer : exchange) bytes += layer.forward_bytes + layer.backward_bytes;
  return bytes;
}

RunHostUse PlannedRun::host_use(std::int64_t process_bytes) const {
  std::vector<char> computed_again;
  if (const Pass* pass = first_pass()) computed_again = pass->outputs_recomputed;
  return {.process_bytes = process_bytes,
          .device_peak_bytes = device.peak_footprint_bytes,
          .plan_bytes = plan_host_bytes,
          .executor_bytes = executor_host_bytes,
          .sparse_input_bytes = sparse_inputs ? sparse_rows_bytes(sparse_inputs->rows(), sparse_inputs->nonzeros()) : 0,
          .staging_bytes = device.largest_copy_bytes,
          .largest_step_bytes = plan ? plan->largest_step_bytes : 0,
          .first_layer_sums_inputs = first_layer_sums_inputs,
          .outputs_computed_again = std::move(computed_again)};
}

namespace {

std::vector<ExchangeForecast> exchange_sent(const Model& model, const LocalGraph& local, bool first_layer_sums_inputs,
                                            bool forward_only) {
  std::int64_t forward_rows = 0;
  std::int64_t backward_rows = 0;
  for (const PeerRows& p : local.peers) {
    forward_rows += static_cast<std::int64_t>(p.send.size());
    backward_rows += static_cast<std::int64_t>(p.receive.size());
  }
  constexpr auto kFloat = static_cast<std::int64_t>(sizeof(float));
  std::vector<ExchangeForecast> layers;
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    const std::int64_t width = exchanged_width(model, l, first_layer_sums_inputs);
    const std::int64_t gradient_width = forward_only ? 0 : exchanged_gradient_width(model, l, first_layer_sums_inputs);
    layers.push_back({exchange_side(model, l, first_layer_sums_inputs), width, forward_rows * width * kFloat,
                      backward_rows * gradient_width * kFloat});
  }
  return layers;
}

}  // namespace

PlannedRun plan_run(const ExecutorChoice& choice, Model& model, const LocalGraph& local, ConstRows features,
                    bool sparse, std::span<const std::uint8_t> loss_reads, int threads, MemorySpace exchange_space) {
  PlannedRun run;
  if (sparse) run.sparse_inputs = sparse_input_rows(features);
  const SparseRows* rows = run.sparse_inputs ? &*run.sparse_inputs : nullptr;
  if (choice.in_memory) {
    run.device = forecast_in_memory(model, local, features, rows, choice.options.forward_only, exchange_space,
                                    choice.options.library);
    run.first_layer_sums_inputs = aggregates_before_transform(model.layer(0), 0, sparse);
  } else {
    SubgraphExecutorOptions options = choice.options;
    options.loss_reads = options.forward_only ? std::span<const std::uint8_t>() : loss_reads;
    const std::int64_t before = heap_bytes_in_use();
    run.plan = settled_plan(model, local, features, options, rows);
    run.plan_host_bytes = std::max<std::int64_t>(0, heap_bytes_in_use() - before);
    run.device = run.plan->memory;
    run.executor_host_bytes =
        executor_host_bytes(*run.plan, model.num_layers(), threads > 0 ? threads : omp_get_max_threads());
    run.first_layer_sums_inputs = run.plan->first_layer_sums_inputs();
  }
  run.exchange = exchange_sent(model, local, run.first_layer_sums_inputs, choice.options.forward_only);
  return run;
}

HostFittedRun plan_rank_run(const ExecutorChoice& choice, const Resources& resources, Model& model, const Shard& shard,
                            Communicator& comm, int threads, const HostBudget& host) {
  if (choice.in_memory && choice.automatic) {
    spdlog::info(
        "execution: in-memory (no --device-memory was given: the whole graph on the device; --execution "
        "reuse runs the subgraph executor)");
  }
  // Every rank decides alike (a collective), before any executor is made.
  const bool sparse =
      takes_sparse_inputs(choice.sparse_inputs, shard.features.view(), shard.features_stored_sparse, &comm);
  ExecutorChoice completed = choice;
  completed.options.library = resources.backend->library_memory();
  return plan_within_host_memory(completed, host, [&](const ExecutorChoice& planned) {
    return plan_run(planned, model, shard.local, shard.features.view(), sparse, shard.train_mask, threads,
                    comm.exchange_space());
  });
}

std::unique_ptr<Executor> make_executor(PlannedRun run, Resources& resources, Model& model, Shard& shard,
                                        Communicator& comm) {
  if (!run.plan) {
    const SparseRows* sparse = run.sparse_inputs ? &*run.sparse_inputs : nullptr;
    return std::make_unique<InMemoryExecutor>(resources, model, shard.local, shard.features.view(), sparse, &comm);
  }
  log_plan(model, *run.plan);
  auto executor = std::make_unique<SubgraphExecutor>(resources, model, shard.local, shard.features.view(),
                                                     std::move(*run.plan), std::move(run.sparse_inputs), &comm);
  // The executor holds what it reads of the graph (its plan, and the graph with self-loops that its steps build
  // blocks from): the loaded in-edges, a copy, go before the rows fill (the offsets stay, for the counts).
  std::vector<vid_t>().swap(shard.local.graph.sources);
  return executor;
}

std::unique_ptr<Executor> make_executor(const ExecutorChoice& choice, Resources& resources, Model& model, Shard& shard,
                                        Communicator& comm) {
  return make_executor(plan_rank_run(choice, resources, model, shard, comm, 0).run, resources, model, shard, comm);
}

void check_same_partition(Communicator& comm, const Shard& shard) {
  const PartitionInfo& p = shard.partition;
  std::vector<double> lowest = {static_cast<double>(shard.global_vertices),
                                static_cast<double>(shard.global_edges),
                                static_cast<double>(shard.global_train),
                                static_cast<double>(p.parts),
                                static_cast<double>(p.seed),
                                static_cast<double>(p.edge_cut)};
  std::vector<double> highest = lowest;
  for (double& value : lowest) value = -value;
  comm.all_reduce_max(lowest);
  comm.all_reduce_max(highest);
  for (std::size_t i = 0; i < highest.size(); ++i) {
    NJ_REQUIRE(-lowest[i] == highest[i],
               "the ranks hold shards of different partitions or datasets (their vertex, edge or training counts, "
               "part counts, seeds or edge cuts differ)");
  }
}

void set_up_rank_device(RankDevice& rank, const ExecutorChoice& choice, int threads, bool deterministic,
                        Communicator& comm) {
  rank.device.ranks_per_gpu = count_ranks_sharing_gpu(comm, rank.device);
  agree_on_failure(comm, [&] {
    spdlog::info("device: {}{}", rank.device.reason,
                 rank.device.ranks_per_gpu > 1 ? fmt::format(", shared by {} ranks", rank.device.ranks_per_gpu) : "");
    rank.resources =
        make_resources(rank.device, {.budget_bytes = choice.in_memory ? kUnlimited : choice.options.device_budget,
                                     .threads = threads,
                                     .deterministic = deterministic});
  });
  // A rank that fails to connect leaves the others inside the connection: its error ends the job (main).
  rank.device_comm = make_rank_communicator(comm, rank.resources);
  if (comm.size() > 1 && !rank.device_comm) {
    spdlog::info("exchange: over MPI from host memory ({} ranks share a GPU; NCCL needs one GPU per rank)",
                 rank.resources.ranks_per_device);
  }
}

void log_plan(const Model& model, const EpochPlan& plan) {
  std::string parts;
  if (plan.options.mode == ExecutionMode::kRecompute) {
    parts = fmt::format("{} subgraphs, each a pass over its closure", plan.closures.size());
  } else {
    const auto& layer_parts = plan.passes.front().layer_parts;
    for (std::size_t l = 0; l < layer_parts.size(); ++l) {
      parts += fmt::format("{}layer {}: {} subgraphs", l == 0 ? "" : ", ", model.layer_label(l), layer_parts[l].size());
    }
  }
  const bool unlimited = plan.options.device_budget == kUnlimited;
  spdlog::info("plan: {} with {} cache, budget {} (pools {}, step buffers {}), {}, {} steps",
               to_string(plan.options.mode), to_string(plan.options.policy), format_bytes(plan.options.device_budget),
               format_bytes(unlimited ? kUnlimited : plan.pool_bytes),
               format_bytes(unlimited ? kUnlimited : plan.step_limit_bytes), parts, plan.num_steps);
  const bool built = !plan.passes.empty() && !plan.passes.front().keeps_blocks();
  spdlog::info("plan: subgraph blocks {} (--host-blocks {})",
               built ? "built by each step as it runs" : "kept in host memory",
               format_bytes(plan.options.kept_block_bytes));
  // The planner cuts steps to a bound it computes from the widest rows a step may hold; the replay then measures what
  // they take, which may be less: the bound is the larger figure of the two where steps never reach it.
  spdlog::info(
      "plan: device peak {} of {} ({}); steps cut to at most {} each (the planner's bound; the peak is "
      "what they take)",
      format_bytes(plan.memory.peak_footprint_bytes), format_bytes(plan.options.device_budget),
      describe_forecast(plan.memory), format_bytes(plan.largest_step_bytes));
  if (!plan.passes.empty() && !plan.passes.front().blocks_stay.empty()) {
    const Pass& pass = plan.passes.front();
    std::size_t staying = 0;
    std::size_t blocks = 0;
    for (const auto& layer : pass.blocks_stay) {
      blocks += layer.size();
      staying += static_cast<std::size_t>(std::count(layer.begin(), layer.end(), 1));
    }
    const std::string sums = pass.sums_stay.empty()
                                 ? std::string()
                                 : fmt::format(", {} of {} first-layer sums ({})",
                                               std::count(pass.sums_stay.begin(), pass.sums_stay.end(), 1),
                                               pass.sums_stay.size(), format_bytes(plan.staying_sums_bytes));
    spdlog::info(
        "plan: in the room the budget leaves, {} of {} subgraph blocks ({}) and {} of {} feature chunks ({}){} stay "
        "on the device; the others travel with their steps",
        staying, blocks, format_bytes(plan.staying_block_bytes),
        std::count(pass.inputs_stay.begin(), pass.inputs_stay.end(), 1), pass.inputs_stay.size(),
        format_bytes(plan.staying_input_bytes), sums);
  }
  if (plan.passes.size() == 1 && plan.options.device_budget != kUnlimited) {
    const Pass& pass = plan.passes.front();
    std::string pools;
    for (std::size_t phase = 0; phase < pass.trace.capacity_rows.size(); ++phase) {
      pools += fmt::format("{}{}", phase == 0 ? "" : ", ", format_bytes(pass.pool_bytes(phase)));
    }
    spdlog::info("plan: pools per phase (forward layers, then backward from the last): {}", pools);
    std::string chained;
    for (std::size_t l = 0; l < pass.chained.size(); ++l) {
      if (!pass.chained_to_next(l)) continue;
      chained +=
          fmt::format("{}{} to {}{}", chained.empty() ? "" : ", ", model.layer_label(l), model.layer_label(l + 1),
                      pass.output_recomputed(l) ? " (outputs computed again backward)" : "");
    }
    if (!chained.empty()) {
      spdlog::info("plan: layers chained, each transforming the previous one's outputs as they are aggregated: {}",
                   chained);
    }
  }
  std::size_t logits = 0;
  std::size_t read = 0;
  for (const Pass& pass : plan.passes) {
    if (pass.loss_positions.empty()) continue;
    logits += static_cast<std::size_t>(pass.num_outputs);
    for (const std::vector<vid_t>& positions : pass.loss_positions) read += positions.size();
  }
  if (logits > 0) {
    spdlog::info("plan: the loss reads {} of {} logits: only theirs go to the host, and only their gradients come back",
                 read, logits);
  }
  spdlog::info("plan: per epoch h2d {} d2h {} (rows {} and {} of them through the cache), recompute ratio {:.3f}",
               format_bytes(plan.memory.h2d.total()), format_bytes(plan.memory.d2h.total()),
               format_bytes(plan.cache_h2d_bytes), format_bytes(plan.cache_d2h_bytes),
               static_cast<double>(plan.rows_computed) / static_cast<double>(plan.rows_needed));
}

}  // namespace nj
