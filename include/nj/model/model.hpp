#pragma once
// A stack of GNN layers, each with its dropout before it and its activation after it.
#include <memory>
#include <string>
#include <vector>

#include "nj/graph/shard.hpp"
#include "nj/kernels/sparse_block.hpp"
#include "nj/model/layer.hpp"

namespace nj {

enum class ModelKind { kGcn, kGat, kSage, kGin, kAppnp };
ModelKind parse_model_kind(const std::string& text);
const char* to_string(ModelKind kind);
Activation parse_activation(const std::string& text);
const char* to_string(Activation activation);

// The activation between layers where none is asked for: ELU for GAT (as in its paper), ReLU otherwise.
// (GIN's MLPs apply ReLU within them whatever this is.)
Activation default_activation(ModelKind kind);

// The models, as nj layers:
//   gcn, gat, sage: `layers` layers of GcnLayer, GatLayer or SageLayer;
//   gin:   `layers` GIN layers, each a GinLayer and the DenseLayer that completes its MLP (ReLU between them);
//   appnp: an MLP of `layers` DenseLayers, then `propagation_steps` PropagationLayers.
struct ModelConfig {
  ModelKind kind = ModelKind::kGcn;
  int layers = 2;        // appnp: the layers of its MLP
  int hidden = 16;       // hidden width; GAT: channels per head in hidden layers
  int heads = 8;         // GAT hidden-layer heads (concatenated)
  int output_heads = 1;  // GAT output-layer heads (averaged)
  Activation activation = Activation::kRelu;
  float dropout = 0.5F;  // on the input rows of every layer with weights (not GIN's second Linear), in training
  float attention_dropout = 0.6F;  // GAT, on attention coefficients, in training
  float gin_eps = 0.0F;            // GIN's ε (fixed)
  int propagation_steps = 10;      // APPNP's K
  float teleport = 0.1F;           // APPNP's α
  std::uint64_t seed = 0;
};

// "gcn, 2 layers, hidden 16, activation relu, dropout 0.5, seed 0": the options that `model`'s kind uses.
std::string describe_model(const ModelConfig& model);

struct PreparedGraph {
  CsrGraph graph;
  std::vector<float> vertex_factor;  // per vertex of `graph`: the edges' weights (EdgeWeights); empty: unweighted
  FactorOf factor_of = FactorOf::kBothEndpoints;

  EdgeWeights weights() const { return {.per_edge = {}, .vertex_factor = vertex_factor, .factor_of = factor_of}; }
  bool weighted() const { return !vertex_factor.empty(); }
};

class Model {
 public:
  Model(const ModelConfig& config, std::int64_t in_dim, std::int64_t num_classes);

  const ModelConfig& config() const { return config_; }
  std::size_t num_layers() const { return layers_.size(); }
  Layer& layer(std::size_t l) { return *layers_[l]; }
  const Layer& layer(std::size_t l) const { return *layers_[l]; }
  std::vector<Parameter*> parameters();
  std::int64_t num_parameters();
  // Activation after layer l (none after the last).
  Activation activation_after(std::size_t l) const { return activation_after_[l]; }
  // Dropout probability on layer l's input rows, in training.
  float dropout_before(std::size_t l) const { return dropout_before_[l]; }

  // The graph as the layers read it. GCN and APPNP add the self-loops an owned vertex lacks and weigh edges by
  // GCN's symmetric normalisation; GAT keeps exactly one self-loop each; SAGE weighs d's in-edges by 1/deg(d), GIN
  // not at all, both on the graph as stored. Degrees are the whole graph's, so that every rank weighs an edge as a
  // single process would.
  PreparedGraph prepare(const LocalGraph& local) const;

 private:
  void add_layer(std::unique_ptr<Layer> layer, float dropout, Activation activation);

  ModelConfig config_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<float> dropout_before_;
  std::vector<Activation> activation_after_;
};

}  // namespace nj
