#include "backends/cuda/top_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "hal/top.h"

namespace bitnet::cuda {
namespace {

TEST(TopMath, KeysOrderAsTheLogitsRank) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ascending = {-inf, -3e38f, -1.0f, -1e-40f, 0.0f, 1e-40f, 1.0f, 2.5f, 3e38f, inf};
  for (size_t i = 1; i < ascending.size(); ++i) EXPECT_LT(top_key(ascending[i - 1]), top_key(ascending[i])) << i;
  EXPECT_EQ(top_key(-0.0f), top_key(0.0f));  // equal logits: the id decides, as in ranks_before
  EXPECT_EQ(top_key(std::numeric_limits<float>::quiet_NaN()), 0u);
  EXPECT_LT(top_key(std::numeric_limits<float>::quiet_NaN()), top_key(-inf));
}

TEST(TopMath, TheDigitOfTheNeedthLargestKey) {
  uint32_t hist[256] = {};
  hist[200] = 3;
  hist[100] = 5;
  hist[7] = 2;
  uint32_t need = 4, count = 0;
  EXPECT_EQ(top_digit(hist, 1, need, count), 100u);  // 3 above, then the first of bin 100
  EXPECT_EQ(need, 1u);
  EXPECT_EQ(count, 5u);
  need = 3;
  EXPECT_EQ(top_digit(hist, 1, need, count), 200u);
  EXPECT_EQ(need, 3u);
  need = 10;
  EXPECT_EQ(top_digit(hist, 1, need, count), 7u);
  EXPECT_EQ(need, 2u);
}

// The kernel's algorithm, run serially, selects hal::select_top's set: random rows with many
// ties (few values), NaN, -0 and infinities, k from 1 past the row's length.
TEST(TopMath, TheTwinSelectsWhatTheHostSelects) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 3000);
    std::vector<float> row(static_cast<size_t>(n));
    const int levels = trial % 3 == 0 ? 4 : 1000;
    for (float& v : row) v = static_cast<float>(static_cast<int>(rng() % static_cast<unsigned>(levels)) - levels / 2) * 0.37f;
    if (trial % 5 == 0) row[rng() % row.size()] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 7 == 0) row[rng() % row.size()] = -0.0f;
    if (trial % 11 == 0) row[rng() % row.size()] = -std::numeric_limits<float>::infinity();
    const int64_t k = trial % 13 == 0 ? n + 3 : 1 + static_cast<int64_t>(rng() % 80);
    std::vector<TopEntry> twin;
    top_select_twin(row.data(), n, std::min(k, n), twin);
    std::vector<hal::TokenLogit> got;
    for (const TopEntry& e : twin) got.push_back({e.id, e.logit});
    std::sort(got.begin(), got.end(), hal::ranks_before);
    std::vector<hal::TokenLogit> want;
    hal::select_top(row, {static_cast<int32_t>(k), {}}, want);
    ASSERT_EQ(got.size(), want.size()) << trial;
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i].id, want[i].id) << trial << " " << i;
  }
}

}  // namespace
}  // namespace bitnet::cuda
