// Backend::compute_top on the Vulkan device (shaders/top_k.comp, the CUDA backend's radix
// select) against hal::select_top of the same backend's whole rows: crafted rows with ties at
// the boundary, NaN, -0 and infinities, fed to the logits by kEmbed of an F32 table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backends/vulkan/vk_test_graphs.h"
#include "hal/top.h"

namespace bitnet::vulkan::test {
namespace {

TEST(VulkanTopK, SelectsWhatTheHostSelects) {
  BITNET_VK_BACKEND_OR_SKIP(vk, VulkanOptions{});
  const int64_t n_rows = 5, n_cols = 20000;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n_rows * n_cols));
  for (float& x : v) x = normal(rng);
  const auto at = [&](int64_t r, int64_t i) -> float& { return v[static_cast<size_t>(r * n_cols + i)]; };
  for (int64_t i = 0; i < 60; ++i) at(1, 100 + 37 * i) = 50.0f;  // 60 tied at the top: k = 40 takes the first 40
  at(2, 0) = std::numeric_limits<float>::quiet_NaN();
  at(2, 3) = std::numeric_limits<float>::infinity();
  at(2, 4) = -0.0f;
  at(2, 5) = 0.0f;
  for (int64_t i = 0; i < n_cols; ++i) at(3, i) = static_cast<float>(i % 7);  // ties everywhere
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
  const std::vector<hal::TopRequest> req = {{1, {}}, {40, {2, 9, static_cast<int32_t>(n_cols) - 1, -5}}, {6, {0, 4}},
                                            {3000, {}}, {50000, {}}};  // the last: k past the row
  std::vector<std::vector<hal::TokenLogit>> got;
  const Status s = vk->compute_top(g.g, tokens, req, got);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_EQ(got.size(), req.size());
  for (size_t r = 0; r < req.size(); ++r) {
    std::vector<hal::TokenLogit> want;
    hal::select_top(std::span<const float>(logits).subspan(r * n_cols, n_cols), req[r], want);
    ASSERT_EQ(got[r].size(), want.size()) << "row " << r;
    const auto k = static_cast<size_t>(hal::top_count(req[r], n_cols));
    std::sort(got[r].begin(), got[r].begin() + static_cast<std::ptrdiff_t>(k), hal::ranks_before);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[r][i].id, want[i].id) << "row " << r << " entry " << i;
      EXPECT_TRUE(got[r][i].logit == want[i].logit || (std::isnan(got[r][i].logit) && std::isnan(want[i].logit)))
          << "row " << r << " entry " << i;
    }
  }
  const std::vector<std::string> used = vk->kernels_used();
  EXPECT_NE(std::find(used.begin(), used.end(), "vulkan:top_k_rows"), used.end());
  EXPECT_EQ(vk->compute_top(g.g, tokens, std::vector<hal::TopRequest>(2), got).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bitnet::vulkan::test
