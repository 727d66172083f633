// OpenCL backend (level 2): weights resident on the device, KV cache on the device, the whole
// op list enqueued on one in-order queue; only the logits are read back.
#pragma once

#include <memory>

#include "bitnet/status.h"
#include "hal/backend.h"
#include "hal/device.h"

namespace bitnet::opencl {

// Lists OpenCL platforms and devices; never fails (an absent runtime is `available = false`
// with the reason, e.g. "no OpenCL platform (clGetPlatformIDs: -1001)").
hal::BackendProbe probe();

// A backend on device `device_index` of probe().devices.
Result<std::unique_ptr<hal::Backend>> make_backend(int device_index);

}  // namespace bitnet::opencl
