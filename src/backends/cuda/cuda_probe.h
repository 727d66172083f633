// Lists CUDA devices through the runtime API. Never fails: no driver or no device is
// `available = false` with the reason.
#pragma once

#include <string>

#include "hal/device.h"

namespace bitnet::cuda {

hal::BackendProbe probe();

// GB/s of a memory at memory_clock_khz (the runtime's attribute) over bus_width_bits, double data
// rate; 0 when either is unknown.
inline double peak_bandwidth_gbs(int memory_clock_khz, int bus_width_bits) {
  if (memory_clock_khz <= 0 || bus_width_bits <= 0) return 0.0;
  return 2.0 * memory_clock_khz * 1e3 * (bus_width_bits / 8.0) / 1e9;
}

#if BITNET_HIP
// Empty when this build holds code objects for the device's architecture (a gcnArchName such as
// "gfx90a:sramecc+:xnack-"), else why it cannot run there.
std::string hip_arch_refusal(const char* gcn_arch_name);
#endif

}  // namespace bitnet::cuda
