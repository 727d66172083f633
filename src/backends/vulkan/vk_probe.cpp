// probe(): every Vulkan physical device and what it offers for compute.
#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_context.h"

namespace bitnet::vulkan {

namespace {

std::string vendor_name(uint32_t id) {
  switch (id) {
    case 0x1002: return "AMD";
    case 0x10DE: return "NVIDIA";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x1010: return "Imagination";
    case 0x106B: return "Apple";
    case 0x10005: return "Mesa";
    default: return "unknown";
  }
}

std::string version_string(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
}

hal::DeviceInfo describe(VkPhysicalDevice dev, int index) {
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(dev, &props);
  const bool v12 = props.apiVersion >= VK_API_VERSION_1_2;
  const bool dot_product = props.apiVersion >= VK_API_VERSION_1_3 ||
                           device_has_extension(dev, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);

  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  VkPhysicalDeviceProperties2 props2{};
  props2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props2.pNext = &subgroup;
  if (v12) subgroup.pNext = &driver;
  vkGetPhysicalDeviceProperties2(dev, &props2);

  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{};
  dot.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  VkPhysicalDeviceFeatures2 features2{};
  features2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  void** next = &features2.pNext;
  if (v12) {
    *next = &f12;
    next = &f12.pNext;
  }
  if (dot_product) *next = &dot;
  vkGetPhysicalDeviceFeatures2(dev, &features2);

  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(dev, &memory);

  hal::DeviceInfo d;
  d.backend = "vulkan";
  d.index = index;
  d.name = props.deviceName;
  const bool lavapipe = (v12 && driver.driverID == VK_DRIVER_ID_MESA_LLVMPIPE) ||
                        d.name.find("llvmpipe") != std::string::npos;
  d.id = lavapipe ? "vulkan:lavapipe" : fmt::format("vulkan:{}", index);
  d.vendor = fmt::format("{} (0x{:x})", vendor_name(props.vendorID), props.vendorID);
  d.driver_version = v12 ? fmt::format("{} {} (0x{:x})", driver.driverName, driver.driverInfo, props.driverVersion)
                         : fmt::format("0x{:x}", props.driverVersion);
  d.api_version = version_string(props.apiVersion);
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i) {
    if ((memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0) {
      d.memory_bytes = std::max<uint64_t>(d.memory_bytes, memory.memoryHeaps[i].size);
    }
  }
  d.max_alloc_bytes = props.limits.maxStorageBufferRange;  // the largest single binding
  d.compute_units = 0;  // Vulkan does not report compute units: unknown
  d.int8_dot = dot_product && dot.shaderIntegerDotProduct == VK_TRUE;
  d.fp16 = v12 && f12.shaderFloat16 == VK_TRUE;
  d.subgroups = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) != 0;
  d.subgroup_size = static_cast<int>(subgroup.subgroupSize);
  d.is_gpu = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ||
             props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  d.is_software = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  return d;
}

}  // namespace

hal::BackendProbe probe() {
  hal::BackendProbe p;
  p.backend = "vulkan";
  p.compiled = true;
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult r = create_instance(&instance);
  if (r != VK_SUCCESS) {
    p.reason = fmt::format("no Vulkan driver (vkCreateInstance: {})", static_cast<int>(r));
    return p;
  }
  uint32_t n = 0;
  VkResult e = vkEnumeratePhysicalDevices(instance, &n, nullptr);
  std::vector<VkPhysicalDevice> devices(n);
  if (e == VK_SUCCESS && n > 0) e = vkEnumeratePhysicalDevices(instance, &n, devices.data());
  if (e != VK_SUCCESS && e != VK_INCOMPLETE) {
    p.reason = fmt::format("vkEnumeratePhysicalDevices: {}", static_cast<int>(e));
  } else if (n == 0) {
    p.reason = "no Vulkan device";
  } else {
    for (uint32_t i = 0; i < n; ++i) p.devices.push_back(describe(devices[i], static_cast<int>(i)));
    p.available = true;
  }
  vkDestroyInstance(instance, nullptr);
  return p;
}

}  // namespace bitnet::vulkan
