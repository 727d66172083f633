// Lists CUDA devices through the runtime API. Never fails: no driver or no device is
// `available = false` with the reason.
#pragma once

#include <string>

#include "hal/device.h"

namespace bitnet::cuda {

hal::BackendProbe probe();

#if BITNET_HIP
// Empty when this build holds code objects for the device's architecture (a gcnArchName such as
// "gfx90a:sramecc+:xnack-"), else why it cannot run there.
std::string hip_arch_refusal(const char* gcn_arch_name);
#endif

}  // namespace bitnet::cuda
