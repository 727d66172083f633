// The SPIR-V of shaders/*.comp, compiled by glslc and embedded at build time.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace bitnet::vulkan {

// By file name ("matmul_w2a8.spv"); empty if absent.
std::span<const uint8_t> embedded_file(std::string_view name);

}  // namespace bitnet::vulkan
