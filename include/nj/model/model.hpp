#pragma once
// A stack of GNN layers, each with its dropout before it and its activation after it.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nj/graph/shard.hpp"
#include "nj/graph/sparse_block.hpp"
#include "nj/model/layer.hpp"

namespace nj {

// The built-in models, and `custom`: a model of the caller's own layers (Model's second constructor).
enum class ModelKind { kGcn, kGat, kSage, kGin, kAppnp, kCustom };
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
// Its user counts its layers otherwise (Model::num_model_layers): a GIN layer is one, and APPNP's propagation one
// more after its MLP's.
struct ModelConfig {
  ModelKind kind = ModelKind::kGcn;
  int layers = 2;        // appnp: the layers of its MLP
  int hidden = 16;       // hidden width; GAT: channels per head in hidden layers
  int heads = 8;         // GAT hidden-layer heads (concatenated)
  int output_heads = 1;  // GAT output-layer heads (averaged)
  Activation activation = Activation::kRelu;
  float dropout = 0.5F;  // on the input rows of every layer with weights (not GIN's second Linear), in training
  float attention_dropout = 0.6F;  // GAT, on attention coefficients, in training
  float gin_eps = 0.0F;            // GIN's ε, or its initial value where trained
  bool gin_train_eps = false;      // GIN's ε a parameter (PyG's train_eps)
  int propagation_steps = 10;      // APPNP's K
  float teleport = 0.1F;           // APPNP's α
  std::uint64_t seed = 0;
};

// The kind that reads a model option beyond those every kind reads, by the option's name on the command line
// ("--heads": GAT); std::nullopt for an option every kind reads, or one that is not a model option.
std::optional<ModelKind> kind_reading_option(std::string_view option);

// "gcn, 2 layers, hidden 16, activation relu, dropout 0.5, seed 0": the options that `model`'s kind uses.
std::string describe_model(const ModelConfig& model);

// The name each parameter of a built-in model of `config` had where the layers were numbered as built, from 0, and a
// parameter named by its role alone ("layer2.weight": a GIN's second layer's first Linear), by its name now
// (Model::model_layer_name): how checkpoints before format 3 named them. None for a custom model, whose layers named
// their parameters themselves.
std::map<std::string, std::string> names_by_built_layer(const ModelConfig& config);

// How a model prepares the graph its layers read (Model::prepare).
enum class GraphForm {
  kGcnNormalised,    // self-loops added where missing; edges weighted by D^-1/2 (A+I) D^-1/2 (GCN, APPNP)
  kOneSelfLoopEach,  // exactly one self-loop per vertex; unweighted (GAT)
  kMeanOverInEdges,  // as stored; d's in-edges weighted 1/deg(d) (SAGE)
  kAsStored,         // as stored; unweighted (GIN)
};

// A layer of a model, with the dropout on its input rows (in training) and the activation after it.
struct ModelLayer {
  std::unique_ptr<Layer> layer;
  float dropout = 0.0F;
  Activation activation = Activation::kNone;
};

struct PreparedGraph {
  CsrGraph graph;
  std::vector<float> vertex_factor;  // per vertex of `graph`: the edges' weights (EdgeWeights); empty: unweighted
  FactorOf factor_of = FactorOf::kBothEndpoints;

  EdgeWeights weights() const { return {.per_edge = {}, .vertex_factor = vertex_factor, .factor_of = factor_of}; }
  bool weighted() const { return !vertex_factor.empty(); }
  // How a packed block cut from this graph holds its weights (PackedBlock).
  PackedWeights packed_weights() const {
    if (!weighted()) return PackedWeights::kNone;
    return factor_of == FactorOf::kTarget ? PackedWeights::kTargetFactor : PackedWeights::kBothFactors;
  }
};

class Model {
 public:
  // A built-in model (not `custom`).
  Model(const ModelConfig& config, std::int64_t in_dim, std::int64_t num_classes);
  // A model of the caller's layers, on the graph `form` prepares; `seed` addresses its dropout masks. Each layer's
  // input width must be the previous one's output width (docs/layers.md).
  Model(std::vector<ModelLayer> layers, GraphForm form, std::uint64_t seed);

  const ModelConfig& config() const { return config_; }
  // The layers as built: what the executors run, numbered from 0.
  std::size_t num_layers() const { return layers_.size(); }
  Layer& layer(std::size_t l) { return *layers_[l]; }
  const Layer& layer(std::size_t l) const { return *layers_[l]; }
  std::vector<Parameter*> parameters();
  std::int64_t num_parameters() const;
  // The host memory the model's matrices hold: its parameters with their gradients, and the effective weights that a
  // layer keeps beside them, with theirs (GAT's, its attention folded in; SAGE's, its two weights joined).
  std::int64_t host_bytes() const;
  // Activation after layer l (none after the last).
  Activation activation_after(std::size_t l) const { return activation_after_[l]; }
  // Dropout probability on layer l's input rows, in training.
  float dropout_before(std::size_t l) const { return dropout_before_[l]; }

  // The layers as the model's user counts them (--layers, nj infer's --embeddings, the parameters' names): one per
  // GCN, GAT or SAGE layer and per layer of a custom model; a GIN layer with the DenseLayer that completes its MLP;
  // APPNP's MLP layers, and its propagation steps as one more.
  std::size_t num_model_layers() const { return num_model_layers_; }
  // The built layer whose output is model layer m's (both from 0): the last of those it is made of.
  std::size_t output_of_model_layer(std::size_t m) const;
  // Model layer m's name (m from 0): "layer" and its number from 1, with as many digits as the largest needs
  // ("layer01" of 12), so that the names sort as the layers do. Its parameters are named within it, by their role
  // ("layer1.weight"; GIN's "layer1.eps" and its MLP's "layer1.linear1.weight" and "layer1.linear2.weight"), and
  // nj infer names its output so.
  std::string model_layer_name(std::size_t m) const;
  // Built layer l as its user counts it: its model layer's number from 1, and where that model layer is built of
  // several, which of them from 1 ("1.2": the second half of GIN's first layer). What nj plan and the plan's log
  // call it.
  std::string layer_label(std::size_t l) const;

  // The graph as the layers read it, in the model's GraphForm. Degrees are the whole graph's, so that every rank
  // weighs an edge as a single process would.
  PreparedGraph prepare(const LocalGraph& local) const;
  GraphForm graph_form() const { return graph_form_; }

 private:
  // Adds a built layer as part of model layer `model_layer`, naming its parameters within that layer (and within
  // `part` of it, where given).
  void add_layer(std::unique_ptr<Layer> layer, float dropout, Activation activation, std::size_t model_layer,
                 const std::string& part = "");
  // Every layer reads what the one before it writes, and reads the graph as the model prepares it.
  void check_layers() const;

  ModelConfig config_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<float> dropout_before_;
  std::vector<Activation> activation_after_;
  std::size_t num_model_layers_ = 0;
  std::vector<std::size_t> model_layer_of_;  // per built layer
  GraphForm graph_form_ = GraphForm::kGcnNormalised;
};

}  // namespace nj
