#include <algorithm>

#include "nj/exec/executor.hpp"
#include "nj/exec/subgraph.hpp"

namespace nj {
namespace {

// The owned rows with all their in-edges, as one part that writes the outputs in place; or, where there are
// peers, as a part of the owned rows that read no mirror and a part of those that do, so that the first runs
// while the mirrors' rows travel.
std::vector<Subgraph> owned_parts(const Model& model, const LocalGraph& local) {
  PreparedGraph prepared = model.prepare(local);
  std::vector<Subgraph> parts;
  if (local.peers.empty()) {
    parts.push_back(
        {{}, local_graph_block(prepared.graph, std::move(prepared.weights), local.num_owned, local.global_id)});
    return parts;
  }
  std::vector<vid_t> interior;
  std::vector<vid_t> boundary;
  for (vid_t v = 0; v < local.num_owned; ++v) (local.reads_mirror(v) ? boundary : interior).push_back(v);
  for (const auto* destinations : {&interior, &boundary}) {
    if (!destinations->empty()) {
      parts.push_back(make_subgraph(prepared.graph, prepared.weights, *destinations, local.global_id));
    }
  }
  return parts;
}

std::vector<BlockPart> views_of(const std::vector<Subgraph>& parts, vid_t num_owned) {
  std::vector<BlockPart> views;
  for (const Subgraph& part : parts) {
    BlockPart& view = views.emplace_back();
    view.block = part.block.view();
    if (part.sources.empty()) continue;  // the whole owned graph, in place
    view.block.src_row = part.sources.data();
    view.destinations = part.destinations();
    view.reads_mirrors = reads_mirror(part, num_owned);
  }
  return views;
}

}  // namespace

InMemoryExecutor::InMemoryExecutor(Backend& backend, const Model& model, const LocalGraph& local, ConstRows features,
                                   Communicator* comm)
    : parts_(owned_parts(model, local)),
      owned_gid_(local.global_id.begin(), local.global_id.begin() + local.num_owned),
      features_(features),
      exchange_(comm, local, model.num_layers()),
      stack_(backend, model, views_of(parts_, local.num_owned), owned_gid_, local.num_local(), buffers_, exchange_),
      grad_logits_(local.num_owned, model.layer(model.num_layers() - 1).out_dim()) {
  NJ_EXPECTS(features.rows == local.num_owned, "features have {} rows for {} owned vertices", features.rows,
             local.num_owned);
}

ConstRows InMemoryExecutor::evaluate(Model& model) { return stack_.forward(model, 0, false, features_); }

double InMemoryExecutor::train_step(Model& model, std::uint32_t epoch, const LossFunction& loss) {
  const ConstRows logits = stack_.forward(model, epoch, true, features_);
  const double total = loss(logits, nullptr, grad_logits_.view());
  stack_.backward(model, epoch, grad_logits_.view());
  return total;
}

ExecutionMetrics InMemoryExecutor::take_metrics() {
  ExecutionMetrics metrics;
  metrics.exchange = exchange_.take_stats();
  return metrics;
}

}  // namespace nj
