// Lists CUDA devices through the runtime API. Never fails: no driver or no device is
// `available = false` with the reason.
#pragma once

#include "hal/device.h"

namespace bitnet::cuda {

hal::BackendProbe probe();

}  // namespace bitnet::cuda
