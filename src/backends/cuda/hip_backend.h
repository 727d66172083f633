// The HIP backend's entry points, for the code outside it (the registry). The backend is the
// CUDA backend's sources built a second time for AMD GPUs, where CMake renames the namespace
// bitnet::cuda to bitnet::hip (src/backends/cuda/CMakeLists.txt): these declarations are
// cuda_probe.h's probe() and cuda_backend.h's make_backend(int) under that name.
#pragma once

#include <memory>

#include "bitnet/status.h"
#include "hal/backend.h"
#include "hal/device.h"

namespace bitnet::hip {

hal::BackendProbe probe();
Result<std::unique_ptr<hal::Backend>> make_backend(int device_index);

}  // namespace bitnet::hip
