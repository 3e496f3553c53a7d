#include "nj/model/model.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "nj/core/enum_names.hpp"
#include "nj/core/error.hpp"
#include "nj/graph/sparse_block.hpp"
#include "nj/model/layers.hpp"

namespace nj {

namespace {

constexpr EnumNames<ModelKind, 6> kModelNames{"model",
                                              {{{ModelKind::kGcn, "gcn"},
                                                {ModelKind::kGat, "gat"},
                                                {ModelKind::kSage, "sage"},
                                                {ModelKind::kGin, "gin"},
                                                {ModelKind::kAppnp, "appnp"},
                                                {ModelKind::kCustom, "custom"}}}};

GraphForm graph_form_of(ModelKind kind) {
  switch (kind) {
    case ModelKind::kGat: return GraphForm::kOneSelfLoopEach;
    case ModelKind::kSage: return GraphForm::kMeanOverInEdges;
    case ModelKind::kGin: return GraphForm::kAsStored;
    case ModelKind::kGcn:
    case ModelKind::kAppnp:
    case ModelKind::kCustom: break;
  }
  return GraphForm::kGcnNormalised;
}
// What --activation accepts; "none" is the output layer's, printed but never asked for.
constexpr EnumNames<Activation, 2> kActivationNames{"activation",
                                                    {{{Activation::kRelu, "relu"}, {Activation::kElu, "elu"}}}};

}  // namespace

ModelKind parse_model_kind(const std::string& text) { return kModelNames.parse(text); }

Activation default_activation(ModelKind kind) { return kind == ModelKind::kGat ? Activation::kElu : Activation::kRelu; }

std::string describe_model(const ModelConfig& model) {
  if (model.kind == ModelKind::kCustom) return fmt::format("custom, {} layers, seed {}", model.layers, model.seed);
  const bool gat = model.kind == ModelKind::kGat;
  std::string text = fmt::format("{}, {} layers, hidden {}", to_string(model.kind), model.layers, model.hidden);
  if (gat) text += fmt::format(", heads {}, output heads {}", model.heads, model.output_heads);
  if (model.kind == ModelKind::kGin)
    text += fmt::format(", eps {}{}", model.gin_eps, model.gin_train_eps ? " (trained)" : "");
  if (model.kind == ModelKind::kAppnp) {
    text += fmt::format(", propagation steps {}, teleport {}", model.propagation_steps, model.teleport);
  }
  text += fmt::format(", activation {}, dropout {}", to_string(model.activation), model.dropout);
  if (gat) text += fmt::format(", attention dropout {}", model.attention_dropout);
  return text + fmt::format(", seed {}", model.seed);
}

std::optional<ModelKind> kind_reading_option(std::string_view option) {
  static constexpr std::pair<std::string_view, ModelKind> kOwnOptions[] = {{"--heads", ModelKind::kGat},
                                                                           {"--output-heads", ModelKind::kGat},
                                                                           {"--attention-dropout", ModelKind::kGat},
                                                                           {"--gin-eps", ModelKind::kGin},
                                                                           {"--gin-train-eps", ModelKind::kGin},
                                                                           {"--propagation-steps", ModelKind::kAppnp},
                                                                           {"--teleport", ModelKind::kAppnp}};
  for (const auto& [name, kind] : kOwnOptions) {
    if (name == option) return kind;
  }
  return std::nullopt;
}

std::map<std::string, std::string> names_by_built_layer(const ModelConfig& config) {
  std::map<std::string, std::string> before;
  if (config.kind == ModelKind::kCustom) return before;
  Model model(config, 1, 1);  // the names do not depend on the widths
  for (std::size_t l = 0; l < model.num_layers(); ++l) {
    for (const Parameter* p : model.layer(l).parameters()) {
      before[p->name] = fmt::format("layer{}.{}", l, p->name.substr(p->name.rfind('.') + 1));
    }
  }
  return before;
}

const char* to_string(ModelKind kind) { return kModelNames.name(kind); }
Activation parse_activation(const std::string& text) { return kActivationNames.parse(text); }
const char* to_string(Activation activation) {
  return activation == Activation::kNone ? "none" : kActivationNames.name(activation);
}

Model::Model(const ModelConfig& config, std::int64_t in_dim, std::int64_t num_classes)
    : config_(config), graph_form_(graph_form_of(config.kind)) {
  NJ_REQUIRE(config.kind != ModelKind::kCustom, "a custom model is built from its layers, not from model options");
  NJ_REQUIRE(config.layers >= 1, "the model needs at least one layer, got {}", config.layers);
  NJ_REQUIRE(config.hidden >= 1, "hidden width must be positive, got {}", config.hidden);
  NJ_REQUIRE(config.dropout >= 0.0F && config.dropout < 1.0F, "dropout must be in [0, 1), got {}", config.dropout);
  NJ_REQUIRE(config.attention_dropout >= 0.0F && config.attention_dropout < 1.0F,
             "attention dropout must be in [0, 1), got {}", config.attention_dropout);
  NJ_REQUIRE(config.heads >= 1 && config.output_heads >= 1, "GAT heads must be positive");
  NJ_REQUIRE(config.heads <= rowmath::kMaxGatHeads && config.output_heads <= rowmath::kMaxGatHeads,
             "GAT supports at most {} heads per layer, got {} (output layer {})", rowmath::kMaxGatHeads, config.heads,
             config.output_heads);
  NJ_REQUIRE(in_dim >= 1 && num_classes >= 1, "model needs input width and classes, got {} and {}", in_dim,
             num_classes);
  NJ_REQUIRE(config.propagation_steps >= 1, "APPNP needs at least one propagation step, got {}",
             config.propagation_steps);
  NJ_REQUIRE(config.teleport >= 0.0F && config.teleport <= 1.0F, "APPNP's teleport must be in [0, 1], got {}",
             config.teleport);
  std::int64_t width = in_dim;
  const auto next_index = [this] { return static_cast<std::uint32_t>(layers_.size()); };
  const auto layers = static_cast<std::size_t>(config.layers);
  num_model_layers_ = layers + (config.kind == ModelKind::kAppnp ? 1 : 0);
  for (std::size_t l = 0; l < layers; ++l) {
    const bool last = l + 1 == layers;
    const std::int64_t out = last ? num_classes : config.hidden;
    // Between layers the model's activation; after the last none, or APPNP's propagation.
    const Activation between = last ? Activation::kNone : config.activation;
    switch (config.kind) {
      case ModelKind::kGcn:
        add_layer(std::make_unique<GcnLayer>(width, out, config.seed, next_index()), config.dropout, between, l);
        break;
      case ModelKind::kGat: {
        GatShape shape;
        shape.heads = last ? config.output_heads : config.heads;
        shape.channels = static_cast<int>(out);
        shape.concat = !last;
        shape.attention_dropout = config.attention_dropout;
        add_layer(std::make_unique<GatLayer>(width, shape, config.seed, next_index()), config.dropout, between, l);
        break;
      }
      case ModelKind::kSage:
        add_layer(std::make_unique<SageLayer>(width, out, config.seed, next_index()), config.dropout, between, l);
        break;
      case ModelKind::kGin:
        // The MLP's first Linear rides in the GIN layer's transform (it commutes with the sum), its second follows.
        add_layer(std::make_unique<GinLayer>(width, config.hidden, config.gin_eps, config.gin_train_eps, config.seed,
                                             next_index()),
                  config.dropout, Activation::kRelu, l);
        add_layer(std::make_unique<DenseLayer>(config.hidden, out, config.seed, next_index()), 0.0F, between, l,
                  "linear2");
        break;
      case ModelKind::kAppnp:
        add_layer(std::make_unique<DenseLayer>(width, out, config.seed, next_index()), config.dropout, between, l);
        break;
      case ModelKind::kCustom: break;  // refused above
    }
    width = layers_.back()->out_dim();
  }
  if (config.kind == ModelKind::kAppnp) {
    for (int k = 0; k < config.propagation_steps; ++k) {
      add_layer(
          std::make_unique<PropagationLayer>(num_classes, config.teleport, k == 0, k + 1 == config.propagation_steps),
          0.0F, Activation::kNone, layers);
    }
  }
  check_layers();
}

Model::Model(std::vector<ModelLayer> layers, GraphForm form, std::uint64_t seed) : graph_form_(form) {
  NJ_REQUIRE(!layers.empty(), "a model needs at least one layer");
  config_.kind = ModelKind::kCustom;
  config_.layers = static_cast<int>(layers.size());
  config_.seed = seed;
  num_model_layers_ = layers.size();
  for (ModelLayer& l : layers) {
    NJ_REQUIRE(l.layer != nullptr, "layer {} of the model is missing", layers_.size() + 1);
    NJ_REQUIRE(l.dropout >= 0.0F && l.dropout < 1.0F, "dropout must be in [0, 1), got {}", l.dropout);
    add_layer(std::move(l.layer), l.dropout, l.activation, layers_.size());
  }
  check_layers();
}

void Model::check_layers() const {
  const bool weighted = graph_form_ == GraphForm::kGcnNormalised || graph_form_ == GraphForm::kMeanOverInEdges;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = *layers_[l];
    NJ_REQUIRE(l == 0 || layer.in_dim() == layers_[l - 1]->out_dim(),
               "layer {} reads rows of width {}, but layer {} writes {}", l + 1, layer.in_dim(), l,
               layers_[l - 1]->out_dim());
    // The planner sizes blocks by what each layer declares; the blocks are cut from the prepared graph.
    NJ_REQUIRE(!layer.aggregation().reads_neighbours || layer.aggregation().structural_coefficients == weighted,
               "layer {} declares {}structural coefficients, but the model's graph is {}", l + 1,
               layer.aggregation().structural_coefficients ? "" : "no ", weighted ? "weighted" : "unweighted");
  }
}

void Model::add_layer(std::unique_ptr<Layer> layer, float dropout, Activation activation, std::size_t model_layer,
                      const std::string& part) {
  const std::string prefix = model_layer_name(model_layer) + "." + (part.empty() ? "" : part + ".");
  for (Parameter* p : layer->parameters()) p->name = prefix + p->name;
  layers_.push_back(std::move(layer));
  dropout_before_.push_back(dropout);
  activation_after_.push_back(activation);
  model_layer_of_.push_back(model_layer);
}

std::size_t Model::output_of_model_layer(std::size_t m) const {
  NJ_EXPECTS(m < num_model_layers_, "model layer {} of {}", m, num_model_layers_);
  return static_cast<std::size_t>(std::upper_bound(model_layer_of_.begin(), model_layer_of_.end(), m) -
                                  model_layer_of_.begin()) -
         1;
}

std::string Model::model_layer_name(std::size_t m) const {
  return fmt::format("layer{:0{}}", m + 1, std::to_string(num_model_layers_).size());
}

std::string Model::layer_label(std::size_t l) const {
  const std::size_t m = model_layer_of_.at(l);
  const auto first = std::lower_bound(model_layer_of_.begin(), model_layer_of_.end(), m);
  const auto end = std::upper_bound(first, model_layer_of_.end(), m);
  if (end - first == 1) return std::to_string(m + 1);
  return fmt::format("{}.{}", m + 1, l - static_cast<std::size_t>(first - model_layer_of_.begin()) + 1);
}

std::vector<Parameter*> Model::parameters() {
  std::vector<Parameter*> all;
  for (auto& layer : layers_) {
    for (Parameter* p : layer->parameters()) all.push_back(p);
  }
  return all;
}

std::int64_t Model::num_parameters() const {
  std::int64_t total = 0;
  for (const auto& layer : layers_) {
    for (const Parameter* p : layer->parameters()) total += p->value.size();
  }
  return total;
}

std::int64_t Model::host_bytes() const {
  std::int64_t floats = 0;
  for (const auto& layer : layers_) {
    const Matrix& weight = layer->effective_weight();
    bool weight_is_a_parameter = false;
    for (const Parameter* p : layer->parameters()) {
      floats += p->value.size() + p->grad.size();
      weight_is_a_parameter = weight_is_a_parameter || &p->value == &weight;
    }
    if (!weight_is_a_parameter) floats += weight.size() + layer->effective_weight_grad().size();
  }
  return floats * std::int64_t{sizeof(float)};
}

PreparedGraph Model::prepare(const LocalGraph& local) const {
  PreparedGraph prepared;
  switch (graph_form_) {
    case GraphForm::kGcnNormalised: {
      prepared.graph = with_self_loops(local.graph, false, local.num_owned);
      // A vertex's degree after GCN's self-loop rule, in the whole graph: mirrors' in-edges live on other ranks.
      std::vector<std::int64_t> degree(local.global_in_degree.size());
      for (std::size_t v = 0; v < degree.size(); ++v) {
        degree[v] = local.global_in_degree[v] + (local.global_self_loop[v] != 0 ? 0 : 1);
      }
      prepared.vertex_factor = gcn_vertex_factors(degree);
      break;
    }
    case GraphForm::kOneSelfLoopEach: prepared.graph = with_self_loops(local.graph, true, local.num_owned); break;
    case GraphForm::kMeanOverInEdges:
      prepared.graph = local.graph;
      // The mean over the in-edges as stored; a vertex without any aggregates nothing (PyG's scatter mean gives 0).
      prepared.vertex_factor.resize(local.global_in_degree.size());
      for (std::size_t v = 0; v < prepared.vertex_factor.size(); ++v) {
        const std::int64_t degree = local.global_in_degree[v];
        prepared.vertex_factor[v] = degree > 0 ? static_cast<float>(1.0 / static_cast<double>(degree)) : 0.0F;
      }
      prepared.factor_of = FactorOf::kTarget;
      break;
    case GraphForm::kAsStored: prepared.graph = local.graph; break;
  }
  return prepared;
}

}  // namespace nj
