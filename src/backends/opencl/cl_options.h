// Options of the OpenCL backend beyond make_backend(int): limits that tests lower to reach
// the weight-splitting and out-of-memory paths on a device that has plenty of memory.
#pragma once

#include <cstdint>
#include <memory>

#include "bitnet/status.h"
#include "hal/backend.h"

namespace bitnet::opencl {

struct ClOptions {
  int device_index = 0;          // index into probe().devices
  uint64_t max_alloc_bytes = 0;  // largest single buffer: 0 = the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE
                                 // (a lower value only lowers it; weights above it are split by rows)
  uint64_t memory_budget_bytes = 0;  // 0 = none; else device buffers beyond it in all fail with kOutOfMemory
  int work_group = 64;           // work-group size of the reducing kernels (capped by the device)
};

Result<std::unique_ptr<hal::Backend>> make_backend(const ClOptions& options);

}  // namespace bitnet::opencl
