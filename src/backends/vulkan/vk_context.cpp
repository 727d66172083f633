#include "backends/vulkan/vk_context.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace bitnet::vulkan {

Status vk_status(VkResult result, std::string_view what) {
  const std::string m = fmt::format("{} failed (VkResult {})", what, static_cast<int>(result));
  switch (result) {
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return out_of_memory(m);
    case VK_ERROR_DEVICE_LOST:
      return device_lost(m);
    default:
      return internal_error(m);
  }
}

VkResult create_instance(VkInstance* instance) {
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "bitnet";
  app.pEngineName = "bitnet";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  return vkCreateInstance(&info, nullptr, instance);
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    ctx_ = other.ctx_;
    buffer_ = other.buffer_;
    memory_ = other.memory_;
    size_ = other.size_;
    mapped_ = other.mapped_;
    device_local_ = other.device_local_;
    other.ctx_ = nullptr;
    other.buffer_ = VK_NULL_HANDLE;
    other.memory_ = VK_NULL_HANDLE;
    other.size_ = 0;
    other.mapped_ = nullptr;
  }
  return *this;
}

void Buffer::reset() {
  if (ctx_ == nullptr) return;
  const VkDevice dev = ctx_->device_;
  if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(dev, buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) {
    if (mapped_ != nullptr) vkUnmapMemory(dev, memory_);
    vkFreeMemory(dev, memory_, nullptr);
  }
  if (device_local_) ctx_->device_bytes_ -= size_;
  ctx_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
  size_ = 0;
}

bool device_has_extension(VkPhysicalDevice dev, const char* name) {
  uint32_t n = 0;
  if (vkEnumerateDeviceExtensionProperties(dev, nullptr, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> exts(n);
  if (vkEnumerateDeviceExtensionProperties(dev, nullptr, &n, exts.data()) != VK_SUCCESS) return false;
  for (const VkExtensionProperties& e : exts) {
    if (std::strcmp(e.extensionName, name) == 0) return true;
  }
  return false;
}

Result<std::unique_ptr<Context>> Context::create(int device_index, bool int8_dot) {
  std::unique_ptr<Context> ctx(new Context());
  const VkResult r = create_instance(&ctx->instance_);
  if (r != VK_SUCCESS) {
    ctx->instance_ = VK_NULL_HANDLE;
    return unavailable(fmt::format("no Vulkan driver (vkCreateInstance: {})", static_cast<int>(r)));
  }
  uint32_t n = 0;
  BITNET_VK_RETURN_IF_ERROR(vkEnumeratePhysicalDevices(ctx->instance_, &n, nullptr));
  std::vector<VkPhysicalDevice> devices(n);
  BITNET_VK_RETURN_IF_ERROR(vkEnumeratePhysicalDevices(ctx->instance_, &n, devices.data()));
  if (device_index < 0 || static_cast<uint32_t>(device_index) >= n) {
    return unavailable(fmt::format("no Vulkan device {} ({} found)", device_index, n));
  }
  ctx->physical_ = devices[static_cast<size_t>(device_index)];
  vkGetPhysicalDeviceProperties(ctx->physical_, &ctx->props_);
  vkGetPhysicalDeviceMemoryProperties(ctx->physical_, &ctx->memory_props_);
  if (ctx->props_.apiVersion < VK_API_VERSION_1_2) {  // the shaders are SPIR-V 1.5
    return unsupported(fmt::format("Vulkan device {} supports API {}.{} only; 1.2 is needed",
                                   ctx->props_.deviceName, VK_API_VERSION_MAJOR(ctx->props_.apiVersion),
                                   VK_API_VERSION_MINOR(ctx->props_.apiVersion)));
  }
  for (uint32_t i = 0; i < ctx->memory_props_.memoryHeapCount; ++i) {
    const VkMemoryHeap& heap = ctx->memory_props_.memoryHeaps[i];
    if ((heap.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0) ctx->heap_bytes_ = std::max<uint64_t>(ctx->heap_bytes_, heap.size);
  }

  uint32_t n_families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical_, &n_families, nullptr);
  std::vector<VkQueueFamilyProperties> families(n_families);
  vkGetPhysicalDeviceQueueFamilyProperties(ctx->physical_, &n_families, families.data());
  bool found = false;
  for (uint32_t i = 0; i < n_families && !found; ++i) {
    if ((families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) != 0) {
      ctx->queue_family_ = i;
      found = true;
    }
  }
  if (!found) return unsupported(fmt::format("Vulkan device {} has no compute queue", ctx->props_.deviceName));

  VkPhysicalDeviceFeatures supported{};
  vkGetPhysicalDeviceFeatures(ctx->physical_, &supported);
  VkPhysicalDeviceFeatures enabled{};
  enabled.shaderFloat64 = supported.shaderFloat64;
  ctx->shader_float64_ = supported.shaderFloat64 == VK_TRUE;

  // The packed int8 dot product: the KHR extension (the instance asks for API 1.2, so 1.3's core
  // feature is reached through it) and its feature, chained into the device's create info.
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  const char* dot_extension = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
  if (int8_dot && device_has_extension(ctx->physical_, dot_extension)) {
    VkPhysicalDeviceFeatures2 features2{};
    features2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    features2.pNext = &dot;
    vkGetPhysicalDeviceFeatures2(ctx->physical_, &features2);
    ctx->int8_dot_ = dot.shaderIntegerDotProduct == VK_TRUE;
  }
  dot.shaderIntegerDotProduct = ctx->int8_dot_ ? VK_TRUE : VK_FALSE;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{};
  queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue_info.queueFamilyIndex = ctx->queue_family_;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkDeviceCreateInfo device_info{};
  device_info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  device_info.pEnabledFeatures = &enabled;
  if (ctx->int8_dot_) {
    device_info.pNext = &dot;
    device_info.enabledExtensionCount = 1;
    device_info.ppEnabledExtensionNames = &dot_extension;
  }
  BITNET_VK_RETURN_IF_ERROR(vkCreateDevice(ctx->physical_, &device_info, nullptr, &ctx->device_));
  vkGetDeviceQueue(ctx->device_, ctx->queue_family_, 0, &ctx->queue_);

  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pool_info.queueFamilyIndex = ctx->queue_family_;
  BITNET_VK_RETURN_IF_ERROR(vkCreateCommandPool(ctx->device_, &pool_info, nullptr, &ctx->command_pool_));
  VkFenceCreateInfo fence_info{};
  fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  BITNET_VK_RETURN_IF_ERROR(vkCreateFence(ctx->device_, &fence_info, nullptr, &ctx->fence_));
  return ctx;
}

Context::~Context() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device_, fence_, nullptr);
    if (command_pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_, command_pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

Result<uint32_t> Context::memory_type(uint32_t type_bits, MemoryKind kind) const {
  const VkMemoryPropertyFlags want = kind == MemoryKind::kDevice
      ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
      : VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t i = 0; i < memory_props_.memoryTypeCount; ++i) {
    if ((type_bits & (1u << i)) != 0 && (memory_props_.memoryTypes[i].propertyFlags & want) == want) return i;
  }
  if (kind == MemoryKind::kDevice) {  // no device-local type: any type will do
    for (uint32_t i = 0; i < memory_props_.memoryTypeCount; ++i) {
      if ((type_bits & (1u << i)) != 0) return i;
    }
  }
  return unsupported("no suitable Vulkan memory type");
}

Result<Buffer> Context::create_buffer(uint64_t size, MemoryKind kind) {
  size = std::max<uint64_t>(16, (size + 15) / 16 * 16);
  const bool device_local = kind == MemoryKind::kDevice;
  if (device_local && heap_bytes_ > 0 && device_bytes_ + size > heap_bytes_) {
    return out_of_memory(fmt::format("Vulkan buffer of {} MiB: {} MiB of the {} MiB device heap in use",
                                     size >> 20, device_bytes_ >> 20, heap_bytes_ >> 20));
  }
  Buffer b;
  b.ctx_ = this;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = size;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  BITNET_VK_RETURN_IF_ERROR(vkCreateBuffer(device_, &info, nullptr, &b.buffer_));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b.buffer_, &req);
  BITNET_ASSIGN_OR_RETURN(const uint32_t type, memory_type(req.memoryTypeBits, kind));
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = type;
  BITNET_VK_RETURN_IF_ERROR(vkAllocateMemory(device_, &alloc, nullptr, &b.memory_));
  BITNET_VK_RETURN_IF_ERROR(vkBindBufferMemory(device_, b.buffer_, b.memory_, 0));
  if (!device_local) BITNET_VK_RETURN_IF_ERROR(vkMapMemory(device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &b.mapped_));
  b.size_ = size;
  b.device_local_ = device_local;
  if (device_local) device_bytes_ += size;
  return b;
}

Result<VkCommandBuffer> Context::begin_commands() {
  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = command_pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  BITNET_VK_RETURN_IF_ERROR(vkAllocateCommandBuffers(device_, &alloc, &cb));
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  const VkResult r = vkBeginCommandBuffer(cb, &begin);
  if (r != VK_SUCCESS) {
    vkFreeCommandBuffers(device_, command_pool_, 1, &cb);
    return vk_status(r, "vkBeginCommandBuffer");
  }
  return cb;
}

Status Context::submit_and_wait(VkCommandBuffer cb) {
  struct Free {
    Context* c;
    VkCommandBuffer cb;
    ~Free() { vkFreeCommandBuffers(c->device_, c->command_pool_, 1, &cb); }
  } free_cb{this, cb};
  BITNET_VK_RETURN_IF_ERROR(vkEndCommandBuffer(cb));
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cb;
  BITNET_VK_RETURN_IF_ERROR(vkResetFences(device_, 1, &fence_));
  BITNET_VK_RETURN_IF_ERROR(vkQueueSubmit(queue_, 1, &submit, fence_));
  BITNET_VK_RETURN_IF_ERROR(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX));
  return {};
}

void Context::discard_commands(VkCommandBuffer cb) {
  vkEndCommandBuffer(cb);
  vkFreeCommandBuffers(device_, command_pool_, 1, &cb);
}

Status Context::upload(const Buffer& dst, uint64_t offset, std::span<const uint8_t> bytes) {
  constexpr uint64_t kStagingBytes = 64ull << 20;
  const uint64_t staging_size = std::min<uint64_t>(kStagingBytes, std::max<uint64_t>(bytes.size(), 16));
  BITNET_ASSIGN_OR_RETURN(Buffer staging, create_buffer(staging_size, MemoryKind::kHostVisible));
  for (uint64_t done = 0; done < bytes.size();) {
    const uint64_t n = std::min<uint64_t>(staging.size(), bytes.size() - done);
    std::memcpy(staging.mapped(), bytes.data() + done, n);
    BITNET_ASSIGN_OR_RETURN(VkCommandBuffer cb, begin_commands());
    const VkBufferCopy region{0, offset + done, (n + 3) / 4 * 4};
    vkCmdCopyBuffer(cb, staging.handle(), dst.handle(), 1, &region);
    BITNET_RETURN_IF_ERROR(submit_and_wait(cb));
    done += n;
  }
  return {};
}

}  // namespace bitnet::vulkan
