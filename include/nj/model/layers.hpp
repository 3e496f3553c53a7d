#pragma once
// The layer types: GCN (PyG GCNConv with gcn_norm) and GAT (PyG GATConv).
#include <cstdint>
#include <memory>

#include "nj/model/layer.hpp"

namespace nj {

// Glorot (Xavier) uniform in ±sqrt(6 / (fan_in + fan_out)), deterministic by (seed, layer, which).
void glorot_uniform(Matrix& m, std::int64_t fan_in, std::int64_t fan_out, std::uint64_t seed, std::uint32_t layer,
                    std::uint32_t which);

// H' = Â · X · W + b, Â = D^-1/2 (A + I) D^-1/2 with the degree at the target; the block carries Â's weights.
class GcnLayer final : public Layer {
 public:
  GcnLayer(std::int64_t in_dim, std::int64_t out_dim, std::uint64_t seed, std::uint32_t layer_index);
  std::int64_t row_width() const override { return weight_.value.cols(); }
  std::int64_t out_dim() const override { return weight_.value.cols(); }
  AggregationTraits aggregation() const override {
    return {.linear = true, .structural_coefficients = true, .backward_reads_rows = false};
  }
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  void aggregate(Backend& backend, const SparseBlockView& block, const RandomStream& attention, bool training,
                 ConstDeviceRows z, DeviceRows y) const override;
  // SpMM's transpose keeps nothing.
  std::int64_t aggregate_backward_workspace(vid_t /*num_dst*/, eid_t /*num_edges*/) const override { return 0; }
  void aggregate_backward(Backend& backend, const SparseBlockView& block, const RandomStream& attention, bool training,
                          ConstDeviceRows z, ConstDeviceRows grad_y, DeviceRows grad_z, bool accumulate,
                          DeviceSpan<float> workspace) const override;

  const Matrix& effective_weight() const override { return weight_.value; }
  Matrix& effective_weight_grad() override { return weight_.grad; }

 protected:
  const Parameter& weight() const override { return weight_; }

 private:
  Parameter weight_;
};

// x' = X·Θ as [heads, channels]; e_ji = LeakyReLU(<x'_j, a_src> + <x'_i, a_dst>, 0.2); α = softmax over i's
// in-edges (one self-loop each), dropped out in training; heads concatenated or averaged; plus bias.
// The scores come out of the transform GEMM: W_eff = [Θ | Θ_h·a_src_h | Θ_h·a_dst_h].
class GatLayer final : public Layer {
 public:
  GatLayer(std::int64_t in_dim, const GatShape& shape, std::uint64_t seed, std::uint32_t layer_index);
  std::int64_t row_width() const override { return shape_.row_width(); }
  std::int64_t out_dim() const override { return shape_.output_width(); }
  std::vector<Parameter*> parameters() override { return {&weight_, &att_src_, &att_dst_, &bias_}; }
  AggregationTraits aggregation() const override {
    return {.linear = false, .structural_coefficients = false, .backward_reads_rows = true};
  }
  const GatShape& shape() const { return shape_; }
  void prepare() override;
  void aggregate(Backend& backend, const SparseBlockView& block, const RandomStream& attention, bool training,
                 ConstDeviceRows z, DeviceRows y) const override;
  std::int64_t aggregate_backward_workspace(vid_t num_dst, eid_t num_edges) const override;
  void aggregate_backward(Backend& backend, const SparseBlockView& block, const RandomStream& attention, bool training,
                          ConstDeviceRows z, ConstDeviceRows grad_y, DeviceRows grad_z, bool accumulate,
                          DeviceSpan<float> workspace) const override;
  void finish_backward() override;
  const Matrix& effective_weight() const override { return augmented_; }
  Matrix& effective_weight_grad() override { return augmented_grad_; }

 protected:
  const Parameter& weight() const override { return weight_; }

 private:
  // The shape with attention dropout switched off outside training.
  GatShape effective_shape(bool training) const;

  GatShape shape_;
  Parameter weight_;   // in_dim × heads·channels
  Parameter att_src_;  // heads × channels
  Parameter att_dst_;  // heads × channels
  Matrix augmented_;
  Matrix augmented_grad_;
};

}  // namespace nj
