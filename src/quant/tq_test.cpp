// TQ2_0 / TQ1_0: hand-computed blocks, ggml's rounding, and the base-3 byte code.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "quant/quant.h"
#include "quant/tq1_0.h"

namespace bitnet::quant {
namespace {

std::vector<float> decode_floats(const std::vector<uint8_t>& codes, float d) {
  std::vector<float> x(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) x[i] = static_cast<float>(codes[i] - 1) * d;
  return x;
}

// Codes {0,1,2,1} for the four 32-element runs of each 128-half, so every qs byte is
// 0b01'10'01'00 = 0x64 (run n in bits 2n..2n+1), then two elements moved to code 2.
TEST(Tq2_0, HandComputedBlock) {
  std::vector<uint8_t> codes(256);
  const uint8_t run_code[4] = {0, 1, 2, 1};
  for (int i = 0; i < 256; ++i) codes[i] = run_code[(i % 128) / 32];
  codes[5] = 2;    // h=0, m=5, n=0: qs[5] bits 1-0 become 10
  codes[231] = 2;  // 231 = 128 + 7 + 32*3: qs[32+7] bits 7-6 become 10
  std::vector<uint8_t> want(66, 0x64);
  want[5] = 0x66;
  want[39] = 0xa4;
  want[64] = 0x00;  // d = 0.5 = fp16 0x3800, little-endian
  want[65] = 0x38;

  const float d = 0.5f;
  auto enc = ternary_encode(GgmlType::kTQ2_0, codes.data(), &d, 256);
  ASSERT_TRUE(enc.ok()) << enc.status().to_string();
  EXPECT_EQ(*enc, want);

  const std::vector<float> x = decode_floats(codes, d);
  auto q = quantize(GgmlType::kTQ2_0, x.data(), 1, 256);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(*q, want);

  std::vector<uint8_t> got(256);
  float scale = 0;
  ASSERT_TRUE(ternary_decode(GgmlType::kTQ2_0, want, 256, got.data(), &scale).ok());
  EXPECT_EQ(got, codes);
  EXPECT_EQ(scale, 0.5f);
  std::vector<float> y(256);
  ASSERT_TRUE(dequantize(GgmlType::kTQ2_0, want, 256, y.data()).ok());
  EXPECT_EQ(y, x);
}

// All codes 1: qs bytes hold 1*81+27+9+3+1 = 121 -> ceil(121*256/243) = 128 = 0x80, qh bytes
// (27+9+3+1)*3 = 120 -> ceil(120*256/243) = 127 = 0x7f. Then four single-trit changes.
TEST(Tq1_0, HandComputedBlock) {
  std::vector<uint8_t> codes(256, 1);
  std::vector<uint8_t> want(54, 0x80);
  for (int m = 48; m < 52; ++m) want[m] = 0x7f;
  codes[0] = 2;  // qs[0] trit 0 (3^4): 202 -> ceil(51712/243) = 213
  want[0] = 213;
  codes[129] = 0;  // 129 = 1 + 32*4: qs[1] trit 4 (3^0): 120 -> 127
  want[1] = 127;
  codes[195] = 2;  // 195 = 160 + 3 + 16*2: qs[35] trit 2 (3^2): 130 -> ceil(33280/243) = 137
  want[35] = 137;
  codes[254] = 0;  // 254 = 240 + 2 + 4*3: qh[2] trit 3 (3^1 after the shift): 117 -> 124
  want[50] = 124;
  want[52] = 0x00;  // d = 0.25 = fp16 0x3400
  want[53] = 0x34;

  const float d = 0.25f;
  auto enc = ternary_encode(GgmlType::kTQ1_0, codes.data(), &d, 256);
  ASSERT_TRUE(enc.ok()) << enc.status().to_string();
  EXPECT_EQ(*enc, want);

  const std::vector<float> x = decode_floats(codes, d);
  auto q = quantize(GgmlType::kTQ1_0, x.data(), 1, 256);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(*q, want);

  std::vector<uint8_t> got(256);
  float scale = 0;
  ASSERT_TRUE(ternary_decode(GgmlType::kTQ1_0, want, 256, got.data(), &scale).ok());
  EXPECT_EQ(got, codes);
  EXPECT_EQ(scale, 0.25f);
  std::vector<float> y(256);
  ASSERT_TRUE(dequantize(GgmlType::kTQ1_0, want, 256, y.data()).ok());
  EXPECT_EQ(y, x);
}

// Every 5-trit value survives the byte code, and every byte (including the 13 the encoder
// never writes) decodes to trits in {0,1,2}.
TEST(Tq1_0, EveryByteValue) {
  std::vector<uint8_t> codes(256, 1), back(256);
  std::vector<uint8_t> block(54);
  for (int t = 0; t < 243; ++t) {
    for (int k = 0, v = t; k < 5; ++k, v /= 3) codes[32 * (4 - k)] = static_cast<uint8_t>(v % 3);
    tq1_0_pack_block(codes.data(), 0, block.data());
    tq1_0_unpack_block(block.data(), back.data());
    for (int n = 0; n < 5; ++n)
      ASSERT_EQ(back[32 * n], codes[32 * n]) << "t=" << t << " trit " << n;
  }
  for (int b = 0; b < 256; ++b) {
    std::memset(block.data(), b, 52);
    tq1_0_unpack_block(block.data(), back.data());
    for (uint8_t c : back) ASSERT_LE(c, 2) << "byte " << b;
  }
}

// ggml rounds x/amax with lroundf: halves go away from zero.
TEST(TqQuantize, RoundsHalvesAwayFromZero) {
  for (GgmlType type : {GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    std::vector<float> x(256, 0.0f);
    x[0] = 1.0f;  // amax = 1, id = 1
    x[1] = 0.5f;
    x[2] = -0.5f;
    x[3] = 0.49999997f;
    x[4] = -0.49999997f;
    x[5] = -1.0f;
    auto q = quantize(type, x.data(), 1, 256);
    ASSERT_TRUE(q.ok());
    std::vector<uint8_t> codes(256);
    float d = 0;
    ASSERT_TRUE(ternary_decode(type, *q, 256, codes.data(), &d).ok());
    EXPECT_EQ(d, 1.0f);
    const uint8_t want[6] = {2, 2, 0, 1, 1, 0};
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(codes[i], want[i]) << ggml_type_name(type) << " x[" << i << "]";
  }
}

// The codes use 1/amax before amax is rounded to fp16 for d.
TEST(TqQuantize, ScaleIsFp16OfAmax) {
  std::vector<float> x(512, 0.0f);
  x[0] = 0.1f;          // block 0: amax 0.1 -> d = fp16(0.1) = 0.0999755859375
  x[1] = -0.05f;        // 0.5 of amax: away from zero -> code 0
  x[256] = -3.0f;       // block 1: amax 3
  x[257] = 1.4999999f;  // just below half of amax -> code 1
  for (GgmlType type : {GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    auto q = quantize(type, x.data(), 2, 256);
    ASSERT_TRUE(q.ok());
    std::vector<uint8_t> codes(512);
    float d[2] = {};
    ASSERT_TRUE(ternary_decode(type, *q, 512, codes.data(), d).ok());
    EXPECT_EQ(d[0], fp16_to_fp32(fp32_to_fp16(0.1f)));
    EXPECT_EQ(d[1], 3.0f);
    EXPECT_EQ(codes[0], 2);
    EXPECT_EQ(codes[1], 0);
    EXPECT_EQ(codes[256], 0);
    EXPECT_EQ(codes[257], 1);
  }
}

// A block whose amax is subnormal: 1/amax overflows; x86 ggml writes code 1 and d = 0.
TEST(TqQuantize, SubnormalBlockIsZero) {
  std::vector<float> x(256, 0.0f);
  x[7] = 1e-40f;
  x[8] = -1e-40f;
  for (GgmlType type : {GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    auto q = quantize(type, x.data(), 1, 256);
    ASSERT_TRUE(q.ok());
    std::vector<uint8_t> codes(256);
    float d = -1;
    ASSERT_TRUE(ternary_decode(type, *q, 256, codes.data(), &d).ok());
    EXPECT_EQ(d, 0.0f);
    for (uint8_t c : codes) ASSERT_EQ(c, 1);
  }
}

}  // namespace
}  // namespace bitnet::quant
