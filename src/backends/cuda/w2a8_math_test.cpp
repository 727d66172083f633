// The device arithmetic of the CUDA kernels (w2a8_math.h), run on the host against the CPU's
// scalar reference: format decoding, the W2C repack, dp4a, the GEMV's order and epilogue, and
// the activation quantization. The GEMV twin is the kernel's code path: with a GPU, the device
// test compares the kernel's output with it.
#include "backends/cuda/w2a8_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/kernel_test_util.h"
#include "backends/cuda/w2c_weights.h"
#include "core/fp16.h"
#include "quant/act_quant.h"
#include "quant/quant.h"

namespace bitnet::cuda {
namespace {

using cpu::test::FileWeight;
using cpu::test::random_codes;
using cpu::test::random_floats;
using cpu::test::random_scales;
using cpu::test::ternary_file;

constexpr GgmlType kTypes[] = {GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0};

TernaryFormat format_of(GgmlType t) {
  return t == GgmlType::kI2_S ? TernaryFormat::kI2S : t == GgmlType::kTQ2_0 ? TernaryFormat::kTQ2_0 : TernaryFormat::kTQ1_0;
}

TEST(CudaW2a8Math, DecodesEveryFormatLikeTheReference) {
  std::mt19937 rng(1);
  for (GgmlType type : kTypes) {
    for (int64_t n_cols : {256, 768, 2560}) {
      const int64_t n_rows = 3;
      const int64_t n = n_cols * n_rows;
      const auto codes = random_codes(n, rng);
      const FileWeight f = ternary_file(type, codes, random_scales(type, n, rng), n_cols, n_rows);
      std::vector<uint8_t> want(static_cast<size_t>(n));
      std::vector<float> want_scales(static_cast<size_t>(n / quant::ternary_scale_block(type, n)));
      ASSERT_TRUE(quant::ternary_decode(type, f.bytes, n, want.data(), want_scales.data()).ok());
      const TernaryFormat tf = format_of(type);
      const int64_t row_bytes = ternary_row_bytes(tf, n_cols);
      for (int64_t r = 0; r < n_rows; ++r) {
        const uint8_t* row = f.bytes.data() + r * row_bytes;
        for (int64_t j = 0; j < n_cols; ++j) {
          ASSERT_EQ(ternary_code(tf, row, j), want[static_cast<size_t>(r * n_cols + j)])
              << ggml_type_name(type) << " row " << r << " col " << j;
        }
        if (tf == TernaryFormat::kI2S) continue;
        for (int64_t b = 0; b < n_cols / 256; ++b) {
          EXPECT_EQ(tq_block_scale(tf, row, b), want_scales[static_cast<size_t>(r * n_cols / 256 + b)]);
        }
      }
    }
  }
}

TEST(CudaW2a8Math, HalfConversionMatchesCore) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = half_bits_to_float(static_cast<uint16_t>(h));
    const float b = fp16_to_fp32(static_cast<uint16_t>(h));
    ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << h;
  }
}

TEST(CudaW2a8Math, RepackPutsEveryCodeInItsDp4aLane) {
  std::mt19937 rng(2);
  for (GgmlType type : kTypes) {
    const int64_t n_cols = 1280, n_rows = 5, n = n_cols * n_rows;
    const auto codes = random_codes(n, rng);
    const FileWeight f = ternary_file(type, codes, random_scales(type, n, rng), n_cols, n_rows);
    auto w = repack_w2c(type, f.bytes, n_cols, n_rows);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    ASSERT_EQ(w->words.size(), static_cast<size_t>(n / kWordCols));
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t k = 0; k < n_cols / kWordCols; ++k) {
        const uint32_t word = w->words[static_cast<size_t>(r * n_cols / kWordCols + k)];
        for (int i = 0; i < 4; ++i) {
          const auto lanes = static_cast<uint32_t>(unpack_lanes(word, i));
          for (int b = 0; b < 4; ++b) {
            ASSERT_EQ((lanes >> (8 * b)) & 0xffu, codes[static_cast<size_t>(r * n_cols + 16 * k + 4 * i + b)])
                << ggml_type_name(type) << " row " << r << " word " << k;
          }
        }
      }
    }
  }
}

TEST(CudaW2a8Math, RepackRejectsCode3AndBadShapes) {
  std::vector<uint8_t> bytes(128 / 4 + 32, 0x55);  // I2_S, one row of 128 columns of code 1
  EXPECT_TRUE(repack_w2c(GgmlType::kI2_S, bytes, 128, 1).ok());
  bytes[7] = 0xd5;  // one field 3
  EXPECT_EQ(repack_w2c(GgmlType::kI2_S, bytes, 128, 1).status().code(), StatusCode::kCorruptFile);
  EXPECT_EQ(repack_w2c(GgmlType::kI2_S, bytes, 64, 2).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(repack_w2c(GgmlType::kI2_S, std::span(bytes).first(40), 128, 1).status().code(), StatusCode::kCorruptFile);
  EXPECT_EQ(repack_w2c(GgmlType::kF16, bytes, 128, 1).status().code(), StatusCode::kUnsupported);
}

TEST(CudaW2a8Math, Q8_0SplitHoldsTheDequantizedValues) {
  std::mt19937 rng(9);
  const int64_t n_cols = 96, n_rows = 3;
  const auto x = random_floats(n_cols * n_rows, rng);
  auto bytes = quant::quantize(GgmlType::kQ8_0, x.data(), n_rows, n_cols);
  ASSERT_TRUE(bytes.ok());
  std::vector<float> want(x.size());
  ASSERT_TRUE(quant::dequantize(GgmlType::kQ8_0, *bytes, n_cols * n_rows, want.data()).ok());
  auto split = split_q8_0(*bytes, n_cols, n_rows);
  ASSERT_TRUE(split.ok()) << split.status().to_string();
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(static_cast<float>(split->q[i]) * split->d[i / 32], want[i]) << i;
  }
  EXPECT_FALSE(split_q8_0(std::span(*bytes).first(bytes->size() - 1), n_cols, n_rows).ok());
  EXPECT_FALSE(split_q8_0(*bytes, 48, 6).ok());
}

TEST(CudaW2a8Math, Dp4aTwinIsASignedByteDot) {
  std::mt19937 rng(3);
  const auto naive = [](uint32_t a, uint32_t b, int32_t c) {
    for (int i = 0; i < 4; ++i) c += int8_t(a >> (8 * i)) * int8_t(b >> (8 * i));
    return c;
  };
  for (int it = 0; it < 10000; ++it) {
    const auto a = static_cast<uint32_t>(rng()), b = static_cast<uint32_t>(rng());
    const auto c = static_cast<int32_t>(rng() % 100000) - 50000;
    ASSERT_EQ(dp4a(static_cast<int32_t>(a), static_cast<int32_t>(b), c), naive(a, b, c));
  }
  // Worst cases of the kernel: four codes 2 against 127s and -128s.
  const int32_t twos = unpack_lanes(0xaaaaaaaau, 3);
  EXPECT_EQ(twos, 0x02020202);
  EXPECT_EQ(dp4a(twos, 0x7f7f7f7f, 0), 1016);
  EXPECT_EQ(dp4a(twos, static_cast<int32_t>(0x80808080u), 0), -1024);
}

// Runs the GEMV twin over every row and token and compares with the scalar set's
// matmul_ternary on the CPU's own repack of the same file bytes.
void check_gemv(GgmlType type, const std::vector<uint8_t>& codes, const std::vector<float>& scales,
                const std::vector<int8_t>& q, const std::vector<float>& act_scale_per_token, int64_t n_cols,
                int64_t n_rows, int64_t n_tokens, bool exact) {
  const FileWeight f = ternary_file(type, codes, scales, n_cols, n_rows);
  auto w = repack_w2c(type, f.bytes, n_cols, n_rows);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_TRUE(w2a8_scale_block_ok(n_cols, w->scale_block));

  const cpu::CpuWeight cw = cpu::test::prepare(f, 1);
  const cpu::test::TestQ8 x(q, act_scale_per_token, n_tokens, n_cols);
  std::vector<float> want(static_cast<size_t>(n_tokens * n_rows));
  cpu::kScalarKernels.matmul_ternary(cw, x.rows(), want.data(), 0, n_rows);

  const int64_t n_chunks = n_cols / kChunkCols;
  const int64_t n_blocks = n_cols / w->scale_block;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int8_t* qt = q.data() + t * n_cols;
    std::vector<int32_t> chunk_sum(static_cast<size_t>(n_chunks));
    for (int64_t c = 0; c < n_chunks; ++c) {
      for (int64_t i = 0; i < kChunkCols; ++i) chunk_sum[static_cast<size_t>(c)] += qt[c * kChunkCols + i];
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      const float got = w2a8_row_twin(w->words.data() + r * (n_cols / kWordCols), qt, chunk_sum.data(),
                                      act_scale_per_token[static_cast<size_t>(t)], w->scales.data() + r * n_blocks,
                                      n_cols, w->scale_block);
      const float ref = want[static_cast<size_t>(t * n_rows + r)];
      if (exact) {
        ASSERT_EQ(got, ref) << ggml_type_name(type) << " " << n_rows << "x" << n_cols << " row " << r << " token " << t;
      } else {
        ASSERT_NEAR(got, ref, 2e-6f * (1.0f + std::fabs(ref)) * static_cast<float>(n_blocks))
            << ggml_type_name(type) << " " << n_rows << "x" << n_cols << " row " << r << " token " << t;
      }
    }
  }
}

std::vector<int8_t> random_q(int64_t n, std::mt19937& rng) {
  std::vector<int8_t> q(static_cast<size_t>(n));
  for (auto& v : q) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  return q;
}

// Shapes of the 2B-4T model (2560, 6912 columns) and odd ones: 256 columns (4 of 32 lanes
// busy), 2304 (36 chunks: a second pass of 4 lanes), odd row counts.
constexpr int64_t kCols[] = {256, 768, 2304, 2560, 6912};

TEST(CudaW2a8Math, GemvTwinIsBitExactWithOneScalePerRow) {
  std::mt19937 rng(4);
  for (GgmlType type : kTypes) {
    for (int64_t n_cols : kCols) {
      const int64_t n_rows = 7, n_tokens = 3, n = n_cols * n_rows;
      // TQ: one d in every block of a row (as files made from a BitNet checkpoint): the repack
      // keeps one scale per row and the sum stays in int32.
      std::vector<float> scales(static_cast<size_t>(n / quant::ternary_scale_block(type, n)));
      const int64_t per_row = type == GgmlType::kI2_S ? 1 : n_cols / 256;
      for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.0078125f * static_cast<float>(1 + (i / per_row) % 61);
      if (type == GgmlType::kI2_S) scales.assign(1, 0.6171875f);
      std::vector<float> s(n_tokens);
      for (auto& v : s) v = 127.0f / (0.5f + static_cast<float>(rng() % 1000) / 100.0f);
      check_gemv(type, random_codes(n, rng), scales, random_q(n_tokens * n_cols, rng), s, n_cols, n_rows, n_tokens, true);
    }
  }
}

TEST(CudaW2a8Math, GemvTwinMatchesWithPerBlockScales) {
  std::mt19937 rng(5);
  for (GgmlType type : {GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    for (int64_t n_cols : {256, 768, 2560, 6912}) {
      const int64_t n_rows = 5, n_tokens = 2, n = n_cols * n_rows;
      auto scales = random_scales(type, n, rng);
      scales[1 % scales.size()] += 0.0078125f;  // never uniform
      const std::vector<float> s = {12.7f, 0.127f};
      check_gemv(type, random_codes(n, rng), scales, random_q(n_tokens * n_cols, rng), s, n_cols, n_rows, n_tokens,
                 n_cols == 256);
    }
  }
}

TEST(CudaW2a8Math, GemvTwinWorstCases) {
  // All codes 2 against all 127 and all -128: the largest sums a row can reach, exact.
  for (GgmlType type : kTypes) {
    for (int64_t n_cols : {2560, 6912}) {
      const int64_t n_rows = 2, n_tokens = 3, n = n_cols * n_rows;
      const std::vector<uint8_t> codes(static_cast<size_t>(n), 2);
      std::vector<int8_t> q(static_cast<size_t>(n_tokens * n_cols));
      for (int64_t k = 0; k < n_cols; ++k) {
        q[static_cast<size_t>(k)] = 127;
        q[static_cast<size_t>(n_cols + k)] = -128;
        q[static_cast<size_t>(2 * n_cols + k)] = k % 2 ? 127 : -127;
      }
      std::vector<float> scales(static_cast<size_t>(n / quant::ternary_scale_block(type, n)), 1.0f);
      check_gemv(type, codes, scales, q, {1.0f, 1.0f, 1.0f}, n_cols, n_rows, n_tokens, true);
      // and the value itself: (2 * 127 - 127) * n_cols for the 127s
      const FileWeight f = ternary_file(type, codes, scales, n_cols, n_rows);
      auto w = repack_w2c(type, f.bytes, n_cols, n_rows);
      ASSERT_TRUE(w.ok());
      std::vector<int32_t> sums(static_cast<size_t>(n_cols / kChunkCols), 127 * kChunkCols);
      EXPECT_EQ(w2a8_row_twin(w->words.data(), q.data(), sums.data(), 1.0f, w->scales.data(), n_cols, w->scale_block),
                static_cast<float>(127 * n_cols));
    }
  }
}

TEST(CudaW2a8Math, ScaleBlocksTheLaneGroupsHold) {
  EXPECT_TRUE(w2a8_scale_block_ok(2560, 2560));
  EXPECT_TRUE(w2a8_scale_block_ok(2560, 256));
  EXPECT_TRUE(w2a8_scale_block_ok(2048, 2048));
  EXPECT_FALSE(w2a8_scale_block_ok(2560, 192));   // 3 chunks: not a power of two
  EXPECT_FALSE(w2a8_scale_block_ok(8192, 4096));  // 64 chunks: more than a warp
  EXPECT_FALSE(w2a8_scale_block_ok(2560, 300));
  EXPECT_FALSE(w2a8_scale_block_ok(2600, 2600));  // not whole chunks
}

TEST(CudaW2a8Math, ActivationQuantizationMatchesTheReference) {
  std::mt19937 rng(6);
  std::vector<std::vector<float>> rows;
  for (int64_t n : {64, 2560, 6912}) rows.push_back(random_floats(n, rng, 3.0f));
  rows.push_back(std::vector<float>(128, 0.0f));  // all zero: s = 127 / 1e-5
  std::vector<float> halves(128);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = (static_cast<float>(i) - 63.5f);  // x * s on .5 boundaries
  halves[0] = 127.0f;
  rows.push_back(halves);
  std::vector<float> odd = random_floats(192, rng);
  odd[5] = std::numeric_limits<float>::quiet_NaN();
  odd[9] = -1e30f;
  rows.push_back(odd);
  for (const auto& x : rows) {
    const auto n = static_cast<int64_t>(x.size());
    std::vector<int8_t> want(x.size()), got(x.size());
    int32_t want_sum = 0;
    const float want_s = quant::act_quant_i8(x.data(), n, want.data(), &want_sum);
    std::vector<int32_t> chunk_sum(x.size() / kChunkCols);
    const float s = act_quant_row_twin(x.data(), n, got.data(), chunk_sum.data());
    EXPECT_EQ(s, want_s);
    EXPECT_EQ(got, want);
    int32_t total = 0;
    for (int32_t c : chunk_sum) total += c;
    EXPECT_EQ(total, want_sum);
  }
}

}  // namespace
}  // namespace bitnet::cuda
