// Fuzz target of the checkpoint reader, nj::load_checkpoint (nj train --resume, --load-checkpoint): raw HDF5
// files, and edits of a valid checkpoint of a small GCN (hdf5_edits.cpp). A checkpoint's identity must match
// before its arrays are read, so the base file carries the identity the target loads with.
#include "nj/train/checkpoint.hpp"
#include "target_support.hpp"

namespace {

const nj::RunIdentity kRun{"gcn", "dataset", "one rank", "Adam", nj::GraphIdentity{}};

nj::ModelConfig small_gcn() {
  nj::ModelConfig config;
  config.hidden = 4;
  return config;
}

const std::filesystem::path& base_checkpoint() {
  static const std::filesystem::path path = [] {
    const auto written = nj::fuzz::scratch_dir() / "base-checkpoint.h5";
    nj::Model model(small_gcn(), 6, 3);
    const nj::Adam adam(model.parameters(), {});
    nj::TrainingProgress progress;
    progress.next_epoch = 3;
    progress.best_val_epoch = 1;
    nj::save_checkpoint(written.string(), kRun, progress, adam);
    return written;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nj::fuzz;
  const std::string path = hdf5_input({data, size}, base_checkpoint(), "checkpoint.h5");
  nj::Model model(small_gcn(), 6, 3);
  nj::Adam adam(model.parameters(), {});
  expect_clean_outcome(path, [&] { nj::load_checkpoint(path, kRun, adam); });
  expect_no_open_hdf5_objects();
  return 0;
}
