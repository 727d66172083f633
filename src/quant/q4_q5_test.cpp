// Q4_0, Q4_1, Q5_0, Q5_1, Q8_1 and the 32-block dot products (IQ4_NL's too): hand-built blocks
// whose values are obvious (d = 1 or 0.5 in fp16), round-trip error, exact re-quantization, dot
// products.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/fp16.h"
#include "quant/q4_q5.h"
#include "quant/q8_0.h"
#include "quant/quant.h"
#include "quant/test_util.h"

namespace bitnet::quant {
namespace {

using testing::Dist;
using testing::dequantized;
using testing::quantized;

constexpr uint8_t kOneLo = 0x00, kOneHi = 0x3c;   // fp16 1.0
constexpr uint8_t kHalfLo = 0x00, kHalfHi = 0x38;  // fp16 0.5
constexpr uint8_t kMinusOneHi = 0xbc;              // fp16 -1.0 (low byte 0)

// qs[j] = j | (15 - j) << 4: element j is nibble j, element j + 16 is nibble 15 - j.
std::vector<uint8_t> ramp_nibbles() {
  std::vector<uint8_t> qs(16);
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  return qs;
}

TEST(Q4_0, HandBuiltBlock) {
  std::vector<uint8_t> block = {kOneLo, kOneHi};
  for (uint8_t b : ramp_nibbles()) block.push_back(b);
  const std::vector<float> y = dequantized(GgmlType::kQ4_0, block, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(j - 8)) << j;        // low nibbles: first half
    EXPECT_EQ(y[j + 16], static_cast<float>(7 - j)) << j;   // high nibbles: second half
  }
  // The first element of largest magnitude is -8, so d = -8 / -8 = 1 and the codes are x + 8.
  EXPECT_EQ(quantized(GgmlType::kQ4_0, y, 32), block);
}

TEST(Q4_0, PositiveMaxGivesNegativeScale) {
  std::vector<float> x(32, 0.0f);
  x[0] = 8.0f;    // d = 8 / -8 = -1 (fp16 0xbc00), code 0
  x[5] = -4.0f;   // -4 * -1 + 8.5 = 12.5 -> 12
  x[20] = 2.9f;   // -2.9 + 8.5 = 5.6 -> 5 (truncation after + 8.5)
  x[21] = -7.9f;  // 7.9 + 8.5 = 16.4 -> 16, clamped to 15
  x[6] = -2.5f;   // a tie: 2.5 + 8.5 = 11 exactly, so halves round up (not to even)
  x[7] = -0.49999997f;  // 0.49999997 + 8.5 rounds to 9.0f in float: code 9, not 8
  std::vector<uint8_t> want = {0x00, kMinusOneHi};
  for (int j = 0; j < 16; ++j) want.push_back(0x88);  // zeros are code 8
  want[2 + 0] = 0x80;
  want[2 + 4] = 0x58;
  want[2 + 5] = 0xFC;  // element 5 low nibble 12, element 21 high nibble 15
  want[2 + 6] = 0x8B;
  want[2 + 7] = 0x89;
  EXPECT_EQ(quantized(GgmlType::kQ4_0, x, 32), want);
  const std::vector<float> y = dequantized(GgmlType::kQ4_0, want, 32);
  EXPECT_EQ(y[0], 8.0f);
  EXPECT_EQ(y[5], -4.0f);
  EXPECT_EQ(y[20], 3.0f);
  EXPECT_EQ(y[21], -7.0f);
  EXPECT_EQ(y[6], -3.0f);
  EXPECT_EQ(y[7], -1.0f);
  EXPECT_EQ(y[1], -0.0f);
}

TEST(Q4_1, HandBuiltBlock) {
  std::vector<uint8_t> block = {kHalfLo, kHalfHi, 0x00, kMinusOneHi};  // d = 0.5, m = -1
  for (uint8_t b : ramp_nibbles()) block.push_back(b);
  const std::vector<float> y = dequantized(GgmlType::kQ4_1, block, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j) - 1.0f) << j;
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(15 - j) - 1.0f) << j;
  }
  // min = -1, max = 6.5: d = 7.5 / 15 = 0.5, codes (x + 1) * 2.
  EXPECT_EQ(quantized(GgmlType::kQ4_1, y, 32), block);
}

// qh = 0xA00F8001 (bytes 01 80 0F A0): fifth bits of elements 0, 15, 16-19, 29 and 31.
// qs all 0 except qs[3] = 0x5A: element 3 low nibble 10, element 19 high nibble 5.
std::vector<uint8_t> q5_payload() {
  std::vector<uint8_t> p = {0x01, 0x80, 0x0F, 0xA0};
  for (int j = 0; j < 16; ++j) p.push_back(j == 3 ? 0x5A : 0x00);
  return p;
}

std::vector<float> q5_codes() {
  std::vector<float> q(32, 0.0f);
  for (int e : {0, 15, 16, 17, 18, 29, 31}) q[e] = 16.0f;
  q[3] = 10.0f;
  q[19] = 21.0f;
  return q;
}

TEST(Q5_0, HandBuiltBlockHighBits) {
  std::vector<uint8_t> block = {kOneLo, kOneHi};
  for (uint8_t b : q5_payload()) block.push_back(b);
  const std::vector<float> y = dequantized(GgmlType::kQ5_0, block, 32);
  const std::vector<float> q = q5_codes();
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], q[e] - 16.0f) << e;
  // The first element of magnitude 16 is element 1 (-16): d = 1, codes x + 16.
  EXPECT_EQ(quantized(GgmlType::kQ5_0, y, 32), block);
}

TEST(Q5_1, HandBuiltBlockHighBits) {
  std::vector<uint8_t> block = {kOneLo, kOneHi, kHalfLo, kHalfHi};  // d = 1, m = 0.5
  for (uint8_t b : q5_payload()) block.push_back(b);
  const std::vector<float> y = dequantized(GgmlType::kQ5_1, block, 32);
  const std::vector<float> q = q5_codes();
  for (int e = 0; e < 32; ++e) EXPECT_EQ(y[e], q[e] + 0.5f) << e;
}

TEST(Q5_1, QuantizesARampToCodes) {
  std::vector<float> x(32);
  for (int e = 0; e < 32; ++e) x[e] = static_cast<float>(e);  // min 0, max 31: d = 1
  std::vector<uint8_t> want = {kOneLo, kOneHi, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF};
  for (int j = 0; j < 16; ++j) want.push_back(static_cast<uint8_t>(j | (j << 4)));
  EXPECT_EQ(quantized(GgmlType::kQ5_1, x, 32), want);
  EXPECT_EQ(dequantized(GgmlType::kQ5_1, want, 32), x);
}

TEST(Q8_1, HandComputedBlock) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;   // d = 1
  x[1] = -0.5f;    // roundf: halves away from zero -> -1
  x[2] = 2.5f;     // -> 3
  x[3] = -100.0f;  // sum = 127 - 1 + 3 - 100 = 29: s = 29.0 (fp16 0x4f40)
  const std::vector<uint8_t> q = quantized(GgmlType::kQ8_1, x, 32);
  ASSERT_EQ(q.size(), 36u);
  EXPECT_EQ(q[0], kOneLo);
  EXPECT_EQ(q[1], kOneHi);
  EXPECT_EQ(q[2], 0x40);
  EXPECT_EQ(q[3], 0x4f);
  EXPECT_EQ(static_cast<int8_t>(q[4]), 127);
  EXPECT_EQ(static_cast<int8_t>(q[5]), -1);
  EXPECT_EQ(static_cast<int8_t>(q[6]), 3);
  EXPECT_EQ(static_cast<int8_t>(q[7]), -100);
  std::vector<float> y(32);
  q8_1_dequantize_block(q.data(), y.data());
  EXPECT_EQ(y[3], -100.0f);
  EXPECT_FALSE(can_dequantize(GgmlType::kQ8_1));  // as in ggml: an activation format only
}

constexpr GgmlType kLegacy[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                                GgmlType::kQ5_1, GgmlType::kQ8_0};

// Round-trip error relative to the signal, per distribution: the worst of several seeds,
// measured, plus ~10 %. Uniform data in [-1, 1] with Q4_0 is the textbook case: step amax/8,
// rmse step/sqrt(12) = 0.036 against an rms of 0.577, i.e. 0.0625.
TEST(Legacy, RoundTripError) {
  constexpr testing::RoundTripBound bounds[] = {
      {GgmlType::kQ4_0, 0.095, 0.072, 0.088, 0.046},
      {GgmlType::kQ4_1, 0.087, 0.067, 0.093, 0.0035},  // the min absorbs the offset
      {GgmlType::kQ5_0, 0.047, 0.035, 0.045, 0.022},
      {GgmlType::kQ5_1, 0.042, 0.033, 0.045, 0.0017},
      {GgmlType::kQ8_0, 0.006, 0.0042, 0.0058, 0.0027},
  };
  testing::expect_round_trip_within(bounds);
}

// The legacy quantizers are deterministic functions of min/max (or amax): the extreme elements
// land exactly on codes again, so re-quantizing a dequantized tensor gives the same bytes.
TEST(Legacy, RequantizingIsExact) {
  for (GgmlType type : kLegacy) {
    for (Dist dist : testing::kDists) {
      SCOPED_TRACE(::testing::Message() << ggml_type_name(type) << " " << dist_name(dist));
      const std::vector<float> x = testing::random_floats(256 * 64, dist, 7);
      const std::vector<uint8_t> q = quantized(type, x, 256);
      const std::vector<float> y = dequantized(type, q, static_cast<int64_t>(x.size()));
      EXPECT_EQ(quantized(type, y, 256), q);
    }
  }
}

// The 32-element weight formats with a dot product against Q8_0 / Q8_1.
constexpr GgmlType kDotTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                                  GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kIQ4_NL};

// vec_dot against the float dot of the dequantized operands (double, so the reference has no
// rounding to speak of), within 1e-5 of the sum of |terms|; Q4_1 and Q5_1 also within
// q8_1_s_slack.
TEST(Legacy, DotProductsMatchDequantizedDot) {
  const int64_t n = 32 * 96;
  for (GgmlType type : kDotTypes) {
    SCOPED_TRACE(ggml_type_name(type));
    const GgmlType a_type = *vec_dot_type(type);
    const std::vector<uint8_t> w =
        quantized(type, testing::random_floats(n, Dist::kNormal, 11), n);
    const auto w_block = static_cast<int64_t>(*ggml_tensor_n_bytes(type, 32));
    const std::vector<uint8_t> a =
        quantized(a_type, testing::random_floats(n, Dist::kHeavyTail, 12), n);
    const bool q8_1 = a_type == GgmlType::kQ8_1;
    const std::vector<float> ya =
        q8_1 ? testing::q8_1_dequantized(a, n) : dequantized(GgmlType::kQ8_0, a, n);
    const testing::RefDot ref = testing::ref_dot(dequantized(type, w, n), ya);
    auto got = vec_dot(type, w, a, n);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_NEAR(*got, ref.value,
                1e-5 * ref.magnitude + (q8_1 ? testing::q8_1_s_slack(w, a, n, w_block) : 0.0));
  }
}

// With d = 1 everywhere the float steps are exact, so the result is the integer dot product of
// the codes: any unpacking difference between vec_dot and the dequantizer shows as a miss.
TEST(Legacy, DotProductsIntegerPartsAreExact) {
  std::mt19937 rng(5);
  const int64_t n = 32 * 8;
  for (GgmlType type : kDotTypes) {
    SCOPED_TRACE(ggml_type_name(type));
    const GgmlType a_type = *vec_dot_type(type);
    const auto w_block = static_cast<int64_t>(*ggml_tensor_n_bytes(type, 32));
    const int64_t a_block = a_type == GgmlType::kQ8_1 ? 36 : 34;
    std::vector<uint8_t> w(n / 32 * w_block), a(n / 32 * a_block);
    for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
    std::uniform_int_distribution<int> small(-15, 15);  // Q8_1's s = sum stays exact in fp16
    std::vector<int64_t> qa(n);
    for (int64_t b = 0; b < n / 32; ++b) {
      uint8_t* wb = w.data() + b * w_block;
      wb[0] = kOneLo;
      wb[1] = kOneHi;
      if (a_type == GgmlType::kQ8_1) {  // Q4_1, Q5_1: m = 1
        wb[2] = kOneLo;
        wb[3] = kOneHi;
      }
      uint8_t* ab = a.data() + b * a_block;
      ab[0] = kOneLo;
      ab[1] = kOneHi;
      const int64_t qs = a_block - 32;
      int sum = 0;
      for (int j = 0; j < 32; ++j) {
        qa[b * 32 + j] = small(rng);
        ab[qs + j] = static_cast<uint8_t>(static_cast<int8_t>(qa[b * 32 + j]));
        sum += static_cast<int>(qa[b * 32 + j]);
      }
      if (a_type == GgmlType::kQ8_1) {
        const uint16_t s = fp32_to_fp16(static_cast<float>(sum));
        ab[2] = static_cast<uint8_t>(s & 0xff);
        ab[3] = static_cast<uint8_t>(s >> 8);
      }
    }
    const std::vector<float> yw = dequantized(type, w, n);
    int64_t want = 0;
    for (int64_t i = 0; i < n; ++i) want += static_cast<int64_t>(yw[i]) * qa[i];
    auto got = vec_dot(type, w, a, n);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, static_cast<float>(want));
  }
}

}  // namespace
}  // namespace bitnet::quant
