#pragma once
// Kernels that do nothing, for the planning device (nj/device/planning_device.hpp): what planning replays an epoch
// with, to learn what it allocates without its arithmetic.
#include <memory>

#include "nj/kernels/backend.hpp"

namespace nj {

// Takes of `device` what the planned backend's libraries would (`library`).
std::unique_ptr<Backend> make_planning_backend(Device& device, const LibraryMemory& library = {});

}  // namespace nj
