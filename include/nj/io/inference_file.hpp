#pragma once
// What nj infer writes: one HDF5 file with a row per vertex of the dataset, in ascending order of the vertices'
// global ids (for a dataset file, its own vertex ids), whatever order or ranks computed it. docs/dataset-format.md
// ("Inference output") describes it.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "nj/core/matrix.hpp"
#include "nj/core/types.hpp"

namespace nj {

// One model layer's output rows, under the model's name for the layer (Model::model_layer_name: "layer1").
struct LayerEmbedding {
  std::string layer;
  Matrix rows;
};

struct InferenceOutput {
  std::string checkpoint;         // the file the weights came from
  std::string dataset;            // the dataset's name
  std::string model;              // describe_model
  std::int64_t epochs = 0;        // epochs the checkpoint had trained
  std::vector<gid_t> vertex_ids;  // each row's global vertex id, ascending
  Matrix logits;                  // per vertex, one column per class
  std::vector<LayerEmbedding> embeddings;
  // Accuracy of the predictions on each split, NaN where the split is empty.
  double train_accuracy = std::nan("");
  double val_accuracy = std::nan("");
  double test_accuracy = std::nan("");
};

// Format 2 numbers /embeddings by the model's layers (docs/inference.md); format 1 numbered them as the executors built
// the layers, which differs for GIN and APPNP.
inline constexpr const char* kInferenceFormat = "nj-inference-2";

// Writes `output` to `path` (replacing it) under a temporary name, renamed once complete: /vertex_ids, /logits,
// /probabilities (the logits' softmax), /predictions (each row's class, the first of its largest logits) and
// /embeddings/<layer>.
void write_inference(const std::string& path, const InferenceOutput& output);

}  // namespace nj
