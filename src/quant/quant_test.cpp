// The dispatching API: type support, shapes that do not fit a format, byte-size mismatches,
// zero tensors, float formats, and encode/quantize agreement on random ternary tensors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "quant/quant.h"

namespace bitnet::quant {
namespace {

constexpr GgmlType kTernary[] = {GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0};

TEST(Quant, TypeSupport) {
  EXPECT_TRUE(is_ternary(GgmlType::kI2_S));
  EXPECT_TRUE(is_ternary(GgmlType::kTQ2_0));
  EXPECT_TRUE(is_ternary(GgmlType::kTQ1_0));
  EXPECT_FALSE(is_ternary(GgmlType::kQ8_0));
  EXPECT_FALSE(is_ternary(GgmlType::kTL1));
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ4_0,
                     GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
                     GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                     GgmlType::kQ6_K, GgmlType::kQ8_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS,
                     GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    EXPECT_TRUE(can_dequantize(t)) << ggml_type_name(t);
    EXPECT_TRUE(can_quantize(t)) << ggml_type_name(t);
  }
  // One way only: Q8_1 is an activation format ggml never dequantizes.
  EXPECT_TRUE(can_quantize(GgmlType::kQ8_1));
  EXPECT_FALSE(can_dequantize(GgmlType::kQ8_1));
  EXPECT_FALSE(can_dequantize(GgmlType::kTL2));
  EXPECT_FALSE(can_quantize(GgmlType::kTL2));
  EXPECT_FALSE(can_dequantize(GgmlType::kI8));
  EXPECT_EQ(vec_dot_type(GgmlType::kQ4_0), GgmlType::kQ8_0);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ4_1), GgmlType::kQ8_1);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ8_0), GgmlType::kQ8_0);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ6_K), GgmlType::kQ8_K);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ5_0), GgmlType::kQ8_0);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ5_1), GgmlType::kQ8_1);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ2_K), GgmlType::kQ8_K);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ3_K), GgmlType::kQ8_K);
  EXPECT_EQ(vec_dot_type(GgmlType::kIQ4_NL), GgmlType::kQ8_0);
  EXPECT_EQ(vec_dot_type(GgmlType::kIQ4_XS), GgmlType::kQ8_K);
  // ggml has no dot product with Q8_K or Q8_1 as the weights; floats and the ternary types
  // have none here.
  for (GgmlType t : {GgmlType::kQ8_K, GgmlType::kQ8_1, GgmlType::kF32, GgmlType::kF16,
                     GgmlType::kI2_S, GgmlType::kTQ2_0}) {
    EXPECT_EQ(vec_dot_type(t), std::nullopt) << ggml_type_name(t);
    EXPECT_EQ(vec_dot_fn(t), nullptr) << ggml_type_name(t);
  }
  EXPECT_EQ(ternary_scale_block(GgmlType::kI2_S, 4096), 4096);
  EXPECT_EQ(ternary_scale_block(GgmlType::kTQ2_0, 4096), 256);
  EXPECT_EQ(ternary_scale_block(GgmlType::kTQ1_0, 4096), 256);
  EXPECT_EQ(ternary_scale_block(GgmlType::kF32, 4096), 0);
}

TEST(Quant, UnsupportedTypesAreStatuses) {
  std::vector<float> x(256, 1.0f), y(256);
  std::vector<uint8_t> bytes(144, 0);
  EXPECT_EQ(quantize(GgmlType::kTL2, x.data(), 1, 256).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(dequantize(GgmlType::kQ8_1, std::span(bytes).first(36), 32, y.data()).code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(dequantize(GgmlType::kTL2, bytes, 256, y.data()).code(), StatusCode::kUnsupported);
  EXPECT_EQ(vec_dot(GgmlType::kQ8_K, bytes, bytes, 256).status().code(),
            StatusCode::kUnsupported);
  std::vector<uint8_t> codes(256, 1);
  float s = 1.0f;
  EXPECT_EQ(ternary_encode(GgmlType::kQ8_0, codes.data(), &s, 256).status().code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(ternary_decode(GgmlType::kF16, bytes, 64, codes.data(), &s).code(),
            StatusCode::kUnsupported);
}

// n that is not a whole number of blocks is an error from every entry point, never a crash.
TEST(Quant, PartialBlocksAreRefused) {
  std::vector<float> x(1024, 0.5f), y(1024);
  std::vector<uint8_t> codes(1024, 1), bytes(4096, 0x55);
  std::vector<float> scales(8, 1.0f);
  struct Case {
    GgmlType type;
    int64_t n;
  };
  for (const Case& c :
       {Case{GgmlType::kTQ2_0, 100}, Case{GgmlType::kTQ2_0, 384}, Case{GgmlType::kTQ1_0, 512 + 32},
        Case{GgmlType::kI2_S, 64}, Case{GgmlType::kI2_S, 128 + 4}, Case{GgmlType::kI2_S, 0},
        Case{GgmlType::kQ8_0, 48}, Case{GgmlType::kQ4_0, 16}, Case{GgmlType::kQ5_1, 80},
        Case{GgmlType::kQ4_K, 128}, Case{GgmlType::kQ6_K, 256 + 32},
        Case{GgmlType::kQ8_K, 100}}) {
    SCOPED_TRACE(::testing::Message() << ggml_type_name(c.type) << " n=" << c.n);
    EXPECT_FALSE(quantize(c.type, x.data(), 1, c.n).ok());
    EXPECT_FALSE(dequantize(c.type, bytes, c.n, y.data()).ok());
    if (is_ternary(c.type)) {
      EXPECT_FALSE(ternary_encode(c.type, codes.data(), scales.data(), c.n).ok());
      EXPECT_FALSE(ternary_decode(c.type, bytes, c.n, codes.data(), scales.data()).ok());
    }
  }
  // Whole blocks overall but not per row: rows must be whole blocks.
  EXPECT_FALSE(quantize(GgmlType::kTQ2_0, x.data(), 2, 128).ok());
  EXPECT_FALSE(quantize(GgmlType::kI2_S, x.data(), 2, 64).ok());
  EXPECT_FALSE(quantize(GgmlType::kQ8_0, x.data(), 2, 16).ok());
  EXPECT_FALSE(quantize(GgmlType::kTQ2_0, x.data(), -1, 256).ok());
  EXPECT_FALSE(dequantize(GgmlType::kF32, bytes, -4, y.data()).ok());
  EXPECT_FALSE(quantize(GgmlType::kF32, x.data(), int64_t{1} << 40, int64_t{1} << 40).ok());
}

TEST(Quant, ByteSizeMismatchIsAStatus) {
  std::vector<float> y(512);
  std::vector<uint8_t> codes(512);
  std::vector<float> scales(2);
  struct Case {
    GgmlType type;
    size_t good;
  };
  for (const Case& c : {Case{GgmlType::kI2_S, 512 / 4 + 32}, Case{GgmlType::kTQ2_0, 2 * 66},
                        Case{GgmlType::kTQ1_0, 2 * 54}, Case{GgmlType::kQ8_0, 16 * 34},
                        Case{GgmlType::kF16, 1024}, Case{GgmlType::kF32, 2048}}) {
    SCOPED_TRACE(ggml_type_name(c.type));
    std::vector<uint8_t> bytes(c.good + 1, 0x55);
    const std::span<const uint8_t> all(bytes);
    EXPECT_TRUE(dequantize(c.type, all.first(c.good), 512, y.data()).ok());
    EXPECT_EQ(dequantize(c.type, all, 512, y.data()).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(dequantize(c.type, all.first(c.good - 1), 512, y.data()).code(),
              StatusCode::kInvalidArgument);
    if (is_ternary(c.type)) {
      EXPECT_FALSE(
          ternary_decode(c.type, all.first(c.good - 1), 512, codes.data(), scales.data()).ok());
    }
  }
}

TEST(Quant, VecDotChecksItsOperands) {
  std::vector<uint8_t> w(2 * 144, 0), a(2 * 292, 0);
  EXPECT_TRUE(vec_dot(GgmlType::kQ4_K, w, a, 512).ok());
  EXPECT_EQ(vec_dot(GgmlType::kQ4_K, w, std::span(a).first(292), 512).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(vec_dot(GgmlType::kQ4_K, std::span(w).first(143), a, 256).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(vec_dot(GgmlType::kQ4_K, w, a, 384).ok());  // not whole super-blocks
  EXPECT_EQ(*vec_dot(GgmlType::kQ4_K, w, a, 512), 0.0f);
}

TEST(Quant, ZeroTensorDecodesToZeros) {
  std::vector<float> x(512, 0.0f), y(512, 7.0f);
  std::vector<uint8_t> codes(512);
  std::vector<float> scales(2, 7.0f);
  for (GgmlType type : kTernary) {
    SCOPED_TRACE(ggml_type_name(type));
    auto q = quantize(type, x.data(), 2, 256);
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    ASSERT_TRUE(dequantize(type, *q, 512, y.data()).ok());
    for (float v : y) ASSERT_EQ(v, 0.0f);
    ASSERT_TRUE(ternary_decode(type, *q, 512, codes.data(), scales.data()).ok());
    for (uint8_t c : codes) ASSERT_EQ(c, 1);
    EXPECT_EQ(scales[0], 0.0f);  // no floor: an all-zero tensor has scale 0 in every format
  }
  auto q = quantize(GgmlType::kQ8_0, x.data(), 2, 256);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(dequantize(GgmlType::kQ8_0, *q, 512, y.data()).ok());
  for (float v : y) ASSERT_EQ(v, 0.0f);
}

TEST(Quant, EmptyTensors) {
  std::vector<float> y(1);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kTQ2_0, GgmlType::kTQ1_0, GgmlType::kQ8_0}) {
    auto q = quantize(type, nullptr, 0, 256);
    ASSERT_TRUE(q.ok()) << ggml_type_name(type);
    EXPECT_TRUE(q->empty());
    EXPECT_TRUE(dequantize(type, {}, 0, y.data()).ok());
  }
}

TEST(Quant, NonFiniteInputsAreRefused) {
  for (GgmlType type :
       {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
        GgmlType::kQ8_1, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ8_K,
        GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> x(256, 0.25f);
      x[17] = bad;
      EXPECT_EQ(quantize(type, x.data(), 1, 256).status().code(), StatusCode::kInvalidArgument)
          << ggml_type_name(type) << " " << bad;
    }
  }
}

TEST(Quant, FloatFormats) {
  const std::vector<float> x = {1.0f, -2.5f, 65504.0f, 1e-8f, 3.14159265f, 1e6f, -0.0f, NAN};
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    SCOPED_TRACE(ggml_type_name(type));
    auto q = quantize(type, x.data(), 1, static_cast<int64_t>(x.size()));
    ASSERT_TRUE(q.ok());
    std::vector<float> y(x.size());
    ASSERT_TRUE(dequantize(type, *q, static_cast<int64_t>(x.size()), y.data()).ok());
    for (size_t i = 0; i < x.size(); ++i) {
      float want = x[i];
      if (type == GgmlType::kF16) want = fp16_to_fp32(fp32_to_fp16(x[i]));
      if (type == GgmlType::kBF16) want = bf16_to_fp32(fp32_to_bf16(x[i]));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(y[i]));
      } else {
        EXPECT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(want)) << i;
      }
    }
  }
}

// For every ternary format: encode(codes, scales) == quantize(decoded floats), and decoding
// gives the codes and scales back, over several rows and blocks.
TEST(Quant, EncodeAgreesWithQuantize) {
  const int64_t n_rows = 3, n_per_row = 512, n = n_rows * n_per_row;
  std::mt19937 rng(11);
  for (GgmlType type : kTernary) {
    SCOPED_TRACE(ggml_type_name(type));
    std::vector<uint8_t> codes(n);
    for (auto& c : codes) c = static_cast<uint8_t>(rng() % 3);
    const int64_t block = ternary_scale_block(type, n);
    std::vector<float> scales(n / block);
    for (size_t b = 0; b < scales.size(); ++b) {
      scales[b] = fp16_to_fp32(static_cast<uint16_t>(0x2000 + rng() % 0x1000));
    }
    auto enc = ternary_encode(type, codes.data(), scales.data(), n);
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    std::vector<float> x(n);
    ASSERT_TRUE(dequantize(type, *enc, n, x.data()).ok());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(x[i], static_cast<float>(codes[i] - 1) * scales[i / block]) << i;
    }
    auto q = quantize(type, x.data(), n_rows, n_per_row);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(*q, *enc);
    std::vector<uint8_t> codes2(n);
    std::vector<float> scales2(scales.size());
    ASSERT_TRUE(ternary_decode(type, *enc, n, codes2.data(), scales2.data()).ok());
    EXPECT_EQ(codes2, codes);
    EXPECT_EQ(scales2, scales);
  }
}

TEST(Quant, EncodeValidatesCodesAndScales) {
  std::vector<uint8_t> codes(256, 1);
  float s = 0.5f;
  codes[9] = 3;
  for (GgmlType type : kTernary) {
    EXPECT_EQ(ternary_encode(type, codes.data(), &s, 256).status().code(),
              StatusCode::kInvalidArgument);
  }
  codes[9] = 0;
  for (float bad : {NAN, INFINITY, -1.0f}) {
    for (GgmlType type : kTernary) {
      EXPECT_FALSE(ternary_encode(type, codes.data(), &bad, 256).ok());
    }
  }
  float not_fp16 = 0.1f;
  EXPECT_FALSE(ternary_encode(GgmlType::kTQ2_0, codes.data(), &not_fp16, 256).ok());
  EXPECT_FALSE(ternary_encode(GgmlType::kTQ1_0, codes.data(), &not_fp16, 256).ok());
  EXPECT_TRUE(ternary_encode(GgmlType::kI2_S, codes.data(), &not_fp16, 256).ok());  // f32 scale
}

// Code 3 (0b11) is unused by every owner; a tensor holding one is corrupt.
TEST(Quant, CodeThreeIsCorrupt) {
  std::vector<float> y(256);
  std::vector<uint8_t> codes(256);
  float scales[1];
  std::vector<uint8_t> i2s(256 / 4 + 32, 0x55);
  i2s[10] = 0x57;  // element 106 (10 + 96) gets code 3
  EXPECT_EQ(dequantize(GgmlType::kI2_S, i2s, 256, y.data()).code(), StatusCode::kCorruptFile);
  EXPECT_EQ(ternary_decode(GgmlType::kI2_S, i2s, 256, codes.data(), scales).code(),
            StatusCode::kCorruptFile);
  std::vector<uint8_t> tq2(66, 0x55);
  tq2[63] = 0xd5;
  EXPECT_EQ(dequantize(GgmlType::kTQ2_0, tq2, 256, y.data()).code(), StatusCode::kCorruptFile);
  EXPECT_EQ(ternary_decode(GgmlType::kTQ2_0, tq2, 256, codes.data(), scales).code(),
            StatusCode::kCorruptFile);
}

}  // namespace
}  // namespace bitnet::quant
