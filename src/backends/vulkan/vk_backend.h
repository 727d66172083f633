// Vulkan backend (level 2): weights resident in device buffers (split where a binding is
// limited), KV cache on the device, the op list recorded into command buffers; only the
// logits are read back.
#pragma once

#include <memory>

#include "bitnet/status.h"
#include "hal/backend.h"
#include "hal/device.h"

namespace bitnet::vulkan {

// Lists Vulkan physical devices; never fails (no loader/driver is `available = false` with
// the reason, e.g. "no Vulkan driver (vkCreateInstance: -9)").
hal::BackendProbe probe();

// A backend on device `device_index` of probe().devices.
Result<std::unique_ptr<hal::Backend>> make_backend(int device_index);

}  // namespace bitnet::vulkan
