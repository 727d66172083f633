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
  // llama.cpp's block formats (TYPE 4..14 of embed / matmul_float)
  kEmbedQ4_0, kEmbedQ4_1, kEmbedQ5_0, kEmbedQ5_1, kEmbedQ2_K, kEmbedQ3_K, kEmbedQ4_K, kEmbedQ5_K, kEmbedQ6_K, kEmbedIQ4_NL, kEmbedIQ4_XS,
  kMatmulQ4_0, kMatmulQ4_1, kMatmulQ5_0, kMatmulQ5_1, kMatmulQ2_K, kMatmulQ3_K, kMatmulQ4_K, kMatmulQ5_K, kMatmulQ6_K, kMatmulIQ4_NL, kMatmulIQ4_XS,
  kMatmulW2A8,
  kMatmulW2A8Dot,  // the same with the packed int8 dot, OpSDot (Context::int8_dot)
  // Block formats against 8-bit activations (quantize_q8 + matmul_quant): plain integer
  // multiplies, then the same with OpSDot (Context::int8_dot).
  kQuantizeQ8_0, kQuantizeQ8_1, kQuantizeQ8_K,
  kMatmulIntQ4_0, kMatmulIntQ4_1, kMatmulIntQ5_0, kMatmulIntQ5_1, kMatmulIntQ8_0, kMatmulIntQ2_K, kMatmulIntQ3_K,
  kMatmulIntQ4_K, kMatmulIntQ5_K, kMatmulIntQ6_K, kMatmulIntIQ4_NL, kMatmulIntIQ4_XS,
  kMatmulDotQ4_0, kMatmulDotQ4_1, kMatmulDotQ5_0, kMatmulDotQ5_1, kMatmulDotQ8_0, kMatmulDotQ2_K, kMatmulDotQ3_K,
  kMatmulDotQ4_K, kMatmulDotQ5_K, kMatmulDotQ6_K, kMatmulDotIQ4_NL, kMatmulDotIQ4_XS,
  kQuantizeAct,
  kRmsNorm,
  kRope,
  kAttention,
  kAdd, kSiluMul, kRelu2Mul, kScale, kBias,
  kTopK,  // part of each logits row (compute_top)
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
