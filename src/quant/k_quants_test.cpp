// The K super-block formats and IQ4: hand-built blocks (d = 1 in fp16) whose expected values
// are worked out in the comments, checking every packed field; zero blocks, round-trip error,
// what re-quantization preserves, and the Q8_K dot products (Q2_K..Q6_K, IQ4_XS).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "quant/iq4.h"
#include "quant/q2_k_q3_k.h"
#include "quant/q6_k.h"
#include "quant/k_quant_util.h"
#include "quant/q8_k.h"
#include "quant/quant.h"
#include "quant/test_util.h"

namespace bitnet::quant {
namespace {

using testing::Dist;
using testing::dequantized;
using testing::quantized;

void put_f16(std::vector<uint8_t>& b, size_t at, float v) {
  const uint16_t h = fp32_to_fp16(v);
  b[at] = static_cast<uint8_t>(h & 0xff);
  b[at + 1] = static_cast<uint8_t>(h >> 8);
}

// Every element of [begin, end) but `except` equals want.
void expect_range(const std::vector<float>& y, int begin, int end, float want, int except = -1) {
  for (int e = begin; e < end; ++e) {
    if (e != except) {
      EXPECT_EQ(y[e], want) << "element " << e;
    }
  }
}

TEST(Q2_K, HandBuiltBlock) {
  std::vector<uint8_t> b(84, 0);
  put_f16(b, 80, 1.0f);  // d
  put_f16(b, 82, 0.5f);  // dmin
  b[0] = 0x31;           // sub-block 0: scale 1, min 3 -> y = q - 1.5
  b[5] = 0x02;           // sub-block 5: scale 2, min 0 -> y = 2q
  b[9] = 0x13;           // sub-block 9: scale 3, min 1 -> y = 3q - 0.5
  // Element e = 128h + 32j + r has its code in qs[32h + r] bits 2j..2j+1.
  b[16 + 1] = 0x03;   // element 1 (h0 j0 r1): q = 3 -> 1.5
  b[16 + 17] = 0x20;  // element 81 (h0 j2 r17): q = 2 -> 4
  b[16 + 54] = 0x01;  // element 150 (h1 j0 r22): q = 1 -> 2.5
  const std::vector<float> y = dequantized(GgmlType::kQ2_K, b, 256);
  EXPECT_EQ(y[1], 1.5f);
  EXPECT_EQ(y[81], 4.0f);
  EXPECT_EQ(y[150], 2.5f);
  expect_range(y, 0, 16, -1.5f, 1);
  expect_range(y, 16, 80, 0.0f);
  expect_range(y, 80, 96, 0.0f, 81);
  expect_range(y, 96, 144, 0.0f);
  expect_range(y, 144, 160, -0.5f, 150);
  expect_range(y, 160, 256, 0.0f);
}

TEST(Q3_K, HandBuiltBlock) {
  std::vector<uint8_t> b(110, 0);
  put_f16(b, 108, 1.0f);
  // 6-bit scales, stored value s6 means s6 - 32. Every sub-block 32 (i.e. 0): low 4 bits 0,
  // top bits 2 -> scales[8..11] = 0xAA. Then sub-block 0 = 33 (+1): scales[0] low nibble 1;
  // sub-block 10 = 63 (+31): scales[2] high nibble 15, scales[10] bits 4-5 = 3;
  // sub-block 13 = 30 (-2): scales[5] high nibble 14, scales[9] bits 6-7 = 1.
  const uint8_t scales[12] = {0x01, 0, 0xF0, 0, 0, 0xE0, 0, 0, 0xAA, 0x6A, 0xBA, 0xAA};
  std::memcpy(b.data() + 96, scales, 12);
  for (int s = 0; s < 16; ++s) {
    const int want = s == 0 ? 33 : s == 10 ? 63 : s == 13 ? 30 : 32;
    EXPECT_EQ(q3_K_scale(b.data() + 96, s), want) << s;
  }
  // Code = low2 - (hmask bit ? 0 : 4); all zero bytes give -4. hmask[e % 32] bit e / 32.
  b[5] = 0x21;        // hmask[5]: high bits of elements 5 and 165
  b[32 + 5] = 0x03;   // element 5 (h0 j0 r5): low2 3, high -> 3 -> y = 3
  b[32 + 37] = 0x04;  // element 165 (h1 j1 r5): low2 1, high -> 1 -> y = 31
  b[32 + 60] = 0x20;  // element 220 (h1 j2 r28): low2 2, no high -> -2 -> y = -2 * -2 = 4
  const std::vector<float> y = dequantized(GgmlType::kQ3_K, b, 256);
  EXPECT_EQ(y[5], 3.0f);
  EXPECT_EQ(y[165], 31.0f);
  EXPECT_EQ(y[220], 4.0f);
  expect_range(y, 0, 16, -4.0f, 5);
  expect_range(y, 16, 160, 0.0f);
  expect_range(y, 160, 176, -124.0f, 165);
  expect_range(y, 176, 208, 0.0f);
  expect_range(y, 208, 224, 8.0f, 220);
  expect_range(y, 224, 256, 0.0f);
}

// Q4_K/Q5_K scales: sub-block 0 scale 1 min 2; sub-block 5 scale 37 (0b10'0101) min 20
// (0b01'0100); sub-block 7 scale 63 min 0; the rest 0.
//   bytes 0-3: scales 0-3 | top bits of scales 4-7: [1, 2 << 6, 0, 3 << 6]
//   bytes 4-7: mins 0-3 | top bits of mins 4-7:     [2, 1 << 6, 0, 0]
//   bytes 8-11: low nibbles, scale | min << 4:      [0, 5 | 4 << 4, 0, 15]
constexpr uint8_t kKScales[12] = {0x01, 0x80, 0x00, 0xC0, 0x02, 0x40,
                                  0x00, 0x00, 0x00, 0x45, 0x00, 0x0F};

TEST(KScales, GetScaleMinK4) {
  const uint8_t want_sc[8] = {1, 0, 0, 0, 0, 37, 0, 63};
  const uint8_t want_m[8] = {2, 0, 0, 0, 0, 20, 0, 0};
  for (int j = 0; j < 8; ++j) {
    uint8_t sc = 0xFF, m = 0xFF;
    get_scale_min_k4(j, kKScales, &sc, &m);
    EXPECT_EQ(sc, want_sc[j]) << j;
    EXPECT_EQ(m, want_m[j]) << j;
  }
  uint8_t packed[12];
  pack_scale_min_k4(want_sc, want_m, packed);
  EXPECT_EQ(std::vector<uint8_t>(packed, packed + 12),
            std::vector<uint8_t>(kKScales, kKScales + 12));
}

TEST(KScales, PackUnpackAllValues) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    uint8_t ls[8], lm[8], q[12];
    for (int j = 0; j < 8; ++j) {
      ls[j] = static_cast<uint8_t>(rng() % 64);
      lm[j] = static_cast<uint8_t>(rng() % 64);
    }
    pack_scale_min_k4(ls, lm, q);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc = 0, m = 0;
      get_scale_min_k4(j, q, &sc, &m);
      ASSERT_EQ(sc, ls[j]);
      ASSERT_EQ(m, lm[j]);
    }
  }
}

TEST(Q4_K, HandBuiltBlock) {
  std::vector<uint8_t> b(144, 0);
  put_f16(b, 0, 1.0f);  // d
  put_f16(b, 2, 1.0f);  // dmin
  std::memcpy(b.data() + 4, kKScales, 12);
  // Element e = 64c + 32k + l: qs[32c + l], low nibble for k = 0, high for k = 1.
  b[16 + 3] = 0x09;    // element 3 (sub-block 0): q 9 -> 9 - 2 = 7
  b[16 + 74] = 0xC0;   // element 170 (c2 k1 l10, sub-block 5): q 12 -> 37 * 12 - 20 = 424
  b[16 + 127] = 0xF0;  // element 255 (c3 k1 l31, sub-block 7): q 15 -> 63 * 15 = 945
  const std::vector<float> y = dequantized(GgmlType::kQ4_K, b, 256);
  EXPECT_EQ(y[3], 7.0f);
  EXPECT_EQ(y[170], 424.0f);
  EXPECT_EQ(y[255], 945.0f);
  expect_range(y, 0, 32, -2.0f, 3);
  expect_range(y, 32, 160, 0.0f);
  expect_range(y, 160, 192, -20.0f, 170);
  expect_range(y, 192, 255, 0.0f);
}

TEST(Q5_K, HandBuiltBlock) {
  std::vector<uint8_t> b(176, 0);
  put_f16(b, 0, 1.0f);
  put_f16(b, 2, 1.0f);
  std::memcpy(b.data() + 4, kKScales, 12);
  // Fifth bit of element e: qh[e % 32] bit e / 32. Low nibbles as Q4_K at byte 48.
  b[16 + 3] = 0x01;    // element 3: q 9 + 16 = 25 -> 23
  b[16 + 20] = 0x01;   // element 20: q 0 + 16 -> 14
  b[16 + 10] = 0x20;   // element 170 (bit 5): q 12 + 16 = 28 -> 37 * 28 - 20 = 1016
  b[48 + 3] = 0x09;
  b[48 + 74] = 0xC0;
  b[48 + 127] = 0xF0;  // element 255, no fifth bit: 945
  const std::vector<float> y = dequantized(GgmlType::kQ5_K, b, 256);
  EXPECT_EQ(y[3], 23.0f);
  EXPECT_EQ(y[20], 14.0f);
  EXPECT_EQ(y[170], 1016.0f);
  EXPECT_EQ(y[255], 945.0f);
  for (int e = 0; e < 32; ++e) {
    if (e != 3 && e != 20) {
      EXPECT_EQ(y[e], -2.0f) << e;
    }
  }
  expect_range(y, 32, 160, 0.0f);
  expect_range(y, 160, 192, -20.0f, 170);
  expect_range(y, 192, 255, 0.0f);
}

TEST(Q6_K, HandBuiltBlock) {
  std::vector<uint8_t> b(210, 0);
  put_f16(b, 208, 1.0f);
  b[192 + 0] = 1;                          // sub-block 0 (elements 0-15)
  b[192 + 2] = 4;                          // sub-block 2 (32-47)
  b[192 + 4] = static_cast<uint8_t>(-1);   // sub-block 4 (64-79)
  b[192 + 9] = static_cast<uint8_t>(-3);   // sub-block 9 (144-159)
  b[192 + 15] = 2;                         // sub-block 15 (240-255)
  // Element e = 128h + 32k + l: ql[64h + 32(k % 2) + l] nibble k / 2, qh[32h + l] bits 2k.
  // y = scale * (q - 32); all zero bytes give -32. One element for each quarter k:
  b[7] = 0x05;         // element 7 (h0 k0 l7): low nibble of ql[7] = 5,
  b[128 + 7] = 0x02;   //   qh[7] bits 0-1 = 2 -> q 37 -> 1 * 5 = 5
  b[40] = 0x03;        // element 40 (h0 k1 l8): low nibble of ql[32 + 8] = 3,
  b[128 + 8] = 0x04;   //   qh[8] bits 2-3 = 1 -> q 19 -> 4 * -13 = -52
  b[6] = 0x70;         // element 70 (h0 k2 l6): high nibble of ql[6] = 7,
  b[128 + 6] = 0x30;   //   qh[6] bits 4-5 = 3 -> q 55 -> -1 * 23 = -23
  b[86] = 0x0F;        // element 150 (h1 k0 l22): low nibble of ql[64 + 22] = 15,
  b[128 + 54] = 0x01;  //   qh[32 + 22] bits 0-1 = 1 -> q 31 -> -3 * -1 = 3
  b[122] = 0xA0;       // element 250 (h1 k3 l26): high nibble of ql[64 + 32 + 26] = 10,
  b[128 + 58] = 0xC0;  //   qh[32 + 26] bits 6-7 = 3 -> q 58 -> 2 * 26 = 52
  const std::vector<float> y = dequantized(GgmlType::kQ6_K, b, 256);
  EXPECT_EQ(y[7], 5.0f);
  EXPECT_EQ(y[40], -52.0f);
  EXPECT_EQ(y[70], -23.0f);
  EXPECT_EQ(y[150], 3.0f);
  EXPECT_EQ(y[250], 52.0f);
  expect_range(y, 0, 16, -32.0f, 7);
  expect_range(y, 16, 32, 0.0f);
  expect_range(y, 32, 48, -128.0f, 40);
  expect_range(y, 48, 64, 0.0f);
  expect_range(y, 64, 80, 32.0f, 70);
  expect_range(y, 80, 144, 0.0f);
  expect_range(y, 144, 160, 96.0f, 150);
  expect_range(y, 160, 240, 0.0f);
  expect_range(y, 240, 256, -64.0f, 250);
}

// q6_K_codes reads every element's code as q6_K_code does, and q6_K_set_codes writes the same
// ql and qh bytes back (every byte random, so every code and bit position occurs).
TEST(Q6_K, CodesRoundTripThroughTheBytes) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<uint8_t> b(kQ6_KBlockBytes);
    for (uint8_t& v : b) v = static_cast<uint8_t>(rng());
    uint8_t codes[256];
    q6_K_codes(b.data(), codes);
    for (int e = 0; e < 256; ++e) ASSERT_EQ(codes[e], q6_K_code(b.data(), e)) << e;
    std::vector<uint8_t> back(kQ6_KBlockBytes, 0);
    q6_K_set_codes(codes, back.data());
    EXPECT_EQ(0, std::memcmp(back.data(), b.data(), 192));  // ql, qh
    EXPECT_TRUE(std::all_of(back.begin() + 192, back.end(), [](uint8_t v) { return v == 0; }));  // scales, d untouched
  }
}

TEST(Q8_K, HandComputedBlock) {
  // x[e] = e - 127, and x[255] = 2.5. The first element of largest magnitude is x[0] = -127:
  // iscale = -127 / -127 = 1, d = 1, qs = nearest_int(x) with ties to even (2.5 -> 2, where
  // Q8_0's roundf gives 3).
  std::vector<float> x(256);
  for (int e = 0; e < 255; ++e) x[e] = static_cast<float>(e - 127);
  x[255] = 2.5f;
  const std::vector<uint8_t> q = quantized(GgmlType::kQ8_K, x, 256);
  ASSERT_EQ(q.size(), 292u);
  EXPECT_EQ(q8_K_d(q.data()), 1.0f);
  for (int e = 0; e < 255; ++e) EXPECT_EQ(q8_K_qs(q.data())[e], e - 127) << e;
  EXPECT_EQ(q8_K_qs(q.data())[255], 2);
  // bsums[g] = sum_{i<16} (16g + i - 127) = 256g - 1912; the last group 1800 + 2.
  for (int g = 0; g < 15; ++g) EXPECT_EQ(q8_K_bsum(q.data(), g), 256 * g - 1912) << g;
  EXPECT_EQ(q8_K_bsum(q.data(), 15), 1802);
  const std::vector<float> y = dequantized(GgmlType::kQ8_K, q, 256);
  for (int e = 0; e < 255; ++e) EXPECT_EQ(y[e], x[e]);
  EXPECT_EQ(y[255], 2.0f);
}

TEST(IQ4_NL, HandBuiltBlock) {
  std::vector<uint8_t> b(18, 0);
  put_f16(b, 0, 1.0f);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> y = dequantized(GgmlType::kIQ4_NL, b, 32);
  const float want[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], want[j]) << j;
    EXPECT_EQ(y[j + 16], want[15 - j]) << j;
  }
}

TEST(IQ4_XS, HandBuiltBlock) {
  std::vector<uint8_t> b(136, 0);
  put_f16(b, 0, 1.0f);
  // Scales (6 bits, minus 32): sub-block 0 = 33 (+1), sub-block 7 = 30 (-2), the rest 32.
  // scales_h holds the top 2 bits at 2s: 2,2,2,2,2,2,2 and 1 -> 0x6AAA.
  b[2] = 0xAA;
  b[3] = 0x6A;
  b[4] = 0x01;  // scales_l[0]: sub-block 0 low 4 bits 1 (low nibble)
  b[7] = 0xE0;  // scales_l[3]: sub-block 7 low 4 bits 14 (high nibble)
  b[8 + 2] = 0x3F;    // element 2 -> table[15] = 113, element 18 -> table[3] = -65
  b[8 + 116] = 0x08;  // element 224 + 4 -> -2 * table[8] = -2; its partner 244 -> 254
  std::vector<float> y(256);
  iq4_xs_dequantize_block(b.data(), y.data());
  EXPECT_EQ(y[2], 113.0f);
  EXPECT_EQ(y[18], -65.0f);
  EXPECT_EQ(y[228], -2.0f);
  for (int e = 0; e < 32; ++e) {
    if (e != 2 && e != 18) {
      EXPECT_EQ(y[e], -127.0f) << e;
    }
  }
  expect_range(y, 32, 224, 0.0f);
  expect_range(y, 224, 256, 254.0f, 228);
}

constexpr GgmlType kKTypes[] = {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                                GgmlType::kQ8_K};

TEST(KQuants, ZeroBlocksAreZeroBytes) {
  const std::vector<float> x(512, 0.0f);
  for (GgmlType type : kKTypes) {
    SCOPED_TRACE(ggml_type_name(type));
    const std::vector<uint8_t> q = quantized(type, x, 256);
    EXPECT_EQ(q, std::vector<uint8_t>(q.size(), 0));
    EXPECT_EQ(dequantized(type, q, 512), x);
  }
}

// Zero blocks of the formats quantized only for their dot products. Q2_K and Q3_K: all zero
// bytes. IQ4_XS: d = -0 (-max_scale / 32), every 6-bit scale 32 (i.e. 0) and every code 8
// (table value 1, the nearest to 0). IQ4_NL: d = 0 and ggml's codes of the previous block of the
// row (its code buffer is not cleared), zeros at the start of a row.
TEST(KQuants, ZeroBlocksOfTheDotOnlyFormats) {
  const std::vector<float> zeros(512, 0.0f);
  for (GgmlType type : {GgmlType::kQ2_K, GgmlType::kQ3_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    const std::vector<uint8_t> q = quantized(type, zeros, 256);
    EXPECT_EQ(q, std::vector<uint8_t>(q.size(), 0));
  }
  std::vector<uint8_t> xs_block = {0x00, 0x80, 0xAA, 0xAA, 0, 0, 0, 0};
  xs_block.resize(136, 0x88);
  EXPECT_EQ(quantized(GgmlType::kIQ4_XS, std::vector<float>(256, 0.0f), 256), xs_block);
  EXPECT_EQ(dequantized(GgmlType::kIQ4_XS, xs_block, 256), std::vector<float>(256, 0.0f));

  std::vector<float> x(128, 0.0f);  // rows of 64: a ramp block and a zero block, two zero blocks
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) - 15.5f;
  const std::vector<uint8_t> two_rows = quantized(GgmlType::kIQ4_NL, x, 64);
  const std::vector<uint8_t> one_row =
      quantized(GgmlType::kIQ4_NL, {x.begin(), x.begin() + 32}, 32);
  ASSERT_EQ(two_rows.size(), 18u * 4);
  EXPECT_NE(fp16_to_fp32(static_cast<uint16_t>(two_rows[0] | two_rows[1] << 8)), 0.0f);
  EXPECT_EQ(std::vector<uint8_t>(two_rows.begin(), two_rows.begin() + 18), one_row);
  // Block 1: d = 0, the codes of block 0.
  EXPECT_EQ(two_rows[18], 0);
  EXPECT_EQ(two_rows[19], 0);
  EXPECT_TRUE(std::equal(two_rows.begin() + 20, two_rows.begin() + 36, two_rows.begin() + 2));
  // Blocks 2 and 3, the second row: all zero.
  EXPECT_EQ(std::vector<uint8_t>(two_rows.begin() + 36, two_rows.end()),
            std::vector<uint8_t>(36, 0));
  const std::vector<float> y = dequantized(GgmlType::kIQ4_NL, two_rows, 128);
  for (int e = 32; e < 128; ++e) EXPECT_EQ(y[e], 0.0f) << e;
}

// Round-trip error relative to the signal: the worst of several seeds, measured, plus ~10 %.
TEST(KQuants, RoundTripError) {
  constexpr testing::RoundTripBound bounds[] = {
      {GgmlType::kQ4_K, 0.079, 0.060, 0.080, 0.021},
      {GgmlType::kQ5_K, 0.040, 0.031, 0.041, 0.0105},
      {GgmlType::kQ6_K, 0.0196, 0.0147, 0.0193, 0.0093},
      {GgmlType::kQ8_K, 0.0077, 0.0043, 0.0063, 0.0028},
      {GgmlType::kQ2_K, 0.33, 0.26, 0.39, 0.064},  // 2 bits, no importance weights
      {GgmlType::kQ3_K, 0.167, 0.14, 0.155, 0.052},
      {GgmlType::kIQ4_NL, 0.087, 0.075, 0.082, 0.07},
      {GgmlType::kIQ4_XS, 0.085, 0.072, 0.08, 0.044},
  };
  testing::expect_round_trip_within(bounds);
}

// ggml's K quantizers search scales and then round them to 6 or 8 bits, so quantizing
// dequantized values need not reproduce the bytes (Q5_K and Q6_K often differ, Q4_K on offset
// data). What holds: the second pass moves the values by a small fraction of the first pass's
// error (measured at most 0.13 over a tensor), and Q8_K, whose float d = 1 / iscale can change
// in its last bit, by no more than a few ulps of the block's largest value.
TEST(KQuants, RequantizingMovesLittle) {
  for (GgmlType type : kKTypes) {
    for (Dist dist : testing::kDists) {
      SCOPED_TRACE(::testing::Message() << ggml_type_name(type) << " " << dist_name(dist));
      const std::vector<float> x = testing::random_floats(256 * 128, dist, 9);
      const auto n = static_cast<int64_t>(x.size());
      const std::vector<float> y = dequantized(type, quantized(type, x, 256), n);
      const std::vector<float> y2 = dequantized(type, quantized(type, y, 256), n);
      if (type == GgmlType::kQ8_K) {
        for (int64_t b = 0; b < n / 256; ++b) {
          float amax = 0.0f;
          for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(y[b * 256 + i]));
          for (int i = 0; i < 256; ++i) {
            ASSERT_LE(std::fabs(y2[b * 256 + i] - y[b * 256 + i]), 1e-6f * amax);
          }
        }
      } else {
        double drift = 0.0, error = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          drift += (static_cast<double>(y2[i]) - y[i]) * (static_cast<double>(y2[i]) - y[i]);
          error += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
        }
        EXPECT_LT(std::sqrt(drift / error), 0.25);
      }
    }
  }
}

// The weight formats with a dot product against Q8_K.
constexpr GgmlType kQ8KDotTypes[] = {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K,
                                     GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_XS};

// vec_dot_X_q8_K(w, quantize_q8_K(x)) against the float dot of the dequantized operands.
TEST(KQuants, DotProductsMatchDequantizedDot) {
  const int64_t n = 256 * 12;
  for (GgmlType type : kQ8KDotTypes) {
    for (Dist dist : testing::kDists) {
      SCOPED_TRACE(::testing::Message() << ggml_type_name(type) << " " << dist_name(dist));
      const std::vector<uint8_t> w = quantized(type, testing::random_floats(n, dist, 21), n);
      const std::vector<uint8_t> a =
          quantized(GgmlType::kQ8_K, testing::random_floats(n, Dist::kNormal, 22), n);
      const testing::RefDot ref =
          testing::ref_dot(dequantized(type, w, n), dequantized(GgmlType::kQ8_K, a, n));
      auto got = vec_dot(type, w, a, n);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_NEAR(*got, ref.value, 1e-5 * ref.magnitude);
    }
  }
}

// Weights with d = dmin = 1 and random codes, scales and mins; activations with d = 1 and
// small codes: every float step is exact, so vec_dot must equal the integer dot product of the
// dequantized weights with the activation codes. Any unpacking difference between vec_dot
// (bsums for the mins, lanes for the codes) and the dequantizer shows as a miss.
TEST(KQuants, DotProductsIntegerPartsAreExact) {
  std::mt19937 rng(17);
  const int64_t n = 512;
  for (GgmlType type : kQ8KDotTypes) {
    SCOPED_TRACE(ggml_type_name(type));
    const auto block_bytes = static_cast<int64_t>(*ggml_tensor_n_bytes(type, 256));
    std::vector<uint8_t> w(static_cast<size_t>(n / 256 * block_bytes));
    for (uint8_t& byte : w) byte = static_cast<uint8_t>(rng());
    std::vector<uint8_t> a(static_cast<size_t>(n / 256 * kQ8_KBlockBytes));
    std::vector<int64_t> qa(n);
    std::uniform_int_distribution<int> small(-3, 3);
    for (int64_t b = 0; b < n / 256; ++b) {
      // d (and dmin) = 1.
      for (int o : testing::fp16_fields(type)) put_f16(w, static_cast<size_t>(b * block_bytes + o), 1.0f);
      uint8_t* ab = a.data() + b * kQ8_KBlockBytes;
      const float one = 1.0f;
      std::memcpy(ab, &one, 4);
      for (int g = 0; g < 16; ++g) {
        int16_t sum = 0;
        for (int i = 0; i < 16; ++i) {
          const int v = small(rng);
          qa[b * 256 + 16 * g + i] = v;
          ab[4 + 16 * g + i] = static_cast<uint8_t>(static_cast<int8_t>(v));
          sum = static_cast<int16_t>(sum + v);
        }
        std::memcpy(ab + 260 + 2 * g, &sum, 2);
      }
    }
    const std::vector<float> yw = dequantized(type, w, n);
    int64_t want = 0;
    for (int64_t i = 0; i < n; ++i) want += static_cast<int64_t>(yw[i]) * qa[i];
    auto got = vec_dot(type, w, a, n);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, static_cast<float>(want));
  }
}

}  // namespace
}  // namespace bitnet::quant
