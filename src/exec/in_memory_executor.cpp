#include "nj/exec/executor.hpp"

namespace nj {
namespace {

SparseBlock prepared_block(const Model& model, const CsrGraph& graph, gid_t first_gid) {
  const CsrGraph prepared = model.prepare_graph(graph);
  return whole_graph_block(prepared, model.edge_weights(prepared), first_gid);
}

}  // namespace

InMemoryExecutor::InMemoryExecutor(Backend& backend, const Model& model, const CsrGraph& graph, ConstRows features,
                                   gid_t first_gid)
    : block_(prepared_block(model, graph, first_gid)),
      features_(features),
      stack_(backend, model, std::vector<SparseBlockView>(model.num_layers(), block_.view()), buffers_),
      grad_logits_(graph.num_vertices(), model.layer(model.num_layers() - 1).out_dim()) {
  NJ_EXPECTS(features.rows == graph.num_vertices(), "features have {} rows for {} vertices", features.rows,
             graph.num_vertices());
}

ConstRows InMemoryExecutor::evaluate(Model& model) { return stack_.forward(model, 0, false, features_); }

double InMemoryExecutor::train_step(Model& model, std::uint32_t epoch, const LossFunction& loss) {
  const ConstRows logits = stack_.forward(model, epoch, true, features_);
  const double total = loss(logits, nullptr, grad_logits_.view());
  stack_.backward(model, epoch, grad_logits_.view());
  return total;
}

}  // namespace nj
