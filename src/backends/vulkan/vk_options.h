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
  // Use the device's packed int8 dot product (VK_KHR_shader_integer_dot_product) in the W2A8
  // matmul where it has one; false: the plain shader (tests compare the two).
  bool int8_dot = true;
};

Result<std::unique_ptr<hal::Backend>> make_backend(const VulkanOptions& options);

}  // namespace bitnet::vulkan
