#include "backends/vulkan/vk_backend.h"

#include <fmt/format.h>

#include "backends/vulkan/vk_backend_impl.h"

namespace bitnet::vulkan {

Result<std::unique_ptr<hal::Backend>> VulkanBackend::create(const VulkanOptions& options) {
  std::unique_ptr<VulkanBackend> b(new VulkanBackend());
  BITNET_ASSIGN_OR_RETURN(b->ctx_, Context::create(options.device_index, options.int8_dot));
  if (options.max_device_bytes > 0) b->ctx_->limit_heap(options.max_device_bytes);
  b->max_binding_bytes_ = b->ctx_->max_binding_bytes();
  b->quant_dot_ = options.quant_dot;
  if (options.max_binding_bytes > 0) b->max_binding_bytes_ = std::min(b->max_binding_bytes_, options.max_binding_bytes);
  b->pipelines_ = std::make_unique<Pipelines>(*b->ctx_);
  BITNET_RETURN_IF_ERROR(b->pipelines_->init());
  b->pool_ = std::make_unique<BufferPool>(*b->ctx_);
  BITNET_ASSIGN_OR_RETURN(b->dummy_, b->ctx_->create_buffer(16, MemoryKind::kDevice));
  return std::unique_ptr<hal::Backend>(std::move(b));
}

VulkanBackend::~VulkanBackend() {
  if (ctx_ == nullptr) return;
  vkDeviceWaitIdle(ctx_->device());
  for (VkDescriptorPool p : descriptor_pools_) vkDestroyDescriptorPool(ctx_->device(), p, nullptr);
  // Buffers and pipelines go before the context that owns the device.
  acts_.clear();
  q8_q_.reset();
  q8_meta_.reset();
  weights_.clear();
  k_cache_.clear();
  v_cache_.clear();
  dummy_.reset();
  tokens_.reset();
  rope_table_.reset();
  kv_map_.reset();
  readback_.reset();
  pool_.reset();
  pipelines_.reset();
}

hal::BackendInfo VulkanBackend::info() const {
  const VkPhysicalDeviceProperties& p = ctx_->properties();
  const std::string name(p.deviceName);
  const bool lavapipe = name.find("llvmpipe") != std::string::npos;
  return {lavapipe ? "vulkan:lavapipe" : "vulkan", name, 1};
}

Status VulkanBackend::load_weights(std::span<const hal::WeightDesc> weights) {
  weights_.clear();
  weight_bytes_ = 0;
  weights_.reserve(weights.size());
  for (const hal::WeightDesc& d : weights) {
    BITNET_ASSIGN_OR_RETURN(DeviceWeight w, upload_weight(*ctx_, d, max_binding_bytes_));
    weight_bytes_ += w.device_bytes();
    weights_.push_back(std::move(w));
  }
  shapes_ = hal::weight_shapes(weights);
  return {};
}

Status VulkanBackend::init_kv(const hal::KvShape& shape) {
  k_cache_.clear();
  v_cache_.clear();
  kv_ = {};
  const uint64_t layer_bytes = static_cast<uint64_t>(shape.n_ctx) * static_cast<uint64_t>(shape.n_embd_kv) * 4;
  if (layer_bytes > max_binding_bytes_) {
    return unsupported(fmt::format("a KV cache layer of {} MiB exceeds the storage-buffer binding limit "
                                   "of {} MiB (lower the context length)", layer_bytes >> 20, max_binding_bytes_ >> 20));
  }
  BITNET_ASSIGN_OR_RETURN(VkCommandBuffer cb, ctx_->begin_commands());
  for (int32_t il = 0; il < shape.n_layer; ++il) {
    for (std::vector<Buffer>* cache : {&k_cache_, &v_cache_}) {
      auto b = ctx_->create_buffer(layer_bytes, MemoryKind::kDevice);
      if (!b.ok()) {
        BITNET_RETURN_IF_ERROR(ctx_->submit_and_wait(cb));
        k_cache_.clear();
        v_cache_.clear();
        return b.status().with_context(fmt::format("KV cache of {} MiB", 2 * layer_bytes * shape.n_layer >> 20));
      }
      vkCmdFillBuffer(cb, b->handle(), 0, VK_WHOLE_SIZE, 0);
      cache->push_back(std::move(b).value());
    }
  }
  BITNET_RETURN_IF_ERROR(ctx_->submit_and_wait(cb));
  kv_ = shape;
  kv_.type = hal::KvType::kF32;  // no F16 attention shader yet: an F16 request gets F32 (stats().kv_type)
  return {};
}

hal::BackendStats VulkanBackend::stats() const {
  hal::BackendStats s;
  s.weight_bytes = weight_bytes_;
  for (const Buffer& b : k_cache_) s.kv_bytes += b.size();
  for (const Buffer& b : v_cache_) s.kv_bytes += b.size();
  const PoolStats& p = pool_->stats();
  s.pool_allocations = p.allocations;
  s.pool_reuses = p.reuses;
  s.pool_bytes = p.bytes;
  s.pool_peak_bytes = p.peak_bytes;
  return s;
}

void VulkanBackend::release_scratch() {
  release_acts();
  pool_->clear();
  tokens_.reset();
  rope_table_.reset();
  kv_map_.reset();
  readback_.reset();
  top_args_.reset();
  top_entries_.reset();
}

Result<std::unique_ptr<hal::Backend>> make_backend(const VulkanOptions& options) {
  return VulkanBackend::create(options);
}

Result<std::unique_ptr<hal::Backend>> make_backend(int device_index) {
  VulkanOptions o;
  o.device_index = device_index;
  return VulkanBackend::create(o);
}

}  // namespace bitnet::vulkan
