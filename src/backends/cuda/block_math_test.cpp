// block_math.h, the decoding the CUDA float kernels do of llama.cpp's block formats, against
// src/quant's dequantizers: every element of random blocks (random codes, scales and mins; the
// fp16 fields finite), bit for bit, and the block sizes against the GGUF type table.
#include "backends/cuda/block_math.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/cuda_plan.h"
#include "core/fp16.h"
#include "gguf/types.h"
#include "quant/quant.h"

namespace bitnet::cuda {
namespace {

struct Case {
  GgmlType type;
  BlockFormat format;
  std::vector<int> fp16_offsets;  // d (and m / dmin) in each block
};

TEST(CudaBlockMath, EveryElementEqualsTheDequantizer) {
  const std::vector<Case> cases = {
      {GgmlType::kQ4_0, BlockFormat::kQ4_0, {0}},     {GgmlType::kQ4_1, BlockFormat::kQ4_1, {0, 2}},
      {GgmlType::kQ5_0, BlockFormat::kQ5_0, {0}},     {GgmlType::kQ5_1, BlockFormat::kQ5_1, {0, 2}},
      {GgmlType::kQ4_K, BlockFormat::kQ4_K, {0, 2}},  {GgmlType::kQ5_K, BlockFormat::kQ5_K, {0, 2}},
      {GgmlType::kQ6_K, BlockFormat::kQ6_K, {208}},   {GgmlType::kQ2_K, BlockFormat::kQ2_K, {80, 82}},
      {GgmlType::kQ3_K, BlockFormat::kQ3_K, {108}},   {GgmlType::kIQ4_NL, BlockFormat::kIQ4_NL, {0}},
      {GgmlType::kIQ4_XS, BlockFormat::kIQ4_XS, {0}},
  };
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> scale(0.0f, 0.05f);
  for (const Case& c : cases) {
    SCOPED_TRACE(ggml_type_name(c.type));
    ASSERT_EQ(block_format_of(c.type), c.format);
    const int elems = block_elems(c.format), bytes = block_bytes(c.format);
    ASSERT_EQ(ggml_tensor_n_bytes(c.type, elems).value(), static_cast<uint64_t>(bytes));
    const int n_blocks = 64;
    std::vector<uint8_t> data(static_cast<size_t>(n_blocks * bytes));
    for (auto& b : data) b = static_cast<uint8_t>(byte(rng));
    for (int b = 0; b < n_blocks; ++b) {
      for (const int off : c.fp16_offsets) {
        const uint16_t h = fp32_to_fp16(b == 0 ? 0.0f : scale(rng));  // block 0: d = 0 (and dmin = 0)
        std::memcpy(&data[static_cast<size_t>(b * bytes + off)], &h, 2);
      }
    }
    std::vector<float> want(static_cast<size_t>(n_blocks * elems));
    ASSERT_TRUE(quant::dequantize(c.type, data, static_cast<int64_t>(want.size()), want.data()).ok());
    for (int b = 0; b < n_blocks; ++b) {
      const uint8_t* block = data.data() + b * bytes;
      for (int e = 0; e < elems; ++e) {
        const float w = want[static_cast<size_t>(b * elems + e)];
        const float g = block_value(c.format, block, e);  // the switch the embed kernel takes
        ASSERT_EQ(std::memcmp(&g, &w, 4), 0) << "block " << b << " element " << e << ": " << g << " vs " << w;
      }
    }
  }
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kTQ2_0, GgmlType::kI2_S}) {
    EXPECT_FALSE(block_format_of(t).has_value()) << ggml_type_name(t);
  }
}

// The float GEMV's Q6_K reads, 8 elements per lane (the raw bits, then the values), against
// block_value element by element, bit for bit: every lane of 33 consecutive blocks, random
// codes, scales of both signs, d zero in one block. (On the host the 2-byte reads are copies;
// the device reads them from blocks that are 2-byte aligned.)
TEST(CudaBlockMath, Q6_KEightAtATimeEqualsElementByElement) {
  std::mt19937 rng(22);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> scale(0.0f, 0.05f);
  const int n_blocks = 33, bytes = block_bytes(BlockFormat::kQ6_K);
  std::vector<uint8_t> data(static_cast<size_t>(n_blocks * bytes));
  for (auto& b : data) b = static_cast<uint8_t>(byte(rng));
  for (int b = 0; b < n_blocks; ++b) {
    const uint16_t h = fp32_to_fp16(b == 1 ? 0.0f : scale(rng));
    std::memcpy(&data[static_cast<size_t>(b * bytes + 208)], &h, 2);
  }
  for (int b = 0; b < n_blocks; ++b) {
    const uint8_t* block = data.data() + b * bytes;
    for (int j = 0; j < 32; ++j) {
      float got[8];
      block_q6_K_values8(block_q6_K_lane(block, j), j, got);
      for (int i = 0; i < 8; ++i) {
        const float want = block_value<BlockFormat::kQ6_K>(block, 8 * j + i);
        ASSERT_EQ(std::memcmp(&got[i], &want, 4), 0) << "block " << b << " element " << 8 * j + i;
      }
    }
  }
}

// A device weight of a block format keeps the file's bytes; rows of partial blocks are refused.
TEST(CudaBlockMath, WeightKindsOfTheBlockFormats) {
  EXPECT_EQ(weight_kind("w", GgmlType::kQ6_K, 2560, 100).value(), WeightKind::kBlocks);
  EXPECT_EQ(weight_kind("w", GgmlType::kQ4_1, 576, 49152).value(), WeightKind::kBlocks);
  EXPECT_EQ(weight_kind("w", GgmlType::kQ4_K, 288, 10).status().code(), StatusCode::kCorruptFile);
  EXPECT_EQ(weight_kind("w", GgmlType::kIQ4_XS, 256, 10).value(), WeightKind::kBlocks);
  EXPECT_EQ(weight_kind("w", GgmlType::kQ8_1, 256, 10).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(weight_kind("g", GgmlType::kQ4_0, 64, 1).value(), WeightKind::kF32);  // 1-D: dequantized
}

}  // namespace
}  // namespace bitnet::cuda
