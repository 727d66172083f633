#include "model/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

namespace bitnet {
namespace {

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

TEST(Sampler, GreedyTakesArgmaxAndLowestIdOnTies) {
  Sampler s(greedy());
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, 2.0f, -1.0f, 1.9f}, {}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{3.0f, 1.0f, 3.0f}, {}), 0);
}

// Greedy without a penalty reads the logits directly; with a penalty that touches nothing (no
// history) it goes through the candidate list. Both pick the same first maximum.
TEST(Sampler, GreedyFastPathEqualsTheCandidatePath) {
  SamplingParams with_penalty = greedy();
  with_penalty.repeat_penalty = 1.5f;
  Sampler fast(greedy()), slow(with_penalty);
  uint32_t x = 12345;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> logits(1000 + trial);
    for (float& l : logits) {
      x = x * 1664525u + 1013904223u;
      l = static_cast<float>((x >> 24) % 16) - 8.0f;  // few values: many ties
    }
    EXPECT_EQ(fast.sample(logits, {}), slow.sample(logits, {})) << trial;
  }
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p = greedy();
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  // Token 0 (logit 3) was seen: 3/2 = 1.5 < 2 -> token 1 wins.
  EXPECT_EQ(s.sample(std::vector<float>{3.0f, 2.0f}, std::vector<int32_t>{0}), 1);
  // Negative logits get more negative: -1 * 2 = -2 < -1.5.
  EXPECT_EQ(s.sample(std::vector<float>{-1.0f, -1.5f}, std::vector<int32_t>{0}), 1);
  // Outside repeat_last_n the penalty does not apply.
  p.repeat_last_n = 1;
  Sampler s2(p);
  EXPECT_EQ(s2.sample(std::vector<float>{3.0f, 2.0f}, std::vector<int32_t>{0, 1}), 0);
}

TEST(Sampler, SameSeedSameSequence) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 42;
  std::vector<float> logits(100);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  Sampler a(p), b(p);
  std::vector<int32_t> sa, sb;
  for (int i = 0; i < 200; ++i) {
    sa.push_back(a.sample(logits, {}));
    sb.push_back(b.sample(logits, {}));
  }
  EXPECT_EQ(sa, sb);
  p.seed = 43;
  Sampler c(p);
  std::vector<int32_t> sc;
  for (int i = 0; i < 200; ++i) sc.push_back(c.sample(logits, {}));
  EXPECT_NE(sa, sc);
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  Sampler s(p);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(std::vector<float>{0.0f, 0.5f, 0.4f}, {}), 1);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.min_p = 0.0f;
  p.top_p = 0.5f;
  Sampler s(p);
  // Probabilities ~ 0.665, 0.245, 0.09: the nucleus for 0.5 is token 0 alone.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(std::vector<float>{2.0f, 1.0f, 0.0f}, {}), 0);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.2f;
  Sampler s(p);
  // p ~ 0.49, 0.49, 0.02: token 2 is below 0.2 * 0.49 and never drawn; 0 and 1 both are.
  std::map<int32_t, int> seen;
  for (int i = 0; i < 400; ++i) seen[s.sample(std::vector<float>{3.0f, 3.0f, 0.0f}, {})]++;
  EXPECT_EQ(seen.count(2), 0u);
  EXPECT_GT(seen[0], 100);
  EXPECT_GT(seen[1], 100);
}

TEST(Sampler, TemperatureFlattensTheDistribution) {
  SamplingParams p;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  const std::vector<float> logits = {1.0f, 0.0f};
  int hot = 0, cold = 0;
  p.temperature = 10.0f;
  Sampler h(p);
  p.temperature = 0.1f;
  Sampler c(p);
  for (int i = 0; i < 2000; ++i) {
    hot += h.sample(logits, {}) == 1;
    cold += c.sample(logits, {}) == 1;
  }
  EXPECT_GT(hot, 800);   // ~ 0.475 * 2000
  EXPECT_LT(cold, 10);   // ~ 4.5e-5 * 2000
}

// sample_top() on select_top(wants()) draws what sample() draws on the whole row, token after
// token with one generator each, over random logits with many ties, every penalty window and
// sampling setting: the top-k after a penalty lie among the top_k + P before it and the P
// penalized ids.
TEST(Sampler, TheTopPartOfTheRowDrawsWhatTheWholeRowDraws) {
  uint32_t x = 777;
  const auto next = [&] { return x = x * 1664525u + 1013904223u; };
  for (int trial = 0; trial < 120; ++trial) {
    SamplingParams p;
    p.temperature = trial % 5 == 0 ? 0.0f : 0.3f + static_cast<float>(trial % 7) * 0.3f;
    p.top_k = 1 + static_cast<int32_t>(next() % 60);
    p.top_p = trial % 3 == 0 ? 1.0f : 0.9f;
    p.min_p = trial % 4 == 0 ? 0.0f : 0.05f;
    p.repeat_penalty = trial % 6 == 1 ? 1.0f : (trial % 2 == 0 ? 1.3f : 0.8f);  // < 1 raises the repeated ids
    p.repeat_last_n = trial % 8 == 3 ? -1 : static_cast<int32_t>(next() % 70);
    p.seed = trial;
    Sampler whole(p), part(p);
    const int n_vocab = 50 + static_cast<int>(next() % 400);
    std::vector<int32_t> history;
    for (int step = 0; step < 12; ++step) {
      std::vector<float> logits(static_cast<size_t>(n_vocab));
      for (float& l : logits) l = static_cast<float>(static_cast<int>(next() >> 24) % 24 - 12) * 0.25f;  // ties
      if (trial % 9 == 4) logits[next() % logits.size()] = std::numeric_limits<float>::quiet_NaN();  // ranks last
      if (trial % 9 == 5) logits[0] = std::numeric_limits<float>::quiet_NaN();
      const std::optional<hal::TopRequest> req = part.wants(history);
      ASSERT_TRUE(req.has_value());
      std::vector<hal::TokenLogit> top;
      hal::select_top(logits, *req, top);
      std::reverse(top.begin(), top.end());  // any order
      const int32_t a = whole.sample(logits, history);
      const int32_t b = part.sample_top(top, history);
      ASSERT_EQ(a, b) << "trial " << trial << " step " << step;
      history.push_back(a);
      history.push_back(static_cast<int32_t>(next() % static_cast<uint32_t>(n_vocab)));
    }
  }
}

// A NaN logit never wins, wherever it is (the backends' top-k selection ranks it last too).
TEST(Sampler, GreedyPassesOverANan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Sampler s(greedy());
  EXPECT_EQ(s.sample(std::vector<float>{nan, 1.0f, 3.0f, 2.0f}, {}), 2);
  SamplingParams pen = greedy();
  pen.repeat_penalty = 1.5f;
  EXPECT_EQ(Sampler(pen).sample(std::vector<float>{nan, 1.0f, 3.0f, 2.0f}, {}), 2);
}

TEST(Sampler, SamplingWithTopKOffWantsTheWholeRow) {
  SamplingParams p;
  p.top_k = 0;
  EXPECT_FALSE(Sampler(p).wants({}).has_value());
  p.temperature = 0.0f;  // greedy: the largest logit only
  const std::optional<hal::TopRequest> req = Sampler(p).wants({});
  ASSERT_TRUE(req.has_value());
  EXPECT_EQ(req->k, 1);
  EXPECT_TRUE(req->also.empty());
  p.repeat_penalty = 1.1f;
  const std::vector<int32_t> history = {5, 9, 5, 2};
  const std::optional<hal::TopRequest> pen = Sampler(p).wants(history);
  EXPECT_EQ(pen->k, 4);  // 1 + the three distinct ids
  EXPECT_EQ(pen->also, (std::vector<int32_t>{2, 5, 9}));
}

}  // namespace
}  // namespace bitnet
