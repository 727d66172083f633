// W2A8 activation quantization: halves to even, the 1e-5 floor, the sum, NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "quant/act_quant.h"

namespace bitnet::quant {
namespace {

TEST(ActQuant, RoundsHalvesToEven) {
  // max|x| = 127 -> s = 1 exactly, so x * s is x and every .5 is an exact tie.
  const std::vector<float> x = {127.0f, 0.5f,  1.5f, 2.5f,    -0.5f,
                                -1.5f,  -2.5f, 3.5f, -126.5f, 0.49999997f};
  const std::vector<int8_t> want = {127, 0, 2, 2, 0, -2, -2, 4, -126, 0};
  std::vector<int8_t> q(x.size());
  int32_t sum = 0;
  const float s = act_quant_i8(x.data(), static_cast<int64_t>(x.size()), q.data(), &sum);
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(q, want);
  EXPECT_EQ(sum, 127 + 0 + 2 + 2 + 0 - 2 - 2 + 4 - 126 + 0);
}

TEST(ActQuant, ScaleAndTies) {
  // max|x| = 2: s = 63.5; x = 1 -> 63.5 ties to even 64, x = -2 -> -127.
  const std::vector<float> x = {2.0f, 1.0f, -1.0f, -2.0f, 0.0f};
  std::vector<int8_t> q(x.size());
  int32_t sum = 0;
  const float s = act_quant_i8(x.data(), 5, q.data(), &sum);
  EXPECT_EQ(s, 63.5f);
  EXPECT_EQ(q, (std::vector<int8_t>{127, 64, -64, -127, 0}));
  EXPECT_EQ(sum, 0);
}

TEST(ActQuant, AllZeroUsesTheFloor) {
  std::vector<float> x(64, 0.0f);
  std::vector<int8_t> q(64, 5);
  int32_t sum = 99;
  const float s = act_quant_i8(x.data(), 64, q.data(), &sum);
  EXPECT_EQ(s, static_cast<float>(127.0 / 1e-5));  // 12,700,000: finite, no division by zero
  EXPECT_EQ(s, 12700000.0f);
  for (int8_t v : q) EXPECT_EQ(v, 0);
  EXPECT_EQ(sum, 0);
}

TEST(ActQuant, TinyInputsBelowTheFloor) {
  // max|x| = 1e-6 < 1e-5: s stays 12.7e6, so x maps to 12.7 -> 13, not to 127.
  const std::vector<float> x = {1e-6f, -1e-6f, 0.0f};
  std::vector<int8_t> q(3);
  int32_t sum = 0;
  act_quant_i8(x.data(), 3, q.data(), &sum);
  EXPECT_EQ(q, (std::vector<int8_t>{13, -13, 0}));
  EXPECT_EQ(sum, 0);
}

// x * s never leaves [-127, 127] by more than float rounding, so -128 is never produced.
TEST(ActQuant, StaysWithinPlusMinus127) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(4096);
  for (auto& v : x) v = dist(rng);
  std::vector<int8_t> q(x.size());
  int32_t sum = 0;
  const float s = act_quant_i8(x.data(), static_cast<int64_t>(x.size()), q.data(), &sum);
  int32_t want_sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_GE(q[i], -127);
    ASSERT_EQ(q[i], static_cast<int8_t>(std::nearbyint(x[i] * s)));
    want_sum += q[i];
  }
  EXPECT_EQ(sum, want_sum);
}

TEST(ActQuant, NanQuantizesToZero) {
  const std::vector<float> x = {NAN, 127.0f, -1.0f};
  std::vector<int8_t> q(3);
  int32_t sum = 0;
  const float s = act_quant_i8(x.data(), 3, q.data(), &sum);
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(q, (std::vector<int8_t>{0, 127, -1}));
  EXPECT_EQ(sum, 126);
}

}  // namespace
}  // namespace bitnet::quant
