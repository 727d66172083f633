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

}  // namespace
}  // namespace bitnet::hal
