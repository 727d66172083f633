// One compute pipeline per op (and weight type), created on first use from the embedded
// SPIR-V. All share one layout: descriptor set 0 with kBindings storage buffers and
// kPushBytes of push constants, so a dispatch is "pipeline + buffers + parameters".
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "backends/vulkan/vk_context.h"

namespace bitnet::vulkan {

constexpr uint32_t kBindings = 6;
constexpr uint32_t kPushBytes = 64;

enum class Kernel : int {
  kEmbedF32, kEmbedF16, kEmbedBF16, kEmbedQ8_0,
  kMatmulF32, kMatmulF16, kMatmulBF16, kMatmulQ8_0,
  kMatmulW2A8,
  kQuantizeAct,
  kRmsNorm,
  kRope,
  kAttention,
  kAdd, kSiluMul, kRelu2Mul, kScale,
  kCount,
};

// "vulkan:matmul_w2a8", ... (for kernels_used()).
std::string_view kernel_id(Kernel kernel);
// Invocations per workgroup along x.
uint32_t kernel_workgroup_size(Kernel kernel);

class Pipelines {
 public:
  explicit Pipelines(Context& ctx) : ctx_(ctx) {}
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;
  ~Pipelines();

  Status init();  // the shared layouts
  Result<VkPipeline> get(Kernel kernel);
  VkPipelineLayout layout() const { return layout_; }
  VkDescriptorSetLayout set_layout() const { return set_layout_; }

 private:
  Context& ctx_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  std::array<VkPipeline, static_cast<size_t>(Kernel::kCount)> pipelines_{};
};

}  // namespace bitnet::vulkan
