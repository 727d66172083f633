#include "backends/vulkan/vk_pipelines.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "backends/vulkan/vk_shaders.h"

namespace bitnet::vulkan {

namespace {

struct KernelDesc {
  std::string_view id;
  std::string_view spv;
  uint32_t spec;  // constant_id 0 (TYPE or MODE)
  uint32_t workgroup_size;
};

constexpr KernelDesc kKernels[] = {
    {"vulkan:embed_f32", "embed.spv", 0, 64},
    {"vulkan:embed_f16", "embed.spv", 1, 64},
    {"vulkan:embed_bf16", "embed.spv", 2, 64},
    {"vulkan:embed_q8_0", "embed.spv", 3, 64},
    {"vulkan:matmul_f32", "matmul_float.spv", 0, 64},
    {"vulkan:matmul_f16", "matmul_float.spv", 1, 64},
    {"vulkan:matmul_bf16", "matmul_float.spv", 2, 64},
    {"vulkan:matmul_q8_0", "matmul_float.spv", 3, 64},
    {"vulkan:embed_q4_0", "embed.spv", 4, 64},
    {"vulkan:embed_q4_1", "embed.spv", 5, 64},
    {"vulkan:embed_q5_0", "embed.spv", 6, 64},
    {"vulkan:embed_q5_1", "embed.spv", 7, 64},
    {"vulkan:embed_q2_k", "embed.spv", 8, 64},
    {"vulkan:embed_q3_k", "embed.spv", 9, 64},
    {"vulkan:embed_q4_k", "embed.spv", 10, 64},
    {"vulkan:embed_q5_k", "embed.spv", 11, 64},
    {"vulkan:embed_q6_k", "embed.spv", 12, 64},
    {"vulkan:embed_iq4_nl", "embed.spv", 13, 64},
    {"vulkan:embed_iq4_xs", "embed.spv", 14, 64},
    {"vulkan:matmul_q4_0", "matmul_float.spv", 4, 64},
    {"vulkan:matmul_q4_1", "matmul_float.spv", 5, 64},
    {"vulkan:matmul_q5_0", "matmul_float.spv", 6, 64},
    {"vulkan:matmul_q5_1", "matmul_float.spv", 7, 64},
    {"vulkan:matmul_q2_k", "matmul_float.spv", 8, 64},
    {"vulkan:matmul_q3_k", "matmul_float.spv", 9, 64},
    {"vulkan:matmul_q4_k", "matmul_float.spv", 10, 64},
    {"vulkan:matmul_q5_k", "matmul_float.spv", 11, 64},
    {"vulkan:matmul_q6_k", "matmul_float.spv", 12, 64},
    {"vulkan:matmul_iq4_nl", "matmul_float.spv", 13, 64},
    {"vulkan:matmul_iq4_xs", "matmul_float.spv", 14, 64},
    {"vulkan:matmul_w2a8", "matmul_w2a8.spv", 0, 64},
    {"vulkan:matmul_w2a8_dot", "matmul_w2a8_dot.spv", 0, 64},
    {"vulkan:quantize_q8_0", "quantize_q8.spv", 0, 64},
    {"vulkan:quantize_q8_1", "quantize_q8.spv", 1, 64},
    {"vulkan:quantize_q8_k", "quantize_q8.spv", 2, 64},
    {"vulkan:matmul_q4_0_int", "matmul_quant.spv", 4, 64},
    {"vulkan:matmul_q4_1_int", "matmul_quant.spv", 5, 64},
    {"vulkan:matmul_q5_0_int", "matmul_quant.spv", 6, 64},
    {"vulkan:matmul_q5_1_int", "matmul_quant.spv", 7, 64},
    {"vulkan:matmul_q8_0_int", "matmul_quant.spv", 3, 64},
    {"vulkan:matmul_q2_k_int", "matmul_quant.spv", 8, 64},
    {"vulkan:matmul_q3_k_int", "matmul_quant.spv", 9, 64},
    {"vulkan:matmul_q4_k_int", "matmul_quant.spv", 10, 64},
    {"vulkan:matmul_q5_k_int", "matmul_quant.spv", 11, 64},
    {"vulkan:matmul_q6_k_int", "matmul_quant.spv", 12, 64},
    {"vulkan:matmul_iq4_nl_int", "matmul_quant.spv", 13, 64},
    {"vulkan:matmul_iq4_xs_int", "matmul_quant.spv", 14, 64},
    {"vulkan:matmul_q4_0_dot", "matmul_quant_dot.spv", 4, 64},
    {"vulkan:matmul_q4_1_dot", "matmul_quant_dot.spv", 5, 64},
    {"vulkan:matmul_q5_0_dot", "matmul_quant_dot.spv", 6, 64},
    {"vulkan:matmul_q5_1_dot", "matmul_quant_dot.spv", 7, 64},
    {"vulkan:matmul_q8_0_dot", "matmul_quant_dot.spv", 3, 64},
    {"vulkan:matmul_q2_k_dot", "matmul_quant_dot.spv", 8, 64},
    {"vulkan:matmul_q3_k_dot", "matmul_quant_dot.spv", 9, 64},
    {"vulkan:matmul_q4_k_dot", "matmul_quant_dot.spv", 10, 64},
    {"vulkan:matmul_q5_k_dot", "matmul_quant_dot.spv", 11, 64},
    {"vulkan:matmul_q6_k_dot", "matmul_quant_dot.spv", 12, 64},
    {"vulkan:matmul_iq4_nl_dot", "matmul_quant_dot.spv", 13, 64},
    {"vulkan:matmul_iq4_xs_dot", "matmul_quant_dot.spv", 14, 64},
    {"vulkan:quantize_act", "quantize_act.spv", 0, 64},
    {"vulkan:rms_norm", "rms_norm.spv", 0, 64},
    {"vulkan:rope", "rope.spv", 0, 64},
    {"vulkan:attention", "attention.spv", 0, 64},
    {"vulkan:add", "eltwise.spv", 0, 256},
    {"vulkan:silu_mul", "eltwise.spv", 1, 256},
    {"vulkan:relu2_mul", "eltwise.spv", 2, 256},
    {"vulkan:scale", "eltwise.spv", 3, 256},
    {"vulkan:bias", "eltwise.spv", 4, 256},
    {"vulkan:top_k_rows", "top_k.spv", 0, 256},
};
static_assert(std::size(kKernels) == static_cast<size_t>(Kernel::kCount));

const KernelDesc& desc(Kernel k) { return kKernels[static_cast<size_t>(k)]; }

}  // namespace

std::string_view kernel_id(Kernel kernel) { return desc(kernel).id; }
uint32_t kernel_workgroup_size(Kernel kernel) { return desc(kernel).workgroup_size; }

Pipelines::~Pipelines() {
  const VkDevice dev = ctx_.device();
  for (VkPipeline p : pipelines_) {
    if (p != VK_NULL_HANDLE) vkDestroyPipeline(dev, p, nullptr);
  }
  if (layout_ != VK_NULL_HANDLE) vkDestroyPipelineLayout(dev, layout_, nullptr);
  if (set_layout_ != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
}

Status Pipelines::init() {
  std::array<VkDescriptorSetLayoutBinding, kBindings> bindings{};
  for (uint32_t i = 0; i < kBindings; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{};
  set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_info.bindingCount = kBindings;
  set_info.pBindings = bindings.data();
  BITNET_VK_RETURN_IF_ERROR(vkCreateDescriptorSetLayout(ctx_.device(), &set_info, nullptr, &set_layout_));
  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, kPushBytes};
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &set_layout_;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &push;
  BITNET_VK_RETURN_IF_ERROR(vkCreatePipelineLayout(ctx_.device(), &layout_info, nullptr, &layout_));
  return {};
}

Result<VkPipeline> Pipelines::get(Kernel kernel) {
  VkPipeline& slot = pipelines_[static_cast<size_t>(kernel)];
  if (slot != VK_NULL_HANDLE) return slot;
  const KernelDesc& d = desc(kernel);
  std::string_view spv_name = d.spv;
  if (kernel == Kernel::kRmsNorm && ctx_.shader_float64()) spv_name = "rms_norm_f64.spv";
  const std::span<const uint8_t> spv = embedded_file(spv_name);
  if (spv.empty() || spv.size() % 4 != 0) return internal_error(fmt::format("shader {} is not embedded", spv_name));
  // Copy into 32-bit words: the embedded bytes carry no alignment guarantee.
  std::vector<uint32_t> code(spv.size() / 4);
  std::memcpy(code.data(), spv.data(), spv.size());
  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = spv.size();
  module_info.pCode = code.data();
  VkShaderModule module = VK_NULL_HANDLE;
  BITNET_VK_RETURN_IF_ERROR(vkCreateShaderModule(ctx_.device(), &module_info, nullptr, &module));

  const VkSpecializationMapEntry entry{0, 0, sizeof(uint32_t)};
  VkSpecializationInfo spec{};
  spec.mapEntryCount = 1;
  spec.pMapEntries = &entry;
  spec.dataSize = sizeof(uint32_t);
  spec.pData = &d.spec;
  VkComputePipelineCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = &spec;
  info.layout = layout_;
  const VkResult r = vkCreateComputePipelines(ctx_.device(), VK_NULL_HANDLE, 1, &info, nullptr, &slot);
  vkDestroyShaderModule(ctx_.device(), module, nullptr);
  if (r != VK_SUCCESS) {
    slot = VK_NULL_HANDLE;
    return vk_status(r, fmt::format("vkCreateComputePipelines({})", d.id));
  }
  return slot;
}

}  // namespace bitnet::vulkan
