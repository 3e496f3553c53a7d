#include "nj/kernels/backend.hpp"

#include <climits>

#include "nj/core/error.hpp"

namespace nj {

GemmShape gemm_shape(bool transpose_a, bool transpose_b, ConstDeviceRows a, ConstDeviceRows b, ConstDeviceRows c) {
  const std::int64_t m = transpose_a ? a.cols : a.rows;
  const std::int64_t k = transpose_a ? a.rows : a.cols;
  const std::int64_t n = transpose_b ? b.rows : b.cols;
  const std::int64_t b_rows = transpose_b ? b.cols : b.rows;
  NJ_EXPECTS(b_rows == k && c.rows == m && c.cols == n, "gemm shapes: op(A) {}x{}, op(B) {}x{}, C {}x{}", m, k, b_rows,
             n, c.rows, c.cols);
  return {m, n, k};
}

void expect_spmm_shapes(const SparseBlockView& block, ConstDeviceRows sources, ConstDeviceRows destinations) {
  NJ_EXPECTS(sources.cols == destinations.cols && destinations.rows == block.num_dst && reaches_sources(block, sources),
             "spmm shapes: sources {}x{}, destinations {}x{}, block {}->{}", sources.rows, sources.cols,
             destinations.rows, destinations.cols, block.num_src, block.num_dst);
}

void expect_dropout_entries_shapes(const SparseBlockView& x, DeviceSpan<const gid_t> row_gid, DeviceSpan<float> weights,
                                   DeviceSpan<float> out_weights) {
  const auto fits = [&](DeviceSpan<float> w) { return w.empty() || w.size == x.num_edges(); };
  NJ_EXPECTS(x.edge_weight != nullptr && x.out_weight != nullptr && row_gid.size >= x.num_dst && fits(weights) &&
                 fits(out_weights),
             "dropout_entries shapes: {} rows of {} entries, {} ids, weights {} and {}", x.num_dst, x.num_edges(),
             row_gid.size, weights.size, out_weights.size);
}

void expect_expand_shapes(const PackedBlockView& block, const ExpandedArrays& out, DeviceSpan<eid_t> cursor) {
  const bool out_edges = out.src_offsets != nullptr;
  const bool weighted = block.weights != PackedWeights::kNone;
  NJ_EXPECTS((out.out_dst != nullptr) == out_edges && (out.out_edge != nullptr) == out_edges &&
                 (out.out_weight != nullptr) == (out_edges && weighted) &&
                 (block.narrow_sources != nullptr) != (block.sources != nullptr) &&
                 (out.src_index != nullptr) == (block.narrow_sources != nullptr) &&
                 (out.edge_weight == nullptr || weighted) && (!out_edges || cursor.size >= block.num_src),
             "expand_block shapes: {} sources, {} edges, out-edges {}, a cursor of {}", block.num_src, block.edges,
             out_edges, cursor.size);
}

void expect_rooted_sum_shapes(const SparseBlockView& block, const RootedSum& sum, ConstDeviceRows z,
                              ConstDeviceRows out) {
  NJ_EXPECTS(sum.width >= 1 && sum.carried >= 0 && sum.neighbour_column >= 0 && sum.root_column >= 0 &&
                 sum.carried_column >= 0 && sum.columns_read() <= z.cols && out.cols == sum.output_width() &&
                 out.rows == block.num_dst && reaches_sources(block, z),
             "rooted sum shapes: z {}x{} (columns read {}), out {}x{} (output width {}), block {}->{}", z.rows, z.cols,
             sum.columns_read(), out.rows, out.cols, sum.output_width(), block.num_src, block.num_dst);
}

void expect_gat_shapes(const SparseBlockView& block, const GatShape& shape, ConstDeviceRows z, ConstDeviceRows out) {
  NJ_EXPECTS(shape.heads >= 1 && shape.heads <= rowmath::kMaxGatHeads && shape.channels >= 1,
             "gat shapes: {} heads of {} channels (1 to {} heads)", shape.heads, shape.channels, rowmath::kMaxGatHeads);
  NJ_EXPECTS(z.cols == shape.row_width() && out.cols == shape.output_width() && out.rows == block.num_dst &&
                 reaches_sources(block, z),
             "gat shapes: z {}x{} (row width {}), out {}x{} (output width {}), block {}->{}", z.rows, z.cols,
             shape.row_width(), out.rows, out.cols, shape.output_width(), block.num_src, block.num_dst);
}

LibraryMemory cuda_library_memory(bool deterministic) {
  if (deterministic) {
    return {.workspace_bytes = kCublasWorkspaceBytes,
            .narrows_offsets = false,
            .reads_packed_blocks = false,
            .memory_apart_from_host = true};
  }
  return {.workspace_bytes = kCublasWorkspaceBytes + kCusparseWorkspaceBytes,
          .narrows_offsets = true,
          .reads_packed_blocks = false,
          .memory_apart_from_host = true};
}

bool sparse_library_takes(const SparseBlockView& block, bool transpose) {
  const float* weights = transpose ? block.out_weight : block.edge_weight;
  const std::int64_t rows = transpose ? block.num_src : block.num_dst;
  return weights != nullptr && block.src_index != nullptr && block.src_row == nullptr && block.grad_row == nullptr &&
         rows > 0 && block.num_edges() <= INT32_MAX;
}

std::int64_t narrowed_offsets_bytes(const SparseBlockView& block, bool transpose) {
  return ((transpose ? block.num_src : block.num_dst) + 1) * static_cast<std::int64_t>(sizeof(std::int32_t));
}

}  // namespace nj
