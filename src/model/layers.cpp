#include "nj/model/layers.hpp"

#include <cmath>

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

Parameter make_parameter(std::string name, std::int64_t rows, std::int64_t cols, bool decay = true) {
  return Parameter{std::move(name), Matrix(rows, cols), Matrix(rows, cols), decay};
}

}  // namespace

GcnLayer::GcnLayer(std::int64_t in_dim, std::int64_t out_dim, std::uint64_t seed, std::uint32_t layer_index)
    : weight_(make_parameter("layer" + std::to_string(layer_index) + ".weight", in_dim, out_dim)) {
  bias_ = make_parameter("layer" + std::to_string(layer_index) + ".bias", 1, out_dim);
  glorot_uniform(weight_.value, in_dim, out_dim, seed, layer_index, 0);
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
      weight_(make_parameter("layer" + std::to_string(layer_index) + ".weight", in_dim, shape.features())),
      att_src_(make_parameter("layer" + std::to_string(layer_index) + ".att_src", shape.heads, shape.channels)),
      att_dst_(make_parameter("layer" + std::to_string(layer_index) + ".att_dst", shape.heads, shape.channels)),
      augmented_(in_dim, shape.row_width()),
      augmented_grad_(in_dim, shape.row_width()) {
  bias_ = make_parameter("layer" + std::to_string(layer_index) + ".bias", 1, shape.output_width());
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

}  // namespace nj
