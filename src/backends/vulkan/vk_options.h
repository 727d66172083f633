// Options of the Vulkan backend beyond the HAL's make_backend(device_index): tests use them to
// exercise the split path (a low binding limit) and the out-of-memory path (a small heap).
#pragma once

#include <cstdint>
#include <memory>

#include "bitnet/status.h"
#include "hal/backend.h"

namespace bitnet::vulkan {

struct VulkanOptions {
  int device_index = 0;
  uint64_t max_binding_bytes = 0;  // 0: the device's maxStorageBufferRange
  uint64_t max_device_bytes = 0;   // 0: the device-local heap size
};

Result<std::unique_ptr<hal::Backend>> make_backend(const VulkanOptions& options);

}  // namespace bitnet::vulkan
