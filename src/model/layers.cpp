#include "nj/model/layers.hpp"

#include <algorithm>
#include <cmath>

#include "nj/core/error.hpp"
#include "nj/core/philox.hpp"
#include "nj/kernels/row_math.hpp"

namespace nj {

void glorot_uniform(Matrix& m, std::int64_t fan_in, std::int64_t fan_out, std::uint64_t seed, std::uint32_t layer,
                    std::uint32_t which) {
  const auto bound = static_cast<float>(std::sqrt(6.0 / static_cast<double>(fan_in + fan_out)));
  const RandomStream stream{seed, RandomPurpose::kWeightInit, layer, which};
  for (std::int64_t r = 0; r < m.rows(); ++r) {
    for (std::int64_t c = 0; c < m.cols(); ++c) m(r, c) = bound * (2.0F * stream.vertex_uniform(r, c) - 1.0F);
  }
}

namespace {

// A parameter named by its role in the layer ("weight"): the model names the layer (Model::model_layer_name).
Parameter make_parameter(std::string role, std::int64_t rows, std::int64_t cols, bool decay = true) {
  return Parameter{std::move(role), Matrix(rows, cols), Matrix(rows, cols), decay};
}

// A weight of a layer, Glorot-initialised; `which` tells a layer's weights apart.
Parameter make_weight(std::int64_t in_dim, std::int64_t out_dim, std::uint64_t seed, std::uint32_t layer_index,
                      const char* role = "weight", std::uint32_t which = 0) {
  Parameter weight = make_parameter(role, in_dim, out_dim);
  glorot_uniform(weight.value, in_dim, out_dim, seed, layer_index, which);
  return weight;
}

}  // namespace

GcnLayer::GcnLayer(std::int64_t in_dim, std::int64_t out_dim, std::uint64_t seed, std::uint32_t layer_index)
    : weight_(make_weight(in_dim, out_dim, seed, layer_index)) {
  bias_ = make_parameter("bias", 1, out_dim);
}

void GcnLayer::aggregate(Backend& backend, const SparseBlockView& block, const RandomStream& /*attention*/,
                         bool /*training*/, ConstDeviceRows z, DeviceRows y) const {
  backend.spmm(block, z, y);
}

void GcnLayer::aggregate_backward(Backend& backend, const SparseBlockView& block, const RandomStream& /*attention*/,
                                  bool /*training*/, ConstDeviceRows /*z*/, ConstDeviceRows grad_y, DeviceRows grad_z,
                                  bool accumulate, DeviceSpan<float> /*workspace*/) const {
  backend.spmm_transpose(block, grad_y, grad_z, accumulate);
}

GatLayer::GatLayer(std::int64_t in_dim, const GatShape& shape, std::uint64_t seed, std::uint32_t layer_index)
    : shape_(shape),
      weight_(make_parameter("weight", in_dim, shape.features())),
      att_src_(make_parameter("att_src", shape.heads, shape.channels)),
      att_dst_(make_parameter("att_dst", shape.heads, shape.channels)),
      augmented_(in_dim, shape.row_width()),
      augmented_grad_(in_dim, shape.row_width()) {
  bias_ = make_parameter("bias", 1, shape.output_width());
  glorot_uniform(weight_.value, in_dim, shape.features(), seed, layer_index, 0);
  // PyG initialises att_src/att_dst of shape [1, heads, channels] with glorot over its last two dimensions.
  glorot_uniform(att_src_.value, shape.heads, shape.channels, seed, layer_index, 1);
  glorot_uniform(att_dst_.value, shape.heads, shape.channels, seed, layer_index, 2);
  prepare();
}

void GatLayer::prepare() {
  const Matrix& w = weight_.value;
  for (std::int64_t f = 0; f < w.rows(); ++f) {
    const float* w_row = w.row(f);
    float* out = augmented_.row(f);
    std::copy(w_row, w_row + shape_.features(), out);
    for (int h = 0; h < shape_.heads; ++h) {
      float src = 0.0F;
      float dst = 0.0F;
      for (int c = 0; c < shape_.channels; ++c) {
        const float x = w_row[static_cast<std::int64_t>(h) * shape_.channels + c];
        src += x * att_src_.value(h, c);
        dst += x * att_dst_.value(h, c);
      }
      out[shape_.src_score(h)] = src;
      out[shape_.dst_score(h)] = dst;
    }
  }
}

GatShape GatLayer::effective_shape(bool training) const {
  GatShape shape = shape_;
  if (!training) shape.attention_dropout = 0.0F;
  return shape;
}

void GatLayer::aggregate(Backend& backend, const SparseBlockView& block, const RandomStream& attention, bool training,
                         ConstDeviceRows z, DeviceRows y) const {
  backend.gat_forward(block, effective_shape(training), attention, z, y);
}

std::int64_t GatLayer::aggregate_backward_workspace(vid_t num_dst, eid_t num_edges) const {
  return rowmath::gat_backward_workspace_floats(num_dst, num_edges, shape_.heads);
}

void GatLayer::aggregate_backward(Backend& backend, const SparseBlockView& block, const RandomStream& attention,
                                  bool training, ConstDeviceRows z, ConstDeviceRows grad_y, DeviceRows grad_z,
                                  bool accumulate, DeviceSpan<float> workspace) const {
  backend.gat_backward(block, effective_shape(training), attention, z, grad_y, grad_z, accumulate, workspace);
}

void GatLayer::finish_backward() {
  // W_eff[:, hC+c] = Θ[:, hC+c];  W_eff[:, src(h)] = Σ_c Θ[:, hC+c] a_src[h,c]  (and likewise for dst), so
  // ∂Θ[:, hC+c] = G[:, hC+c] + G[:, src(h)] a_src[h,c] + G[:, dst(h)] a_dst[h,c];  ∂a_src[h,c] = Σ_f Θ[f,hC+c]
  // G[f,src(h)].
  const Matrix& w = weight_.value;
  for (std::int64_t f = 0; f < w.rows(); ++f) {
    const float* g = augmented_grad_.row(f);
    for (int h = 0; h < shape_.heads; ++h) {
      const float g_src = g[shape_.src_score(h)];
      const float g_dst = g[shape_.dst_score(h)];
      for (int c = 0; c < shape_.channels; ++c) {
        const std::int64_t col = static_cast<std::int64_t>(h) * shape_.channels + c;
        weight_.grad(f, col) += g[col] + g_src * att_src_.value(h, c) + g_dst * att_dst_.value(h, c);
        att_src_.grad(h, c) += w(f, col) * g_src;
        att_dst_.grad(h, c) += w(f, col) * g_dst;
      }
    }
  }
  augmented_grad_.fill(0.0F);
}

RootedSum RootedSumLayer::sum_of_rows(std::int64_t width) const {
  RootedSum s = sum();
  if (!aggregation().linear) return s;
  NJ_EXPECTS(s.neighbour_column == 0 && s.root_column == 0 && s.carried == 0,
             "a linear rooted sum reads its rows whole and carries nothing");
  s.width = width;
  return s;
}

void RootedSumLayer::aggregate(Backend& backend, const SparseBlockView& block, const RandomStream& /*attention*/,
                               bool /*training*/, ConstDeviceRows z, DeviceRows y) const {
  backend.rooted_sum(block, sum_of_rows(y.cols), z, y);
}

void RootedSumLayer::aggregate_backward(Backend& backend, const SparseBlockView& block,
                                        const RandomStream& /*attention*/, bool /*training*/, ConstDeviceRows /*z*/,
                                        ConstDeviceRows grad_y, DeviceRows grad_z, bool accumulate,
                                        DeviceSpan<float> /*workspace*/) const {
  backend.rooted_sum_transpose(block, sum_of_rows(grad_y.cols), grad_y, grad_z, accumulate);
}

SageLayer::SageLayer(std::int64_t in_dim, std::int64_t out_dim, std::uint64_t seed, std::uint32_t layer_index)
    : weight_(make_weight(in_dim, out_dim, seed, layer_index)),
      root_weight_(make_weight(in_dim, out_dim, seed, layer_index, "root_weight", 1)),
      joined_(in_dim, 2 * out_dim),
      joined_grad_(in_dim, 2 * out_dim),
      stacked_(2 * in_dim, out_dim),
      stacked_grad_(2 * in_dim, out_dim) {
  bias_ = make_parameter("bias", 1, out_dim);
  prepare();
}

RootedSum SageLayer::sum() const { return joined_halves_sum(out_dim()); }

void SageLayer::sum_inputs(Backend& backend, const SparseBlockView& block, ConstDeviceRows x, DeviceRows sums) const {
  // [mean_{j→i} X_j | X_i]: the neighbours' mean, and the vertex's own row carried beside it.
  backend.rooted_sum(block, {.width = in_dim(), .root_scale = 0.0F, .carried = in_dim(), .carried_column = 0}, x, sums);
}

void SageLayer::prepare() {
  join_columns(weight_.value, root_weight_.value, joined_);
  const auto half = weight_.value.span();
  std::copy(half.begin(), half.end(), stacked_.data());
  std::copy(root_weight_.value.span().begin(), root_weight_.value.span().end(), stacked_.data() + half.size());
}

void SageLayer::finish_backward() {
  split_columns_into(joined_grad_, weight_.grad, root_weight_.grad);
  // [∂W ; ∂W_root], where the layer summed its inputs first.
  const std::int64_t half = weight_.grad.size();
  for (std::int64_t i = 0; i < half; ++i) {
    weight_.grad.data()[i] += stacked_grad_.data()[i];
    root_weight_.grad.data()[i] += stacked_grad_.data()[half + i];
  }
  stacked_grad_.fill(0.0F);
}

void join_columns(const Matrix& left, const Matrix& right, Matrix& out) {
  NJ_EXPECTS(left.rows() == out.rows() && right.rows() == out.rows() && left.cols() + right.cols() == out.cols(),
             "joining {}x{} and {}x{} into {}x{}", left.rows(), left.cols(), right.rows(), right.cols(), out.rows(),
             out.cols());
  for (std::int64_t r = 0; r < out.rows(); ++r) {
    std::copy(left.row(r), left.row(r) + left.cols(), out.row(r));
    std::copy(right.row(r), right.row(r) + right.cols(), out.row(r) + left.cols());
  }
}

void split_columns_into(Matrix& joined, Matrix& left, Matrix& right) {
  NJ_EXPECTS(
      left.rows() == joined.rows() && right.rows() == joined.rows() && left.cols() + right.cols() == joined.cols(),
      "splitting {}x{} into {}x{} and {}x{}", joined.rows(), joined.cols(), left.rows(), left.cols(), right.rows(),
      right.cols());
  for (std::int64_t r = 0; r < joined.rows(); ++r) {
    const float* g = joined.row(r);
    for (std::int64_t c = 0; c < left.cols(); ++c) left(r, c) += g[c];
    for (std::int64_t c = 0; c < right.cols(); ++c) right(r, c) += g[left.cols() + c];
  }
  joined.fill(0.0F);
}

RootedSum joined_halves_sum(std::int64_t width) {
  return {.width = width, .neighbour_column = 0, .neighbour_scale = 1.0F, .root_column = width, .root_scale = 1.0F};
}

SingleWeightSumLayer::SingleWeightSumLayer(std::int64_t in_dim, std::int64_t out_dim, std::uint64_t seed,
                                           std::uint32_t layer_index)
    : weight_(make_weight(in_dim, out_dim, seed, layer_index)) {
  bias_ = make_parameter("bias", 1, out_dim);
}

GinLayer::GinLayer(std::int64_t in_dim, std::int64_t out_dim, float eps, bool train_eps, std::uint64_t seed,
                   std::uint32_t layer_index)
    : SingleWeightSumLayer(in_dim, out_dim, seed, layer_index),
      eps_(make_parameter("eps", 1, 1)),
      train_eps_(train_eps),
      joined_(train_eps ? in_dim : 0, 2 * out_dim),
      joined_grad_(joined_.rows(), joined_.cols()) {
  // Its weight and bias are those of the MLP's first Linear; ε is the GIN layer's own.
  weight().name = "linear1.weight";
  bias().name = "linear1.bias";
  eps_.value(0, 0) = eps;
  prepare();
}

std::vector<Parameter*> GinLayer::parameters() {
  if (!train_eps_) return SingleWeightSumLayer::parameters();
  return {&weight(), &eps_, &bias()};
}

RootedSum GinLayer::sum() const {
  if (train_eps_) return joined_halves_sum(out_dim());
  return {
      .width = out_dim(), .neighbour_column = 0, .neighbour_scale = 1.0F, .root_column = 0, .root_scale = 1.0F + eps()};
}

void GinLayer::prepare() {
  if (!train_eps_) return;
  const Matrix& w = weight().value;
  const float self = 1.0F + eps();
  for (std::int64_t r = 0; r < w.rows(); ++r) {
    for (std::int64_t c = 0; c < w.cols(); ++c) {
      joined_(r, c) = w(r, c);
      joined_(r, w.cols() + c) = self * w(r, c);
    }
  }
}

void GinLayer::finish_backward() {
  if (!train_eps_) return;
  // W_eff = [W | (1+ε)W]:  ∂W = G_left + (1+ε)·G_right,  ∂ε = Σ W ∘ G_right.
  Parameter& w = weight();
  const float self = 1.0F + eps();
  double eps_grad = 0.0;
  for (std::int64_t r = 0; r < w.value.rows(); ++r) {
    const float* g = joined_grad_.row(r);
    for (std::int64_t c = 0; c < w.value.cols(); ++c) {
      const float g_root = g[w.value.cols() + c];
      w.grad(r, c) += g[c] + self * g_root;
      eps_grad += static_cast<double>(w.value(r, c)) * g_root;
    }
  }
  eps_.grad(0, 0) += static_cast<float>(eps_grad);
  joined_grad_.fill(0.0F);
}

const Matrix& GinLayer::effective_weight() const {
  return train_eps_ ? joined_ : SingleWeightSumLayer::effective_weight();
}

Matrix& GinLayer::effective_weight_grad() {
  return train_eps_ ? joined_grad_ : SingleWeightSumLayer::effective_weight_grad();
}

RootedSum DenseLayer::sum() const {
  return {.width = out_dim(), .reads_neighbours = false, .root_column = 0, .root_scale = 1.0F};
}

PropagationLayer::PropagationLayer(std::int64_t width, float alpha, bool first, bool last)
    : width_(width),
      alpha_(alpha),
      last_(last),
      copy_(first ? width : 2 * width, 2 * width),
      copy_grad_(copy_.rows(), copy_.cols()) {
  copy_.fill(0.0F);
  for (std::int64_t r = 0; r < copy_.rows(); ++r) {
    copy_(r, r) = 1.0F;
    if (first) copy_(r, width + r) = 1.0F;
  }
  bias_ = Parameter{"", Matrix(1, out_dim()), Matrix(1, out_dim()), false};
  bias_.value.fill(0.0F);
  bias_.grad.fill(0.0F);
}

RootedSum PropagationLayer::sum() const {
  return {.width = width_,
          .neighbour_column = 0,
          .neighbour_scale = 1.0F - alpha_,
          .root_column = width_,
          .root_scale = alpha_,
          .carried = last_ ? 0 : width_,
          .carried_column = width_};
}

void PropagationLayer::finish_backward() {
  copy_grad_.fill(0.0F);
  bias_.grad.fill(0.0F);
}

}  // namespace nj
