#pragma once
// Checkpoints in HDF5: every parameter, Adam's moments and step count, the next epoch to run, and the model
// configuration (so a checkpoint is never loaded into a different model).
#include <cstdint>
#include <string>

#include "nj/model/model.hpp"
#include "nj/train/adam.hpp"

namespace nj {

void save_checkpoint(const std::string& path, Model& model, Adam& optimizer, std::uint32_t next_epoch);
// Loads into a model built with the same configuration and returns the next epoch to run; throws
// nj::InputError naming the file and the mismatch otherwise.
std::uint32_t load_checkpoint(const std::string& path, Model& model, Adam& optimizer);

}  // namespace nj
