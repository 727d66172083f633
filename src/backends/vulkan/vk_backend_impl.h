// The Vulkan backend's class, shared by vk_backend.cpp (setup, weights, KV cache) and
// vk_compute.cpp (recording and running an op list).
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/vulkan/vk_buffer_pool.h"
#include "backends/vulkan/vk_context.h"
#include "backends/vulkan/vk_options.h"
#include "backends/vulkan/vk_pipelines.h"
#include "backends/vulkan/vk_weights.h"
#include "hal/backend.h"
#include "hal/validate.h"

namespace bitnet::vulkan {

// An activation on the device. F32: f32 = [n_rows][n_cols] floats. Q8: q = [n_rows][ceil(n_cols/4)]
// words of 4 int8, scale = [n_rows] floats (the row sums are not kept: the W2A8 kernel sums
// (code - 1) * q directly).
struct DeviceAct {
  Buffer f32;
  Buffer q;
  Buffer scale;
};

// The 8-bit activation path of a block format (quantize_q8.comp + matmul_quant.comp): the
// activation quantizer (Q8_0, Q8_1 or Q8_K blocks, as the CPU backend's quant::vec_dot_type),
// the matmul with plain integer multiplies and the one with OpSDot, and the block the rows must
// be made of (32 or 256). nullopt: the format has no such path (matmul_float only).
struct QuantDotKernels {
  Kernel quantize;
  Kernel matmul_int;
  Kernel matmul_dot;
  int64_t block;
};
std::optional<QuantDotKernels> quant_dot_kernels(DeviceFormat f);

// Every compute or transfer write before it visible to every compute or transfer access after it.
void full_barrier(VkCommandBuffer cb);

// A storage-buffer descriptor: a whole buffer or a window of one.
struct Binding {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize range = VK_WHOLE_SIZE;
};

class VulkanBackend final : public hal::Backend {
 public:
  static Result<std::unique_ptr<hal::Backend>> create(const VulkanOptions& options);
  ~VulkanBackend() override;

  hal::BackendInfo info() const override;
  Status load_weights(std::span<const hal::WeightDesc> weights) override;
  Status init_kv(const hal::KvShape& shape) override;
  Status compute(const hal::Graph& graph, std::span<const int32_t> tokens,
                 std::span<float> logits) override;
  // The part of each row selected on the device (shaders/top_k.comp); only it is read back.
  Status compute_top(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<const hal::TopRequest> req,
                     std::vector<std::vector<hal::TokenLogit>>& out) override;
  std::vector<std::string> kernels_used() const override {
    return {kernels_used_.begin(), kernels_used_.end()};
  }
  hal::BackendStats stats() const override;
  uint64_t weight_bytes(hal::WeightId id) const override {
    return id >= 0 && static_cast<size_t>(id) < weights_.size() ? weight(id).device_bytes() : 0;
  }
  void release_scratch() override;

 private:
  VulkanBackend() = default;

  // vk_compute.cpp
  // Records the op list and then read_back's commands into one command buffer, submits it and
  // waits; the activations go back to the pool.
  Status run_graph(const hal::Graph& graph, std::span<const int32_t> tokens,
                   const std::function<Status(VkCommandBuffer)>& read_back);
  static void host_read_barrier(VkCommandBuffer cb, VkPipelineStageFlags stage, VkAccessFlags access);
  Status prepare(const hal::Graph& graph, std::span<const int32_t> tokens);
  Status record_op(VkCommandBuffer cb, const hal::Graph& graph, const hal::Op& op);
  Status record_matmul(VkCommandBuffer cb, const hal::Graph& graph, const hal::Op& op);
  // Whether the matmul of w with x takes the 8-bit activation path: the option, a format that
  // has one, F32 activations, and quantized activations that fit one binding each.
  bool use_quant_dot(const DeviceWeight& w, const hal::ActDesc& x) const;
  Status dispatch(VkCommandBuffer cb, Kernel kernel, std::initializer_list<Binding> bindings,
                  const void* push, size_t push_bytes, uint32_t groups_x, uint32_t groups_y = 1);
  Result<VkDescriptorSet> allocate_set();
  void release_acts();
  Result<Buffer*> host_buffer(Buffer& slot, uint64_t size);

  // The whole buffer, or its first binding-limit bytes (a pooled buffer may be larger than asked).
  Binding bind(const Buffer& b) const { return {b.handle(), 0, std::min<VkDeviceSize>(b.size(), max_binding_bytes_)}; }
  const DeviceWeight& weight(hal::WeightId id) const { return weights_[static_cast<size_t>(id)]; }

  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Pipelines> pipelines_;
  std::unique_ptr<BufferPool> pool_;
  uint64_t max_binding_bytes_ = 0;
  bool quant_dot_ = true;  // VulkanOptions::quant_dot
  std::vector<DeviceWeight> weights_;
  std::vector<hal::WeightShape> shapes_;  // for hal::validate_graph
  uint64_t weight_bytes_ = 0;
  hal::KvShape kv_;
  std::vector<Buffer> k_cache_;  // per layer: [n_ctx][n_embd_kv] floats
  std::vector<Buffer> v_cache_;
  std::vector<DeviceAct> acts_;  // for the graph being run
  // The quantized activations of the current 8-bit-activation matmul (one pair for the whole
  // graph, sized for its largest such matmul; ops are separated by full barriers): int8 quads
  // [n_tokens][n_cols / 4] and two words per 32 elements (quantize_q8.comp).
  Buffer q8_q_;
  Buffer q8_meta_;
  Buffer dummy_;                 // bound to unused bindings
  Buffer tokens_;                // host-visible: token ids of the step
  Buffer rope_table_;            // host-visible: (cos, sin) per token and pair
  Buffer kv_map_;                // host-visible: int32 [position][table start] per token, then the tables
  hal::KvRows kv_rows_;          // the step's KV addressing (hal::resolve_kv)
  Buffer readback_;              // host-visible: the logits
  Buffer top_args_, top_entries_;  // host-visible: compute_top's plan and selected entries
  std::vector<VkDescriptorPool> descriptor_pools_;
  size_t descriptor_pool_next_ = 0;
  std::set<std::string> kernels_used_;
};

}  // namespace bitnet::vulkan
