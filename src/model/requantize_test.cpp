#include "model/requantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "quant/quant.h"

namespace bitnet {
namespace {

struct Tensor {
  std::vector<float> values;
  std::vector<uint8_t> bytes;
  hal::WeightDesc desc;
};

Tensor make(GgmlType type, int64_t n_cols, int64_t n_rows) {
  Tensor t;
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  t.values.resize(static_cast<size_t>(n_cols * n_rows));
  for (float& v : t.values) v = d(rng);
  t.bytes = *quant::quantize(type, t.values.data(), n_rows, n_cols);
  t.desc = {"token_embd.weight", type, {n_cols, n_rows, 1, 1}, t.bytes};
  return t;
}

TEST(Requantize, ParsesTheHeadTypes) {
  EXPECT_EQ(*parse_head_type("f16"), GgmlType::kF16);
  EXPECT_EQ(*parse_head_type("Q8_0"), GgmlType::kQ8_0);
  EXPECT_EQ(*parse_head_type("q6_K"), GgmlType::kQ6_K);
  const auto bad = parse_head_type("q3");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("expected f16, q8_0 or q6_K"), std::string::npos);
}

// Row by row on several threads equals the reference quantizer over the dequantized tensor.
TEST(Requantize, EqualsTheReferenceQuantizerOnEveryThreadCount) {
  const Tensor f16 = make(GgmlType::kF16, 256, 37);
  std::vector<float> dequantized(f16.values.size());
  ASSERT_TRUE(quant::dequantize(GgmlType::kF16, f16.bytes, static_cast<int64_t>(dequantized.size()), dequantized.data()).ok());
  const auto want = quant::quantize(GgmlType::kQ8_0, dequantized.data(), 37, 256);
  ASSERT_TRUE(want.ok());
  for (int n_threads : {1, 2, 5, 64}) {
    const auto got = requantize_rows(f16.desc, GgmlType::kQ8_0, n_threads);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, *want) << n_threads << " threads";
  }
}

TEST(Requantize, RowsThatAreNotWholeBlocksAreRefused) {
  const Tensor f32 = make(GgmlType::kF32, 48, 3);  // Q8_0 blocks are 32
  const auto got = requantize_rows(f32.desc, GgmlType::kQ8_0, 2);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("token_embd.weight"), std::string::npos) << got.status().message();
}

}  // namespace
}  // namespace bitnet
