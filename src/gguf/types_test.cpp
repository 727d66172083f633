#include "gguf/types.h"

#include <array>
#include <limits>

#include <gtest/gtest.h>

namespace bitnet {
namespace {

TEST(GgmlTypes, TraitsMatchGgml) {
  struct Expected {
    GgmlType type;
    std::string_view name;
    int64_t block_elems, block_bytes;
  };
  const Expected table[] = {
      {GgmlType::kF32, "f32", 1, 4},        {GgmlType::kF16, "f16", 1, 2},
      {GgmlType::kBF16, "bf16", 1, 2},      {GgmlType::kQ4_0, "q4_0", 32, 18},
      {GgmlType::kQ4_1, "q4_1", 32, 20},    {GgmlType::kQ5_0, "q5_0", 32, 22},
      {GgmlType::kQ5_1, "q5_1", 32, 24},    {GgmlType::kQ8_0, "q8_0", 32, 34},
      {GgmlType::kQ8_1, "q8_1", 32, 36},    {GgmlType::kQ2_K, "q2_K", 256, 84},
      {GgmlType::kQ3_K, "q3_K", 256, 110},  {GgmlType::kQ4_K, "q4_K", 256, 144},
      {GgmlType::kQ5_K, "q5_K", 256, 176},  {GgmlType::kQ6_K, "q6_K", 256, 210},
      {GgmlType::kQ8_K, "q8_K", 256, 292},  {GgmlType::kI8, "i8", 1, 1},
      {GgmlType::kI16, "i16", 1, 2},        {GgmlType::kI32, "i32", 1, 4},
      {GgmlType::kI64, "i64", 1, 8},        {GgmlType::kF64, "f64", 1, 8},
      {GgmlType::kTQ1_0, "tq1_0", 256, 54}, {GgmlType::kTQ2_0, "tq2_0", 256, 66},
      {GgmlType::kI2_S, "i2_s", 1, 1},      {GgmlType::kTL1, "tl1", 1, 1},
      {GgmlType::kTL2, "tl2", 1, 1},
  };
  for (const Expected& e : table) {
    const auto t = ggml_type_traits(static_cast<uint32_t>(e.type));
    ASSERT_TRUE(t.has_value()) << e.name;
    EXPECT_EQ(t->name, e.name);
    EXPECT_EQ(t->block_elems, e.block_elems) << e.name;
    EXPECT_EQ(t->block_bytes, e.block_bytes) << e.name;
    EXPECT_EQ(ggml_type_name(e.type), e.name);
  }
  for (uint32_t id : {4u, 5u, 16u, 29u, 31u, 37u, 40u, 1000u}) {
    EXPECT_FALSE(ggml_type_traits(id).has_value()) << id;
  }
}

TEST(GgmlTypes, TensorBytes) {
  EXPECT_EQ(*ggml_tensor_n_bytes(GgmlType::kF32, 10), 40u);
  EXPECT_EQ(*ggml_tensor_n_bytes(GgmlType::kQ8_0, 64), 68u);
  EXPECT_EQ(*ggml_tensor_n_bytes(GgmlType::kTQ2_0, 65536), 256u * 66);
  EXPECT_EQ(*ggml_tensor_n_bytes(GgmlType::kTQ1_0, 65536), 256u * 54);
  EXPECT_EQ(*ggml_tensor_n_bytes(GgmlType::kF16, 0), 0u);
  // Partial blocks and negative counts are refused.
  EXPECT_FALSE(ggml_tensor_n_bytes(GgmlType::kQ8_0, 33).ok());
  EXPECT_FALSE(ggml_tensor_n_bytes(GgmlType::kF32, -1).ok());
  // Unknown ids are unsupported.
  EXPECT_EQ(ggml_tensor_n_bytes(static_cast<GgmlType>(77), 4).status().code(),
            StatusCode::kUnsupported);
  // n * type_size overflow (CVE-2024-21802): 2^62 f32 elements are 2^64 bytes; byte counts
  // are capped at 2^63 - 1.
  EXPECT_FALSE(ggml_tensor_n_bytes(GgmlType::kF32, int64_t{1} << 62).ok());
  EXPECT_FALSE(ggml_tensor_n_bytes(GgmlType::kF32, int64_t{1} << 61).ok());
  EXPECT_EQ(*ggml_tensor_n_bytes(GgmlType::kF32, (int64_t{1} << 61) - 1),
            (uint64_t{1} << 63) - 4);
  EXPECT_FALSE(ggml_tensor_n_bytes(GgmlType::kQ8_K, std::numeric_limits<int64_t>::max() / 256 * 256)
                   .ok());
}

TEST(GgmlTypes, I2sSizeIsQuarterPlusTrailer) {
  EXPECT_EQ(*ggml_tensor_n_bytes(GgmlType::kI2_S, 65536), 65536u / 4 + 32);
  EXPECT_EQ(*ggml_tensor_n_bytes(GgmlType::kI2_S, 4), 33u);
  EXPECT_EQ(*ggml_tensor_n_bytes(GgmlType::kI2_S, 0), 0u);
  EXPECT_FALSE(ggml_tensor_n_bytes(GgmlType::kI2_S, 6).ok());
  EXPECT_EQ(*ggml_tensor_n_bytes(GgmlType::kTL1, 1024), 1024u / 4 + 32);
  EXPECT_EQ(ggml_tensor_n_bytes(GgmlType::kTL2, 1024).status().code(), StatusCode::kUnsupported);
}

TEST(GgmlTypes, ShapeBytes) {
  const std::array<int64_t, 2> q8{64, 3};
  EXPECT_EQ(*ggml_tensor_shape_n_bytes(GgmlType::kQ8_0, q8), 3u * 68);
  // Rows must be whole blocks even when the total is a multiple of the block.
  const std::array<int64_t, 2> ragged{16, 2};
  EXPECT_FALSE(ggml_tensor_shape_n_bytes(GgmlType::kQ8_0, ragged).ok());
  const std::array<int64_t, 2> negative{-4, -4};
  EXPECT_FALSE(ggml_tensor_shape_n_bytes(GgmlType::kF32, negative).ok());
  const std::array<int64_t, 4> huge{int64_t{1} << 32, int64_t{1} << 32, 1, 1};
  EXPECT_FALSE(ggml_tensor_shape_n_bytes(GgmlType::kF32, huge).ok());
  EXPECT_FALSE(ggml_tensor_shape_n_bytes(GgmlType::kF32, std::span<const int64_t>()).ok());
  // TL2 (bitnet.cpp ggml_nbytes): (2560-256)*640/3*5/8 + 256*640/2*4/8 = 348160, + 32.
  const std::array<int64_t, 2> tl2{2560, 640};
  EXPECT_EQ(*ggml_tensor_shape_n_bytes(GgmlType::kTL2, tl2), 348160u + 32);
  const std::array<int64_t, 2> tl2_odd{300, 3};  // 44*3/3*5/8 = 27, + 192 = 219 -> 224 + 32
  EXPECT_EQ(*ggml_tensor_shape_n_bytes(GgmlType::kTL2, tl2_odd), 256u);
  const std::array<int64_t, 2> tl2_narrow{128, 4};
  EXPECT_EQ(ggml_tensor_shape_n_bytes(GgmlType::kTL2, tl2_narrow).status().code(),
            StatusCode::kUnsupported);
}

}  // namespace
}  // namespace bitnet
