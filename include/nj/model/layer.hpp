#pragma once
// A GNN layer split into the two kinds of work an executor schedules:
//   transform  (vertex-wise, any chunk of rows):  Z = X · W_eff
//   aggregate  (per sparse block of destinations): Y = Σ_in-edges coefficient · Z_src, plus whatever the layer
//              takes of the destination's own row Z_dst (a root or self term)   (bias and activation are applied
//              by the executor: H' = act(Y + b))
// and their backward passes. Weights only change between epochs, so every row of Z is computed once per
// epoch and may be read by any number of blocks: that is what makes embedding reuse exact.
#include <memory>
#include <string>
#include <vector>

#include "nj/core/matrix.hpp"
#include "nj/kernels/backend.hpp"

namespace nj {

// What a layer's aggregation is, declared by the layer: the executors, the planner, the cache trace and the memory
// estimates follow it instead of asking which layer they run.
struct AggregationTraits {
  // Linear in the rows it reads, each read whole, and otherwise independent of them (a weighted sum whose
  // coefficients come from the graph, the vertex's own row among its terms or not): it commutes with the
  // transform, (ÂX)·W = Â·(X·W), so it may run on rows of any width.
  bool linear = false;
  // The block carries per-edge coefficients derived from the structure (GCN's normalisation); without them the
  // layer computes its own (attention).
  bool structural_coefficients = false;
  // Its backward reads the rows the forward read, not only ∂L/∂Y (attention's coefficients depend on them): those
  // rows stay until the layer's backward step, and that step gathers them beside their gradients.
  bool backward_reads_rows = false;
  // It reads its in-edges. A dense layer reads only each destination's own row: its blocks' edges, and the mirrors'
  // rows, go unread.
  bool reads_neighbours = true;
  // It runs as the backend's SpMM, which the CUDA backend may give to cuSPARSE, narrowing the block's offsets
  // into a buffer of their own (LibraryMemory).
  bool spmm = false;
  // It reads its block's global source ids (SparseBlockView::src_gid: what a random draw per edge, such as attention
  // dropout, is addressed by). A layer that does not leaves them out of the packed blocks a budgeted step moves (8
  // bytes a source).
  bool reads_source_ids = true;
};

struct Parameter {
  std::string name;
  Matrix value;
  Matrix grad;
  bool decay = true;  // subject to weight decay
};

class Layer {
 public:
  virtual ~Layer() = default;
  std::int64_t in_dim() const { return effective_weight().rows(); }
  // Width of the transformed rows Z (what an aggregation reads per source vertex).
  virtual std::int64_t row_width() const = 0;
  // Width of the aggregated output Y.
  virtual std::int64_t out_dim() const = 0;
  // The columns of Y that are the layer's own embedding of a vertex, the first ones (nj infer writes them): all
  // but those a layer carries on for later layers (APPNP's h⁰).
  virtual std::int64_t embedding_width() const { return out_dim(); }
  virtual AggregationTraits aggregation() const = 0;
  virtual std::vector<Parameter*> parameters() = 0;
  const Parameter& bias() const { return bias_; }
  Parameter& bias() { return bias_; }

  // Called after the weights changed (once per epoch): derives what transform() multiplies by.
  virtual void prepare() {}
  // The transform and its backward read the layer's parameters on the device (device_parameters.hpp):
  // weight is effective_weight(), accumulated into weight_grad.
  static void transform(Backend& backend, ConstDeviceRows weight, ConstDeviceRows x, DeviceRows z);
  virtual void aggregate(Backend& backend, const SparseBlockView& block, const RandomStream& attention, bool training,
                         ConstDeviceRows z, DeviceRows y) const = 0;

  // Floats of device workspace aggregate_backward needs for a block of this size, on every backend alike.
  virtual std::int64_t aggregate_backward_workspace(vid_t num_dst, eid_t num_edges) const = 0;
  // grad_z (+)= ∂L/∂Z for every source row of the block: row block.gradient_row_of(j) of grad_z takes local source
  // j's, whose row of z is block.row_of(j) (the Backend's backward kernels write so).
  virtual void aggregate_backward(Backend& backend, const SparseBlockView& block, const RandomStream& attention,
                                  bool training, ConstDeviceRows z, ConstDeviceRows grad_y, DeviceRows grad_z,
                                  bool accumulate, DeviceSpan<float> workspace) const = 0;
  // Accumulates weight_grad += Xᵀ · grad_z and, where grad_x is non-empty, writes grad_x = grad_z · weightᵀ.
  static void transform_backward(Backend& backend, ConstDeviceRows weight, DeviceRows weight_grad, ConstDeviceRows x,
                                 ConstDeviceRows grad_z, DeviceRows grad_x);
  // The same over sparse input rows x, a block whose destinations are the rows and whose sources are the columns
  // (sparse_rows_block): Z = X·W as SpMM, and weight_grad += Xᵀ·grad_z as its transpose (such inputs, the
  // features, take no gradient).
  static void transform(Backend& backend, ConstDeviceRows weight, const SparseBlockView& x, DeviceRows z);
  static void transform_backward(Backend& backend, DeviceRows weight_grad, const SparseBlockView& x,
                                 ConstDeviceRows grad_z);
  // Called once the gradient of effective_weight() (or input_sums_weight()) is complete for a run of
  // transform_backward calls (an epoch, or one pass of it): turns it into the parameters' gradients and resets it,
  // so that runs sum.
  virtual void finish_backward() {}

  // The matrix transform() multiplies by (in_dim × row_width) and the gradient accumulated against it.
  virtual const Matrix& effective_weight() const = 0;
  virtual Matrix& effective_weight_grad() = 0;

  // The other order a first layer may run in, its input needing no gradient (aggregates_before_transform): it sums
  // its inputs, sum_inputs(X) (rows input_sums_width() wide), and multiplies the sums by input_sums_weight(), a
  // matrix of as many values as W_eff in a layout of its own. By default, for a linear aggregation, the
  // aggregation itself over the inputs and W_eff. sums_inputs_first_pays says whether the layer has that order
  // and it costs less: for a linear aggregation, one sum of in_dim-wide rows against the two (forward, and
  // backward for ∂L/∂Z) of row_width-wide ones.
  virtual bool sums_inputs_first_pays() const { return aggregation().linear && in_dim() < 2 * row_width(); }
  virtual std::int64_t input_sums_width() const { return in_dim(); }
  virtual void sum_inputs(Backend& backend, const SparseBlockView& block, ConstDeviceRows x, DeviceRows sums) const;
  virtual const Matrix& input_sums_weight() const { return effective_weight(); }
  virtual Matrix& input_sums_weight_grad() { return effective_weight_grad(); }

 protected:
  Parameter bias_;
};

}  // namespace nj
