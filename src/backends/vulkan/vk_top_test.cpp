// Backend::compute_top on the Vulkan device (shaders/top_k.comp, the CUDA backend's radix
// select) against hal::select_top of the same backend's whole rows (hal/top_testing.h's rows,
// fed to the logits by kEmbed of an F32 table).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "backends/vulkan/vk_test_graphs.h"
#include "hal/top_testing.h"

namespace bitnet::vulkan::test {
namespace {

TEST(VulkanTopK, SelectsWhatTheHostSelects) {
  BITNET_VK_BACKEND_OR_SKIP(vk, VulkanOptions{});
  const int64_t n_rows = hal::testing::kTopTestRows, n_cols = 20000;
  const std::vector<float> v = hal::testing::top_test_rows(n_cols);
  Weights w;
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  const hal::WeightId table = w.add(GgmlType::kF32, n_cols, n_rows, std::move(bytes));
  ASSERT_TRUE(vk->load_weights(w.table()).ok());
  ASSERT_TRUE(vk->init_kv({2, 32, 64}).ok());
  G g(n_rows);
  g.g.logits = g.input(table, n_cols);
  const std::vector<int32_t> tokens = {0, 1, 2, 3, 4};
  std::vector<float> logits(v.size());
  ASSERT_TRUE(vk->compute(g.g, tokens, logits).ok());
  const std::vector<hal::TopRequest> req = hal::testing::top_test_requests(n_cols);
  std::vector<std::vector<hal::TokenLogit>> got;
  const Status s = vk->compute_top(g.g, tokens, req, got);
  ASSERT_TRUE(s.ok()) << s.to_string();
  hal::testing::expect_top_matches(logits, n_cols, req, got);
  const std::vector<std::string> used = vk->kernels_used();
  EXPECT_NE(std::find(used.begin(), used.end(), "vulkan:top_k_rows"), used.end());
  EXPECT_EQ(vk->compute_top(g.g, tokens, std::vector<hal::TopRequest>(2), got).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bitnet::vulkan::test
