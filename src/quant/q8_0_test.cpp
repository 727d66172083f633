// Q8_0: a hand-computed block (ggml rounds halves away from zero) and degenerate blocks.
#include <gtest/gtest.h>

#include <vector>

#include "quant/quant.h"

namespace bitnet::quant {
namespace {

TEST(Q8_0, HandComputedBlock) {
  // amax = 127 -> d = 1 (fp16 0x3c00), id = 1: qs = roundf(x).
  std::vector<float> x(32, 0.0f);
  const float xs[8] = {127.0f, -127.0f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 0.49999997f};
  for (int i = 0; i < 8; ++i) x[i] = xs[i];
  x[31] = 100.25f;
  std::vector<uint8_t> want(34, 0);
  want[0] = 0x00;
  want[1] = 0x3c;
  const int8_t qs[8] = {127, -127, 1, -1, 2, 3, -3, 0};
  for (int i = 0; i < 8; ++i) want[2 + i] = static_cast<uint8_t>(qs[i]);
  want[2 + 31] = 100;

  auto q = quantize(GgmlType::kQ8_0, x.data(), 1, 32);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(*q, want);

  std::vector<float> y(32);
  ASSERT_TRUE(dequantize(GgmlType::kQ8_0, want, 32, y.data()).ok());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], static_cast<float>(qs[i]));
  EXPECT_EQ(y[31], 100.0f);
}

TEST(Q8_0, ScaleIsAmaxOver127) {
  std::vector<float> x(64, 0.0f);
  x[0] = 1.0f;   // block 0: d = 1/127 -> fp16 0x2008 (0.0078773...)
  x[1] = -0.5f;  // id = 1/d is exactly 127 in float: -63.5 rounds away from zero to -64
  x[40] = 0.0f;  // block 1 all zero: d = 0, qs = 0
  auto q = quantize(GgmlType::kQ8_0, x.data(), 2, 32);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ((*q)[0], 0x08);
  EXPECT_EQ((*q)[1], 0x20);
  EXPECT_EQ(static_cast<int8_t>((*q)[2]), 127);
  EXPECT_EQ(static_cast<int8_t>((*q)[3]), -64);
  for (int i = 34; i < 68; ++i) EXPECT_EQ((*q)[i], 0) << i;
}

TEST(Q8_0, SubnormalBlockIsZero) {
  std::vector<float> x(32, 0.0f);
  x[3] = 1e-39f;  // d = amax/127 is subnormal, 1/d overflows
  auto q = quantize(GgmlType::kQ8_0, x.data(), 1, 32);
  ASSERT_TRUE(q.ok());
  for (uint8_t b : *q) EXPECT_EQ(b, 0);
}

}  // namespace
}  // namespace bitnet::quant
