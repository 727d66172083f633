// I2_S: a hand-computed group, bitnet.cpp's quantize rule, and the lossless TQ2_0 conversion.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/fp16.h"
#include "quant/i2s.h"
#include "quant/quant.h"

namespace bitnet::quant {
namespace {

// All codes 1 make every byte 0b01'01'01'01 = 0x55; byte p holds elements p, p+32, p+64, p+96
// in bits 7-6, 5-4, 3-2, 1-0.
TEST(I2s, HandComputedGroup) {
  std::vector<uint8_t> codes(128, 1);
  std::vector<uint8_t> want(64, 0x55);
  codes[0] = 2;  // byte 0, bits 7-6 = 10
  want[0] = 0x95;
  codes[33] = 0;  // byte 1, bits 5-4 = 00
  want[1] = 0x45;
  codes[66] = 2;  // byte 2, bits 3-2 = 10
  want[2] = 0x59;
  codes[99] = 0;  // byte 3, bits 1-0 = 00
  want[3] = 0x54;
  codes[127] = 2;  // byte 31, bits 1-0 = 10
  want[31] = 0x56;
  const uint8_t scale_bytes[4] = {0x00, 0x00, 0x40, 0x3f};  // 0.75f
  for (int i = 0; i < 4; ++i) want[32 + i] = scale_bytes[i];
  for (int i = 36; i < 64; ++i) want[i] = 0;  // pad: zeros when we write it

  const float scale = 0.75f;
  auto enc = ternary_encode(GgmlType::kI2_S, codes.data(), &scale, 128);
  ASSERT_TRUE(enc.ok()) << enc.status().to_string();
  EXPECT_EQ(*enc, want);

  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i) x[i] = static_cast<float>(codes[i] - 1) * scale;
  auto q = quantize(GgmlType::kI2_S, x.data(), 1, 128);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(*q, want);

  std::vector<uint8_t> got(128);
  float s = 0;
  ASSERT_TRUE(ternary_decode(GgmlType::kI2_S, want, 128, got.data(), &s).ok());
  EXPECT_EQ(got, codes);
  EXPECT_EQ(s, 0.75f);
  std::vector<float> y(128);
  ASSERT_TRUE(dequantize(GgmlType::kI2_S, want, 128, y.data()).ok());
  EXPECT_EQ(y, x);
}

// The pad bytes carry no meaning: bitnet.cpp's files have leftover heap bytes there.
TEST(I2s, PadBytesAreIgnored) {
  std::vector<uint8_t> codes(256, 2);
  const float scale = 2.0f;
  auto enc = ternary_encode(GgmlType::kI2_S, codes.data(), &scale, 256);
  ASSERT_TRUE(enc.ok());
  for (size_t i = 64 + 4; i < enc->size(); ++i) (*enc)[i] = static_cast<uint8_t>(0xa5 + i);
  std::vector<float> y(256);
  ASSERT_TRUE(dequantize(GgmlType::kI2_S, *enc, 256, y.data()).ok());
  for (float v : y) ASSERT_EQ(v, 2.0f);
}

// quantize_i2_s: scale = max|x| over the whole tensor; codes are signs with an absolute
// 1e-6 dead zone, not a rounding to the nearest of {-scale, 0, scale}.
TEST(I2s, QuantizeRule) {
  std::vector<float> x(256, 0.0f);
  x[0] = 9.9e-7f;  // below the dead zone -> 0
  x[1] = -9.9e-7f;
  x[2] = 1.1e-6f;   // above it -> +scale, however small
  x[3] = -1.1e-6f;  // -> -scale
  x[4] = 0.3f;      // not ternary: snaps to +scale
  x[200] = -1.5f;   // the max, in the second row
  auto q = quantize(GgmlType::kI2_S, x.data(), 2, 128);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  std::vector<uint8_t> codes(256);
  float scale = 0;
  ASSERT_TRUE(ternary_decode(GgmlType::kI2_S, *q, 256, codes.data(), &scale).ok());
  EXPECT_EQ(scale, 1.5f);
  const uint8_t want[5] = {1, 1, 2, 0, 2};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(codes[i], want[i]) << "x[" << i << "]";
  EXPECT_EQ(codes[200], 0);
  EXPECT_EQ(codes[5], 1);
}

TEST(I2s, ReverseBitPairs) {
  EXPECT_EQ(reverse_bit_pairs(0x1b), 0xe4);  // fields 0,1,2,3 -> 3,2,1,0
  EXPECT_EQ(reverse_bit_pairs(0x55), 0x55);
  EXPECT_EQ(reverse_bit_pairs(0x95), 0x56);
  for (int b = 0; b < 256; ++b) {
    ASSERT_EQ(reverse_bit_pairs(reverse_bit_pairs(static_cast<uint8_t>(b))), b);
  }
}

// Random ternary tensors with an fp16-exact scale and one all-zero 256-block: converting either
// way gives exactly what the other format's owner quantizer makes of the decoded floats.
TEST(I2s, ConvertsToAndFromTq2_0Losslessly) {
  const int64_t n = 4 * 256;
  std::mt19937 rng(7);
  std::vector<uint8_t> codes(n);
  for (auto& c : codes) c = static_cast<uint8_t>(rng() % 3);
  for (int64_t i = 512; i < 768; ++i) codes[i] = 1;  // block 2: every weight 0
  const float scale = 0.0625f + 0.001953125f;        // exact in fp16
  auto i2s = ternary_encode(GgmlType::kI2_S, codes.data(), &scale, n);
  ASSERT_TRUE(i2s.ok());
  std::vector<float> x(n);
  ASSERT_TRUE(dequantize(GgmlType::kI2_S, *i2s, n, x.data()).ok());

  auto tq = i2s_to_tq2_0(*i2s, n);
  ASSERT_TRUE(tq.ok()) << tq.status().to_string();
  auto tq_ref = quantize(GgmlType::kTQ2_0, x.data(), 4, 256);
  ASSERT_TRUE(tq_ref.ok());
  EXPECT_EQ(*tq, *tq_ref);

  auto back = tq2_0_to_i2s(*tq, n);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, *i2s);
  auto i2s_ref = quantize(GgmlType::kI2_S, x.data(), 4, 256);
  ASSERT_TRUE(i2s_ref.ok());
  EXPECT_EQ(*back, *i2s_ref);
}

TEST(I2s, ConversionRefusesLossyCases) {
  const int64_t n = 512;
  std::vector<uint8_t> codes(n, 2);
  const float not_half = 0.1f;  // fp16 would round it
  auto i2s = ternary_encode(GgmlType::kI2_S, codes.data(), &not_half, n);
  ASSERT_TRUE(i2s.ok());
  EXPECT_EQ(i2s_to_tq2_0(*i2s, n).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(i2s_to_tq2_0(*i2s, 256).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(i2s_to_tq2_0(*i2s, 128).status().code(), StatusCode::kUnsupported);

  const float two_scales[2] = {0.5f, 0.25f};
  auto tq = ternary_encode(GgmlType::kTQ2_0, codes.data(), two_scales, n);
  ASSERT_TRUE(tq.ok());
  EXPECT_EQ(tq2_0_to_i2s(*tq, n).status().code(), StatusCode::kUnsupported);
  // A d = 0 block holds zeros whatever its codes say: it converts to code 1.
  const float one_zero[2] = {0.5f, 0.0f};
  tq = ternary_encode(GgmlType::kTQ2_0, codes.data(), one_zero, n);
  ASSERT_TRUE(tq.ok());
  auto i2s_back = tq2_0_to_i2s(*tq, n);
  ASSERT_TRUE(i2s_back.ok()) << i2s_back.status().to_string();
  std::vector<float> a(n), b(n);
  ASSERT_TRUE(dequantize(GgmlType::kTQ2_0, *tq, n, a.data()).ok());
  ASSERT_TRUE(dequantize(GgmlType::kI2_S, *i2s_back, n, b.data()).ok());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace bitnet::quant
