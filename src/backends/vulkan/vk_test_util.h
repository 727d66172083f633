// Shared by the Vulkan backend tests: a Vulkan backend or a skip, and the CPU reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/vulkan/vk_backend.h"
#include "backends/vulkan/vk_options.h"

namespace bitnet::vulkan::test {

// Declares `var` (std::unique_ptr<hal::Backend>) on Vulkan, or skips the test when there is no
// Vulkan driver or device here (kUnavailable); any other error fails.
#define BITNET_VK_BACKEND_OR_SKIP(var, options)                                              \
  auto var##_result = ::bitnet::vulkan::make_backend(options);                               \
  if (!var##_result.ok() && var##_result.status().code() == ::bitnet::StatusCode::kUnavailable) \
    GTEST_SKIP() << "no Vulkan device: " << var##_result.status().to_string();               \
  ASSERT_TRUE(var##_result.ok()) << var##_result.status().to_string();                       \
  std::unique_ptr<::bitnet::hal::Backend> var = std::move(var##_result).value()

inline std::unique_ptr<hal::Backend> cpu_reference() { return cpu::make_cpu_backend({2, "scalar"}); }

struct Diff {
  double max_abs = 0.0;
  double max_ref = 0.0;  // max |reference|
};

inline Diff compare(std::span<const float> ours, std::span<const float> ref) {
  Diff d;
  for (size_t i = 0; i < ref.size(); ++i) {
    d.max_abs = std::max(d.max_abs, static_cast<double>(std::fabs(ours[i] - ref[i])));
    d.max_ref = std::max(d.max_ref, static_cast<double>(std::fabs(ref[i])));
    if (std::isnan(ours[i]) != std::isnan(ref[i])) d.max_abs = INFINITY;
  }
  return d;
}

}  // namespace bitnet::vulkan::test
