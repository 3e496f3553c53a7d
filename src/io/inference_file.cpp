#include "nj/io/inference_file.hpp"

#include <algorithm>
#include <filesystem>

#include "nj/core/error.hpp"
#include "nj/io/hdf5.hpp"

namespace nj {
namespace {

std::vector<hsize_t> shape_of(const Matrix& m) {
  return {static_cast<hsize_t>(m.rows()), static_cast<hsize_t>(m.cols())};
}

// Rows per chunk of a stored matrix: about 1 MiB, so that a reader of some rows touches only their chunks.
hsize_t rows_per_chunk(const Matrix& m) {
  const std::int64_t rows = std::max<std::int64_t>(1, (std::int64_t{1} << 18) / std::max<std::int64_t>(1, m.cols()));
  return static_cast<hsize_t>(std::min(rows, std::max<std::int64_t>(1, m.rows())));
}

void write_matrix(hdf5::File& file, const std::string& name, const Matrix& m) {
  file.write<float>(name, m.span(), shape_of(m), m.rows() > 0 ? rows_per_chunk(m) : 0);
}

}  // namespace

void write_inference(const std::string& path, const InferenceOutput& output) {
  const Matrix& logits = output.logits;
  Matrix probabilities(logits.rows(), logits.cols());
  std::vector<std::int32_t> predictions(static_cast<std::size_t>(logits.rows()));
  for (std::int64_t v = 0; v < logits.rows(); ++v) {
    const float* row = logits.view().row(v);
    float* probability = probabilities.view().row(v);
    const float* largest = std::max_element(row, row + logits.cols());
    predictions[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(largest - row);
    // Softmax from the largest logit, in double, so that no term overflows.
    double total = 0.0;
    for (std::int64_t c = 0; c < logits.cols(); ++c) total += std::exp(double{row[c]} - double{*largest});
    for (std::int64_t c = 0; c < logits.cols(); ++c) {
      probability[c] = static_cast<float>(std::exp(double{row[c]} - double{*largest}) / total);
    }
  }
  const std::string partial = path + ".partial";
  {
    auto file = hdf5::File::create(partial);
    file.set_attribute("format", std::string(kInferenceFormat));
    file.set_attribute("checkpoint", output.checkpoint);
    file.set_attribute("dataset", output.dataset);
    file.set_attribute("model", output.model);
    file.set_attribute("epochs", output.epochs);
    file.set_attribute("num_vertices", logits.rows());
    file.set_attribute("num_classes", logits.cols());
    file.set_attribute("train_accuracy", output.train_accuracy);
    file.set_attribute("val_accuracy", output.val_accuracy);
    file.set_attribute("test_accuracy", output.test_accuracy);
    NJ_EXPECTS(static_cast<std::int64_t>(output.vertex_ids.size()) == logits.rows(), "{} vertex ids for {} rows",
               output.vertex_ids.size(), logits.rows());
    file.write<gid_t>("/vertex_ids", output.vertex_ids, {static_cast<hsize_t>(output.vertex_ids.size())});
    write_matrix(file, "/logits", logits);
    write_matrix(file, "/probabilities", probabilities);
    file.write<std::int32_t>("/predictions", predictions, {static_cast<hsize_t>(predictions.size())});
    if (!output.embeddings.empty()) file.create_group("/embeddings");
    for (const LayerEmbedding& e : output.embeddings) {
      write_matrix(file, "/embeddings/" + e.layer, e.rows);
    }
  }
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  NJ_REQUIRE(!error, "{}: cannot rename from {}: {}", path, partial, error.message());
}

}  // namespace nj
