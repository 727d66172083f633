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
  // Block formats with an 8-bit activation dot on the CPU (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
  // Q5_K, Q6_K): quantize the activations once per matmul and dot in integers, as the CPU
  // backend (quantize_q8 + matmul_quant, OpSDot with int8_dot); false: dequantize in the shader
  // and dot with the float activations (matmul_float).
  bool quant_dot = true;
};

Result<std::unique_ptr<hal::Backend>> make_backend(const VulkanOptions& options);

}  // namespace bitnet::vulkan
