#pragma once
// The layer types, each with PyG's semantics: GCNConv (with gcn_norm), GATConv, SAGEConv (mean), GINConv's
// aggregation, a dense (Linear) layer, and APPNP's propagation step.
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
    return {.linear = true,
            .structural_coefficients = true,
            .backward_reads_rows = false,
            .spmm = true,
            .reads_source_ids = false};
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

// Two weights a transform multiplies by in one GEMM, side by side: out = [left | right] (every matrix with the same
// rows); and the gradient of that back, left += joined[:, :left.cols], right += the rest, joined zeroed.
void join_columns(const Matrix& left, const Matrix& right, Matrix& out);
void split_columns_into(Matrix& joined, Matrix& left, Matrix& right);
// The rooted sum of rows in that layout, each half `width` wide: the neighbours' left halves, Σ_{j→i} Z_j[:width],
// plus the destination's own right half, Z_i[width:].
RootedSum joined_halves_sum(std::int64_t width);

// A layer whose aggregation is a RootedSum of its transformed rows (row_math.hpp), as the subclass states it; a
// sum's backward keeps nothing but ∂L/∂Y. A linear one (both terms read the rows whole, from column 0, and carry
// nothing) sums rows of whatever width it is given: a first layer's inputs, where it sums them first.
class RootedSumLayer : public Layer {
 public:
  void aggregate(Backend& backend, const SparseBlockView& block, const RandomStream& attention, bool training,
                 ConstDeviceRows z, DeviceRows y) const override;
  std::int64_t aggregate_backward_workspace(vid_t /*num_dst*/, eid_t /*num_edges*/) const override { return 0; }
  void aggregate_backward(Backend& backend, const SparseBlockView& block, const RandomStream& attention, bool training,
                          ConstDeviceRows z, ConstDeviceRows grad_y, DeviceRows grad_z, bool accumulate,
                          DeviceSpan<float> workspace) const override;
  virtual RootedSum sum() const = 0;

 private:
  // sum(), over rows `width` wide.
  RootedSum sum_of_rows(std::int64_t width) const;
};

// PyG SAGEConv with mean aggregation: H' = mean_{j→i} X_j · W + X_i · W_root + b. One GEMM computes both halves,
// Z = X · [W | W_root]; the block's edges carry 1/deg(i). As a first layer it may sum its inputs first instead, as
// DGL's SAGEConv does for inputs no wider than its output: the sums [mean_{j→i} X_j | X_i] times [W ; W_root].
class SageLayer final : public RootedSumLayer {
 public:
  SageLayer(std::int64_t in_dim, std::int64_t out_dim, std::uint64_t seed, std::uint32_t layer_index);
  std::int64_t row_width() const override { return 2 * out_dim(); }
  std::int64_t out_dim() const override { return weight_.value.cols(); }
  AggregationTraits aggregation() const override {
    return {.linear = false, .structural_coefficients = true, .backward_reads_rows = false, .reads_source_ids = false};
  }
  std::vector<Parameter*> parameters() override { return {&weight_, &root_weight_, &bias_}; }
  RootedSum sum() const override;
  void prepare() override;
  void finish_backward() override;
  const Matrix& effective_weight() const override { return joined_; }
  Matrix& effective_weight_grad() override { return joined_grad_; }
  // Its sums-first order pays where one sum of in_dim-wide rows costs less than the neighbours' half, out_dim
  // wide, summed forward and backward.
  bool sums_inputs_first_pays() const override { return in_dim() < 2 * out_dim(); }
  std::int64_t input_sums_width() const override { return 2 * in_dim(); }
  void sum_inputs(Backend& backend, const SparseBlockView& block, ConstDeviceRows x, DeviceRows sums) const override;
  const Matrix& input_sums_weight() const override { return stacked_; }
  Matrix& input_sums_weight_grad() override { return stacked_grad_; }

 private:
  Parameter weight_;       // in_dim × out_dim, for the neighbours' mean (PyG's lin_l)
  Parameter root_weight_;  // in_dim × out_dim, for the vertex's own row (PyG's lin_r)
  Matrix joined_;          // [weight | root_weight]
  Matrix joined_grad_;
  Matrix stacked_;  // [weight ; root_weight], what the sums-first order multiplies by
  Matrix stacked_grad_;
};

// A rooted-sum layer whose transform multiplies by one weight, W_eff = W (in_dim × out_dim), plus a bias: the rows
// it sums are out_dim wide.
class SingleWeightSumLayer : public RootedSumLayer {
 public:
  std::int64_t row_width() const override { return weight_.value.cols(); }
  std::int64_t out_dim() const override { return weight_.value.cols(); }
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  const Matrix& effective_weight() const override { return weight_.value; }
  Matrix& effective_weight_grad() override { return weight_.grad; }

 protected:
  SingleWeightSumLayer(std::int64_t in_dim, std::int64_t out_dim, std::uint64_t seed, std::uint32_t layer_index);
  Parameter& weight() { return weight_; }
  const Parameter& weight() const { return weight_; }

 private:
  Parameter weight_;
};

// PyG GINConv's aggregation, Σ_{j→i} X_j + (1+ε)·X_i, with the first Linear of its MLP: the sum commutes with it,
// so the layer transforms first and sums rows of the (narrower) hidden width, Z = X · W, H' = act(sum(Z) + b).
// The rest of the MLP is a DenseLayer after it. A learnable ε (PyG's train_eps) rides in the transform, as GAT's
// attention vectors do: Z = X · [W | (1+ε)·W], the neighbours' sum reads the left half and the root term the right,
// and ∂ε = Σ W ∘ ∂(right half). That doubles the rows' width; a fixed ε scales the root term in the sum instead,
// and the sum is then linear: a first layer may sum its inputs before it transforms them, as GCN's does.
class GinLayer final : public SingleWeightSumLayer {
 public:
  GinLayer(std::int64_t in_dim, std::int64_t out_dim, float eps, bool train_eps, std::uint64_t seed,
           std::uint32_t layer_index);
  std::int64_t row_width() const override { return train_eps_ ? 2 * out_dim() : out_dim(); }
  AggregationTraits aggregation() const override {
    return {.linear = !train_eps_,
            .structural_coefficients = false,
            .backward_reads_rows = false,
            .reads_source_ids = false};
  }
  std::vector<Parameter*> parameters() override;
  RootedSum sum() const override;
  void prepare() override;
  void finish_backward() override;
  const Matrix& effective_weight() const override;
  Matrix& effective_weight_grad() override;

 private:
  float eps() const { return eps_.value(0, 0); }

  Parameter eps_;  // 1 × 1; a parameter only where trained
  bool train_eps_;
  Matrix joined_;  // [W | (1+ε)·W], where ε is trained
  Matrix joined_grad_;
};

// A Linear layer, H' = act(X · W + b): it reads no edge (its aggregation passes each vertex's own row through). The
// MLPs of GIN and APPNP are made of it.
class DenseLayer final : public SingleWeightSumLayer {
 public:
  DenseLayer(std::int64_t in_dim, std::int64_t out_dim, std::uint64_t seed, std::uint32_t layer_index)
      : SingleWeightSumLayer(in_dim, out_dim, seed, layer_index) {}
  AggregationTraits aggregation() const override {
    return {.linear = false,
            .structural_coefficients = false,
            .backward_reads_rows = false,
            .reads_neighbours = false,
            .reads_source_ids = false};
  }
  RootedSum sum() const override;
};

// One of APPNP's K propagation steps, h^{k+1} = (1-α)·Â·h^k + α·h⁰, with GCN's Â. It has no parameters. Every step
// but the last passes h⁰ on to the next beside h^{k+1}: its rows are [h^k | h⁰], so that the executors keep, move
// and exchange h⁰ as they do any row. The first step makes [h⁰ | h⁰] of its input h⁰; the last returns h^K alone.
class PropagationLayer final : public RootedSumLayer {
 public:
  PropagationLayer(std::int64_t width, float alpha, bool first, bool last);
  std::int64_t row_width() const override { return 2 * width_; }
  std::int64_t out_dim() const override { return last_ ? width_ : 2 * width_; }
  std::int64_t embedding_width() const override { return width_; }
  AggregationTraits aggregation() const override {
    return {.linear = false, .structural_coefficients = true, .backward_reads_rows = false, .reads_source_ids = false};
  }
  std::vector<Parameter*> parameters() override { return {}; }
  RootedSum sum() const override;
  // The transform's constant matrix gets a gradient as any weight does: it is no parameter, so it is dropped.
  void finish_backward() override;
  const Matrix& effective_weight() const override { return copy_; }
  Matrix& effective_weight_grad() override { return copy_grad_; }

 private:
  std::int64_t width_;
  float alpha_;
  bool last_;
  Matrix copy_;  // [I | I] for the first step, I for the others
  Matrix copy_grad_;
};

}  // namespace nj
