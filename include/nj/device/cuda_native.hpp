#pragma once
// The CUDA handles behind a CUDA device, for the code that launches work on them (the CUDA backend, the NCCL
// communicator). CUDA builds only.
#include <cuda_runtime_api.h>

#include "nj/device/device.hpp"

namespace nj {

// The stream behind `stream` of a device made by make_cuda_device; throws nj::Error for any other device.
cudaStream_t native_stream(Device& device, Stream stream);
// The GPU ordinal of a device made by make_cuda_device.
int native_ordinal(const Device& device);
// The memory it keeps beside its arena for the backend's libraries (make_cuda_device's library_bytes).
DeviceSpan<std::byte> native_library_workspace(Device& device);

}  // namespace nj
