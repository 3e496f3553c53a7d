#pragma once
// A stack of GNN layers with dropout before each layer and an activation between layers.
#include <memory>
#include <string>
#include <vector>

#include "nj/graph/shard.hpp"
#include "nj/kernels/sparse_block.hpp"
#include "nj/model/layer.hpp"

namespace nj {

enum class ModelKind { kGcn, kGat };
ModelKind parse_model_kind(const std::string& text);
const char* to_string(ModelKind kind);
Activation parse_activation(const std::string& text);
const char* to_string(Activation activation);

// The activation between layers where none is asked for: ELU for GAT (as in its paper), ReLU otherwise.
Activation default_activation(ModelKind kind);

struct ModelConfig {
  ModelKind kind = ModelKind::kGcn;
  int layers = 2;
  int hidden = 16;       // GCN: hidden width; GAT: channels per head in hidden layers
  int heads = 8;         // GAT hidden-layer heads (concatenated)
  int output_heads = 1;  // GAT output-layer heads (averaged)
  Activation activation = Activation::kRelu;
  float dropout = 0.5F;            // on every layer's input rows, in training
  float attention_dropout = 0.6F;  // GAT, on attention coefficients, in training
  std::uint64_t seed = 0;
};

// "gcn, 2 layers, hidden 16, activation relu, dropout 0.5, seed 0": the options that `model`'s kind uses.
std::string describe_model(const ModelConfig& model);

struct PreparedGraph {
  CsrGraph graph;
  std::vector<float> vertex_factor;  // per vertex of `graph`: GCN's weights (EdgeWeights); empty for GAT

  EdgeWeights weights() const { return {.per_edge = {}, .vertex_factor = vertex_factor}; }
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
  Activation activation_after(std::size_t l) const {
    return l + 1 < layers_.size() ? config_.activation : Activation::kNone;
  }

  // The graph as the layers read it: GCN adds the self-loops an owned vertex lacks, GAT keeps exactly one
  // each; with GCN's symmetric normalisation computed from the whole graph's degrees, so that every rank
  // weighs an edge as a single process would.
  PreparedGraph prepare(const LocalGraph& local) const;

 private:
  ModelConfig config_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace nj
