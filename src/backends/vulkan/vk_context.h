// The Vulkan objects one backend owns: instance, device, compute queue, command pool and fence,
// plus move-only RAII buffers. Device memory is accounted against the device-local heap so
// that running out is a kOutOfMemory Status even on drivers that overcommit (lavapipe).
#pragma once

#include <vulkan/vulkan.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "bitnet/status.h"

namespace bitnet::vulkan {

// VK_ERROR_OUT_OF_{DEVICE,HOST}_MEMORY -> kOutOfMemory, VK_ERROR_DEVICE_LOST -> kDeviceLost,
// anything else -> kInternal; the message names the call and the VkResult.
Status vk_status(VkResult result, std::string_view what);

#define BITNET_VK_RETURN_IF_ERROR(call)                                             \
  do {                                                                              \
    const VkResult bitnet_vk_result_ = (call);                                      \
    if (bitnet_vk_result_ != VK_SUCCESS) return vk_status(bitnet_vk_result_, #call); \
  } while (0)

// Creates an instance for compute (API 1.2); the caller destroys it.
VkResult create_instance(VkInstance* instance);

class Context;

// A storage buffer with its own memory (device-local, or host-visible and mapped).
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer() { reset(); }

  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }
  void* mapped() const { return mapped_; }
  explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }
  void reset();

 private:
  friend class Context;
  Context* ctx_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint64_t size_ = 0;
  void* mapped_ = nullptr;
  bool device_local_ = false;
};

enum class MemoryKind { kDevice, kHostVisible };

// Whether physical device `dev` offers device extension `name`.
bool device_has_extension(VkPhysicalDevice dev, const char* name);

class Context {
 public:
  // int8_dot: enable VK_KHR_shader_integer_dot_product where the device has it.
  static Result<std::unique_ptr<Context>> create(int device_index, bool int8_dot = true);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  VkDevice device() const { return device_; }
  const VkPhysicalDeviceProperties& properties() const { return props_; }
  bool shader_float64() const { return shader_float64_; }
  // The integer dot product feature is enabled (dotPacked4x8EXT in shaders).
  bool int8_dot() const { return int8_dot_; }
  uint64_t heap_bytes() const { return heap_bytes_; }
  uint64_t device_bytes_in_use() const { return device_bytes_; }
  // Caps the device memory this context may allocate (below the heap size).
  void limit_heap(uint64_t bytes) { heap_bytes_ = heap_bytes_ == 0 ? bytes : std::min(heap_bytes_, bytes); }
  uint64_t max_binding_bytes() const { return props_.limits.maxStorageBufferRange; }
  uint64_t offset_alignment() const { return props_.limits.minStorageBufferOffsetAlignment; }

  // size bytes (rounded up to 16); kOutOfMemory beyond the device-local heap.
  Result<Buffer> create_buffer(uint64_t size, MemoryKind kind);

  // One-shot command buffer: begin, record, then submit_and_wait (which frees it).
  Result<VkCommandBuffer> begin_commands();
  Status submit_and_wait(VkCommandBuffer cb);
  void discard_commands(VkCommandBuffer cb);

  // Host bytes -> a device buffer at offset, through a host-visible staging buffer.
  Status upload(const Buffer& dst, uint64_t offset, std::span<const uint8_t> bytes);

 private:
  friend class Buffer;
  Context() = default;
  Result<uint32_t> memory_type(uint32_t type_bits, MemoryKind kind) const;

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties memory_props_{};
  bool shader_float64_ = false;
  bool int8_dot_ = false;
  uint64_t heap_bytes_ = 0;
  uint64_t device_bytes_ = 0;
};

}  // namespace bitnet::vulkan
