// Shared by the device tests of Backend::compute_top (OpenCL, Vulkan, CUDA/HIP): logits rows
// that exercise the selection (ties at the boundary, NaN, -0, infinities, ties everywhere),
// the requests run on them, and the check of what a device gave back against hal::select_top.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "hal/top.h"

namespace bitnet::hal::testing {

inline constexpr int64_t kTopTestRows = 5;

// kTopTestRows rows of n_cols (>= 2300): row 0 random, row 1 with 60 entries tied at the top
// (k = 40 takes the first 40 ids), row 2 with NaN, +inf, -0 and +0, row 3 ties everywhere
// (i % 7), row 4 random.
inline std::vector<float> top_test_rows(int64_t n_cols) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(kTopTestRows * n_cols));
  for (float& x : v) x = normal(rng);
  const auto at = [&](int64_t r, int64_t i) -> float& { return v[static_cast<size_t>(r * n_cols + i)]; };
  for (int64_t i = 0; i < 60; ++i) at(1, 100 + 37 * i) = 50.0f;
  at(2, 0) = std::numeric_limits<float>::quiet_NaN();
  at(2, 3) = std::numeric_limits<float>::infinity();
  at(2, 4) = -0.0f;
  at(2, 5) = 0.0f;
  for (int64_t i = 0; i < n_cols; ++i) at(3, i) = static_cast<float>(i % 7);
  return v;
}

// One request per row: k = 1 (greedy), 40 with named ids (two of them outside the row), 6, 3000,
// and more than the row (all of it).
inline std::vector<TopRequest> top_test_requests(int64_t n_cols) {
  const auto last = static_cast<int32_t>(n_cols) - 1;
  return {{1, {}}, {40, {2, 9, last, -5, last + 1}}, {6, {0, 4}}, {3000, {}}, {static_cast<int32_t>(n_cols) + 7, {}}};
}

// got (a backend's compute_top output for req over rows `logits` of n_cols) equals select_top
// of each row: the same top entries (in any order) and then the same named entries.
inline void expect_top_matches(std::span<const float> logits, int64_t n_cols, std::span<const TopRequest> req,
                               std::vector<std::vector<TokenLogit>> got) {
  ASSERT_EQ(got.size(), req.size());
  for (size_t r = 0; r < req.size(); ++r) {
    std::vector<TokenLogit> want;
    select_top(logits.subspan(r * static_cast<size_t>(n_cols), static_cast<size_t>(n_cols)), req[r], want);
    ASSERT_EQ(got[r].size(), want.size()) << "row " << r;
    const auto k = static_cast<std::ptrdiff_t>(top_count(req[r], n_cols));
    std::sort(got[r].begin(), got[r].begin() + k, ranks_before);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[r][i].id, want[i].id) << "row " << r << " entry " << i;
      EXPECT_TRUE(got[r][i].logit == want[i].logit || (std::isnan(got[r][i].logit) && std::isnan(want[i].logit)))
          << "row " << r << " entry " << i;
    }
  }
}

}  // namespace bitnet::hal::testing
