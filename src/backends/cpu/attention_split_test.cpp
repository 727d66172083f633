#include "backends/cpu/attention_split.h"

#include <gtest/gtest.h>

#include <vector>

namespace bitnet::cpu {
namespace {

// Every (token, head item) is covered once: whole where the token attends to at most
// kAttentionPartPositions positions or splitting is off, else by parts that tile [0, n_pos)
// in order, the last one shorter; a token's parts are the same whatever the other tokens.
TEST(AttentionSplit, PartsTileEachLongContext) {
  constexpr int64_t P = kAttentionPartPositions;
  const std::vector<int32_t> pos = {0, static_cast<int32_t>(P - 1), static_cast<int32_t>(P), static_cast<int32_t>(3 * P + 6)};
  const std::vector<int64_t> want_parts = {1, 1, 2, 4};
  for (const bool split : {true, false}) {
    AttentionSplit s;
    s.plan(pos, 5, 4, 128, split);
    std::vector<std::vector<int64_t>> covered(pos.size() * 5);
    int64_t expected_items = 0;
    for (size_t t = 0; t < pos.size(); ++t) expected_items += 5 * (split ? want_parts[t] : 1);
    ASSERT_EQ(s.n_items(), expected_items);
    for (int64_t i = 0; i < s.n_items(); ++i) {
      const AttentionSplit::Item it = s.item(i);
      const auto t = static_cast<size_t>(it.token);
      ASSERT_LT(t, pos.size());
      EXPECT_EQ(it.n_parts, split ? want_parts[t] : 1) << i;
      auto& c = covered[t * 5 + static_cast<size_t>(it.head_item)];
      EXPECT_EQ(it.part, static_cast<int64_t>(c.size())) << "parts in order, " << i;
      EXPECT_EQ(it.j_begin, c.empty() ? 0 : c.back()) << i;
      EXPECT_GT(it.j_end, it.j_begin) << i;
      EXPECT_LE(it.j_end - it.j_begin, it.n_parts > 1 ? P : pos[t] + 1) << i;
      c.push_back(it.j_end);
    }
    for (size_t t = 0; t < pos.size(); ++t) {
      for (int64_t hi = 0; hi < 5; ++hi) EXPECT_EQ(covered[t * 5 + static_cast<size_t>(hi)].back(), pos[t] + 1) << t;
    }
  }
  AttentionSplit alone;
  alone.plan(std::vector<int32_t>{pos[3]}, 5, 4, 128, true);
  EXPECT_EQ(alone.item(0).n_parts, 4) << "the same parts without the other tokens";
}

// The last part of a (token, head item) to finish is told so, once, whatever the order; the
// counters start again at every plan.
TEST(AttentionSplit, TheLastPartToFinishCombines) {
  AttentionSplit s;
  const std::vector<int32_t> pos = {static_cast<int32_t>(2 * kAttentionPartPositions)};  // 3 parts
  for (int round = 0; round < 2; ++round) {
    s.plan(pos, 2, 4, 8, true);
    ASSERT_EQ(s.n_items(), 6);
    int last = 0;
    for (int64_t i : {5, 0, 3, 4, 1, 2}) {
      if (s.finish_part(s.item(i))) {
        ++last;
        EXPECT_TRUE(i == 4 || i == 2) << i;  // head item 1: 5, 3, 4; head item 0: 0, 1, 2
      }
    }
    EXPECT_EQ(last, 2);
  }
}

// The merge weighs each part by exp(m_c - m) against the parts' total: two parts that are the
// same distribution give it back; a part whose maximum is far below the other's adds nothing.
TEST(AttentionSplit, CombineWeighsPartsByTheirMaxima) {
  const std::vector<float> outs = {2.0f, 4.0f, 2.0f, 4.0f};  // 2 parts x 1 head x 2 dims: sum p v
  const std::vector<float> maxes = {1.0f, 1.0f};
  const std::vector<double> sums = {2.0, 2.0};
  std::vector<float> out(2);
  combine_attention_parts(2, 1, 2, outs.data(), maxes.data(), sums.data(), out.data());
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], 2.0f);
  const std::vector<float> far = {0.0f, -200.0f};
  combine_attention_parts(2, 1, 2, outs.data(), far.data(), sums.data(), out.data());
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], 2.0f);
}

}  // namespace
}  // namespace bitnet::cpu
