#include "nj/exec/executor.hpp"

namespace nj {
namespace {

SparseBlock prepared_block(const Model& model, const LocalGraph& local) {
  PreparedGraph prepared = model.prepare(local);
  return local_graph_block(prepared.graph, std::move(prepared.weights), local.num_owned, local.global_id);
}

}  // namespace

InMemoryExecutor::InMemoryExecutor(Backend& backend, const Model& model, const LocalGraph& local, ConstRows features,
                                   Communicator* comm)
    : block_(prepared_block(model, local)),
      features_(features),
      exchange_(comm, local, model.num_layers()),
      stack_(backend, model, std::vector<SparseBlockView>(model.num_layers(), block_.view()), buffers_, exchange_),
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
