#include "hal/top.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace bitnet::hal {
namespace {

// The reference: every entry sorted by ranks_before, the first k kept.
std::vector<TokenLogit> sorted_prefix(const std::vector<float>& row, int64_t k) {
  std::vector<TokenLogit> all;
  for (size_t i = 0; i < row.size(); ++i) all.push_back({static_cast<int32_t>(i), row[i]});
  std::sort(all.begin(), all.end(), ranks_before);
  all.resize(static_cast<size_t>(std::min<int64_t>(k, static_cast<int64_t>(all.size()))));
  return all;
}

bool same(const TokenLogit& a, const TokenLogit& b) {
  return a.id == b.id && (a.logit == b.logit || (std::isnan(a.logit) && std::isnan(b.logit)));
}

TEST(SelectTop, TheKLargestWithTiesToTheLowerIdsThenTheNamedIds) {
  uint32_t x = 99;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> row(1 + trial * 7 % 300);
    for (float& v : row) {
      x = x * 1664525u + 1013904223u;
      v = static_cast<float>(static_cast<int>(x >> 27) - 16);  // 32 values: ties
    }
    if (trial % 10 == 0) row[row.size() / 2] = std::numeric_limits<float>::quiet_NaN();
    if (trial % 7 == 0) row[0] = -std::numeric_limits<float>::infinity();
    TopRequest req;
    req.k = trial % 50;
    if (trial % 3 == 0) req.k = static_cast<int32_t>(row.size()) + 5;  // more than the row
    req.also = {0, static_cast<int32_t>(row.size()) - 1, -3, static_cast<int32_t>(row.size())};  // two outside
    std::vector<TokenLogit> got;
    select_top(row, req, got);
    const std::vector<TokenLogit> want = sorted_prefix(row, req.k);
    ASSERT_EQ(got.size(), want.size() + 2) << trial;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(same(got[i], want[i])) << trial << " " << i;
    EXPECT_EQ(got[want.size()].id, 0);
    EXPECT_EQ(got[want.size() + 1].id, static_cast<int32_t>(row.size()) - 1);
    EXPECT_EQ(top_count(req, static_cast<int64_t>(row.size())), static_cast<int64_t>(want.size()));
  }
}

// Rows of thousands, where select_top skips whole blocks below its heap's worst entry: rising,
// falling and random rows, ties, NaNs (also many: the worst entry itself a NaN), k from 1 up.
TEST(SelectTop, LongRowsEqualTheSortedReference) {
  uint32_t x = 7;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<float> row(static_cast<size_t>(1000 + trial * 211 % 4000));
    for (size_t i = 0; i < row.size(); ++i) {
      x = x * 1664525u + 1013904223u;
      const float r = static_cast<float>(static_cast<int>(x >> 22) - 512);  // 1024 values: ties
      switch (trial % 4) {
        case 0: row[i] = r; break;
        case 1: row[i] = static_cast<float>(i % 700);  // rising with restarts
        break;
        case 2: row[i] = -static_cast<float>(i) + (i % 97 == 0 ? 5000.0f : 0.0f);  // falling, rare spikes
        break;
        default: row[i] = (x >> 31) != 0 ? nan : r;  // half NaN
      }
    }
    TopRequest req;
    req.k = std::vector<int32_t>{1, 2, 40, 3000}[static_cast<size_t>(trial % 4 + trial / 4) % 4];
    std::vector<TokenLogit> got;
    select_top(row, req, got);
    const std::vector<TokenLogit> want = sorted_prefix(row, req.k);
    ASSERT_EQ(got.size(), want.size()) << trial;
    for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(same(got[i], want[i])) << trial << " " << i;
  }
}

TEST(SelectTop, ANanRanksAfterEveryNumber) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(ranks_before({5, -1e30f}, {1, nan}));
  EXPECT_FALSE(ranks_before({1, nan}, {5, -1e30f}));
  EXPECT_TRUE(ranks_before({1, nan}, {2, nan}));
  std::vector<TokenLogit> got;
  select_top(std::vector<float>{nan, 1.0f, nan, 0.0f}, {2, {}}, got);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].id, 1);
  EXPECT_EQ(got[1].id, 3);
}

TEST(TopPlan, CountsOffsetsAndTheIdsInsideTheRow) {
  const std::vector<TopRequest> req = {{5, {1, -1, 99}}, {0, {}}, {200, {7}}};
  TopPlan plan;
  ASSERT_TRUE(plan_top(req, 100, plan));
  EXPECT_EQ(plan.k()[0], 5);
  EXPECT_EQ(plan.k()[1], 0);
  EXPECT_EQ(plan.k()[2], 100);  // clamped to the row
  const std::vector<int32_t> out_begin(plan.out_begin(), plan.out_begin() + 4), also_begin(plan.also_begin(), plan.also_begin() + 4);
  EXPECT_EQ(out_begin, (std::vector<int32_t>{0, 7, 7, 108}));  // 5 + 2 ids (-1 dropped), 0, 100 + 1
  EXPECT_EQ(also_begin, (std::vector<int32_t>{0, 2, 2, 3}));
  EXPECT_EQ(std::vector<int32_t>(plan.also(), plan.also() + 3), (std::vector<int32_t>{1, 99, 7}));
  EXPECT_EQ(plan.words.size(), static_cast<size_t>(TopPlan::also_offset(3) + 3));
  EXPECT_EQ(plan.n_out, 108);
}

}  // namespace
}  // namespace bitnet::hal
