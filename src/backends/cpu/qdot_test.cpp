// Every kernel set's quantized-activation row dots (KernelSet::quant_dot) against the scalar
// twins (quant::vec_dot_fn): the integer block sums are the same, only the float accumulation
// runs in another order, so each result is within float rounding of the twin's, bounded by the
// magnitude sum |w_k * a_k| of its terms. Worst cases: every code at its extreme against
// activations of +-127 (an int16 partial sum that could saturate shows as a miss). Types
// without a quantizer (Q2_K, Q3_K, IQ4_NL, IQ4_XS) get block bytes: random, all 0xff, all 0x00.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernel_test_util.h"
#include "backends/cpu/kernels_avx512vnni.h"
#include "core/fp16.h"
#include "gguf/types.h"
#include "quant/q8_0.h"
#include "quant/q8_k.h"
#include "quant/test_util.h"
#include "quant/quant.h"

namespace bitnet::cpu {
namespace {

// Every type with a scalar twin (the list grows with quant::vec_dot_fn).
std::vector<GgmlType> dot_types() {
  std::vector<GgmlType> types;
  for (uint32_t t = 0; t < 64; ++t) {
    const auto type = static_cast<GgmlType>(t);
    if (ggml_type_traits(t).has_value() && quant::vec_dot_fn(type) != nullptr) types.push_back(type);
  }
  return types;
}

std::vector<uint8_t> quantized(GgmlType type, const std::vector<float>& x) {
  auto q = quant::quantize(type, x.data(), 1, static_cast<int64_t>(x.size()));
  EXPECT_TRUE(q.ok()) << q.status().to_string();
  return q.ok() ? std::move(*q) : std::vector<uint8_t>{};
}

std::vector<float> dequantized(GgmlType type, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  EXPECT_TRUE(quant::dequantize(type, q, n, y.data()).ok());
  return y;
}

// Activations as the dot reads them (Q8_1 and Q8_K carry sums beside the values).
std::vector<float> dequantized_act(GgmlType type, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  const int64_t block = type == GgmlType::kQ8_K ? 256 : 32;
  const int64_t bytes = type == GgmlType::kQ8_K ? quant::kQ8_KBlockBytes : type == GgmlType::kQ8_1 ? 36 : 34;
  auto* fn = type == GgmlType::kQ8_K ? quant::q8_K_dequantize_block
             : type == GgmlType::kQ8_1 ? quant::q8_1_dequantize_block
                                       : quant::q8_0_dequantize_block;
  for (int64_t b = 0; b < n / block; ++b) fn(q.data() + b * bytes, y.data() + b * block);
  return y;
}

// Inputs of n elements: normal; every value the same large positive one (codes at their top);
// alternating +-1 with a few large ones (codes at both ends, activations at +-127); values
// that vary a lot from block to block.
std::vector<float> inputs(int kind, int64_t n, std::mt19937& rng) {
  std::vector<float> x = test::random_floats(n, rng);
  for (int64_t i = 0; i < n; ++i) {
    auto& v = x[static_cast<size_t>(i)];
    switch (kind) {
      case 1: v = 3.0f; break;
      case 2: v = (i % 2 == 0 ? 1.0f : -1.0f) * (i % 7 == 0 ? 4.0f : 1.0f); break;
      case 3: v *= std::exp2(static_cast<float>(i / 32 % 9) - 4.0f); break;
      default: break;
    }
  }
  return x;
}

// n weights of `type` of kind 0..3 (as inputs()), through ggml's reference quantizer.
std::vector<uint8_t> weights(GgmlType type, int kind, int64_t n, std::mt19937& rng) {
  return quantized(type, inputs(kind, n, rng));
}

class QuantDotMatchesTwin : public test::EverySet {};

TEST_P(QuantDotMatchesTwin, EveryTypeShapeAndExtreme) {
  std::mt19937 rng(11);
  for (GgmlType type : dot_types()) {
    const GgmlType act_type = *quant::vec_dot_type(type);
    const QuantDotFn dot = set().quant_dot(type);
    ASSERT_NE(dot, nullptr) << ggml_type_name(type);
    for (int64_t n : {256, 512, 2560, 4096}) {
      for (int w_kind = 0; w_kind < 4; ++w_kind) {
        for (int a_kind = 0; a_kind < 4; ++a_kind) {
          SCOPED_TRACE(std::string(ggml_type_name(type)) + " n=" + std::to_string(n) + " weights " +
                       std::to_string(w_kind) + " activations " + std::to_string(a_kind));
          const auto w = weights(type, w_kind, n, rng);
          auto xa = inputs(a_kind, n, rng);
          if (a_kind == 2) {
            for (size_t i = 0; i < xa.size(); ++i) xa[i] = -xa[i] * (w_kind == 2 ? 1.0f : -1.0f);
          }
          const auto a = quantized(act_type, xa);
          const float want = quant::vec_dot_fn(type)(n, w.data(), a.data());
          const float got = dot(n, w.data(), a.data());
          const auto wd = dequantized(type, w, n);
          const auto ad = dequantized_act(act_type, a, n);
          double magnitude = 0.0;
          for (size_t i = 0; i < wd.size(); ++i) magnitude += std::abs(static_cast<double>(wd[i]) * ad[i]);
          EXPECT_NEAR(got, want, 2e-6 * magnitude + 1e-30);
        }
      }
    }
  }
}

// The 32-element formats at widths that are no multiple of 4 blocks (kernels may take blocks
// in groups and finish one at a time), and of a single block.
TEST_P(QuantDotMatchesTwin, ShortRowsOfThe32ElementFormats) {
  std::mt19937 rng(12);
  for (GgmlType type : dot_types()) {
    if (ggml_type_traits(static_cast<uint32_t>(type))->block_elems != 32) continue;
    const GgmlType act_type = *quant::vec_dot_type(type);
    const QuantDotFn dot = set().quant_dot(type);
    for (int64_t n : {32, 64, 96, 160, 224, 288}) {
      for (int kind = 0; kind < 4; ++kind) {
        SCOPED_TRACE(std::string(ggml_type_name(type)) + " n=" + std::to_string(n) + " kind " + std::to_string(kind));
        const auto w = weights(type, kind, n, rng);
        const auto a = quantized(act_type, inputs((kind + 1) % 4, n, rng));
        const float want = quant::vec_dot_fn(type)(n, w.data(), a.data());
        const auto wd = dequantized(type, w, n);
        const auto ad = dequantized_act(act_type, a, n);
        double magnitude = 0.0;
        for (size_t i = 0; i < wd.size(); ++i) magnitude += std::abs(static_cast<double>(wd[i]) * ad[i]);
        EXPECT_NEAR(dot(n, w.data(), a.data()), want, 2e-6 * magnitude + 1e-30);
      }
    }
  }
}

// Activation blocks of random bytes with finite scales: every int8 value but -128, which ggml's
// quantizers never write and the row dots' sign trick (|w| times x with w's sign) cannot negate;
// Q8_1's s (which quant::testing::random_blocks leaves random) set to its d.
std::vector<uint8_t> random_act_blocks(GgmlType type, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> q = quant::testing::random_blocks(type, n, rng);
  const size_t block_bytes = type == GgmlType::kQ8_1 ? 36 : 34;
  const size_t qs = block_bytes - 32;
  for (size_t b = 0; b < q.size(); b += block_bytes) {
    if (type == GgmlType::kQ8_1) std::copy_n(q.begin() + static_cast<std::ptrdiff_t>(b), 2, q.begin() + static_cast<std::ptrdiff_t>(b + 2));
    for (size_t i = b + qs; i < b + block_bytes; ++i) q[i] = q[i] == 0x80 ? 0x81 : q[i];
  }
  return q;
}

// A set's prefill tile (KernelSet::quant_tile) gives each (row, token) what its quant_dot gives,
// bit for bit: 1 and 3 weight rows against 1 to kQuantTileTokens activation rows, several widths
// (for the 32-element formats: a group of 8 blocks and a short one, and no full group), extreme
// inputs, and for the 32-element formats blocks of random bytes (codes at every value,
// activations at every value but -128).
TEST_P(QuantDotMatchesTwin, TilesEqualTheRowDot) {
  if (set().quant_tile == nullptr) GTEST_SKIP() << set().name << " has no prefill tiles";
  std::mt19937 rng(13);
  constexpr int kRows = 3;
  int tiled = 0;
  for (GgmlType type : dot_types()) {
    const QuantTileFn tile = set().quant_tile(type);
    if (tile == nullptr) continue;
    ++tiled;
    const GgmlType act_type = *quant::vec_dot_type(type);
    const bool k_quant = ggml_type_traits(static_cast<uint32_t>(type))->block_elems == 256;
    for (int64_t n : k_quant ? std::vector<int64_t>{256, 768, 2560} : std::vector<int64_t>{32, 96, 256, 288, 576, 2560}) {
      for (int kind = 0; kind < (k_quant ? 4 : 5); ++kind) {
        SCOPED_TRACE(std::string(ggml_type_name(type)) + " n=" + std::to_string(n) + " kind " + std::to_string(kind));
        std::vector<uint8_t> w;
        for (int r = 0; r < kRows; ++r) {
          const auto row = kind == 4 ? quant::testing::random_blocks(type, n, rng) : weights(type, (kind + r) % 4, n, rng);
          w.insert(w.end(), row.begin(), row.end());
        }
        const int64_t w_row_bytes = static_cast<int64_t>(w.size()) / kRows;
        std::vector<uint8_t> act;
        for (int j = 0; j < kQuantTileTokens; ++j) {
          const auto a = kind == 4 ? random_act_blocks(act_type, n, rng) : quantized(act_type, inputs((kind + j) % 4, n, rng));
          act.insert(act.end(), a.begin(), a.end());
        }
        const int64_t row_bytes = static_cast<int64_t>(act.size()) / kQuantTileTokens;
        for (int n_rows : {1, kRows}) {
          for (int n_act = 1; n_act <= kQuantTileTokens; ++n_act) {
            float out[kRows * kQuantTileTokens] = {};
            tile(n, w.data(), w_row_bytes, n_rows, act.data(), row_bytes, n_act, out, n_rows);
            for (int r = 0; r < n_rows; ++r) {
              for (int j = 0; j < n_act; ++j) {
                const float want = set().quant_dot(type)(n, w.data() + r * w_row_bytes, act.data() + j * row_bytes);
                EXPECT_EQ(std::bit_cast<uint32_t>(out[j * n_rows + r]), std::bit_cast<uint32_t>(want))
                    << "row " << r << " of " << n_rows << ", token " << j << " of " << n_act;
              }
            }
          }
        }
      }
    }
  }
  if (tiled == 0) GTEST_SKIP() << set().name << " tiles no type";
}

// A set's activation quantizer (KernelSet::quantize_act_row) writes ggml's reference Q8_0,
// Q8_1 and Q8_K blocks byte for byte: random rows, halves (x * id = k + 0.5 with d = 1), zero blocks, a
// subnormal max (1 / d overflows), inf, NaN and huge values.
TEST_P(QuantDotMatchesTwin, ActivationQuantizerEqualsTheReference) {
  if (set().quantize_act_row == nullptr) GTEST_SKIP() << set().name << " quantizes activations with the reference";
  std::mt19937 rng(14);
  constexpr int64_t kBlocks = 12;
  std::vector<float> x = test::random_floats(32 * kBlocks, rng);
  // Block 1: d = 1 (max 127), so x * id keeps the halves -14.5 .. 15.5 (even and odd ones).
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(32 + j)] = static_cast<float>(j - 16) + 0.5f;
  x[32] = 127.0f;
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(64 + j)] = 0.0f;
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(96 + j)] = 1e-40f * static_cast<float>(j % 3);
  x[128 + 5] = INFINITY;
  x[160 + 7] = NAN;
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(192 + j)] = 1e30f * static_cast<float>(j - 16);
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(224 + j)] = (static_cast<float>(j) - 15.5f) * 0.5f;  // .25 steps
  for (GgmlType act : {GgmlType::kQ8_0, GgmlType::kQ8_1}) {
    SCOPED_TRACE(ggml_type_name(act));
    const int64_t block_bytes = act == GgmlType::kQ8_1 ? 36 : 34;
    std::vector<uint8_t> want(static_cast<size_t>(kBlocks * block_bytes)), got(want.size(), 0xAA);
    for (int64_t b = 0; b < kBlocks; ++b) {
      (act == GgmlType::kQ8_1 ? quant::q8_1_quantize_block : quant::q8_0_quantize_block)(x.data() + 32 * b, want.data() + b * block_bytes);
    }
    ASSERT_TRUE(set().quantize_act_row(act, x.data(), 32 * kBlocks, got.data()));
    for (int64_t b = 0; b < kBlocks; ++b) {
      EXPECT_TRUE(std::equal(got.begin() + b * block_bytes, got.begin() + (b + 1) * block_bytes, want.begin() + b * block_bytes))
          << "block " << b;
    }
  }
  // Q8_K: 256-element blocks. Block 0 random; block 1 with max = -127 (iscale = 1) and halves
  // (to even); block 2 with +-8 first at -8 (the first of largest magnitude wins); block 3 all
  // zeros; blocks 4, 5 with inf and NaN; block 6 with a subnormal max.
  std::vector<float> k(256 * 7);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (float& v : k) v = nd(rng);
  for (int j = 0; j < 256; ++j) k[static_cast<size_t>(256 + j)] = static_cast<float>(j % 64 - 32) + 0.5f;
  k[256 + 9] = -127.0f;
  for (int j = 0; j < 256; ++j) k[static_cast<size_t>(512 + j)] = static_cast<float>(j % 9) - 4.0f;
  k[512 + 3] = -8.0f;
  k[512 + 100] = 8.0f;
  for (int j = 0; j < 256; ++j) k[static_cast<size_t>(768 + j)] = 0.0f;
  k[1024 + 17] = -INFINITY;
  k[1280 + 200] = NAN;
  for (int j = 0; j < 256; ++j) k[static_cast<size_t>(1536 + j)] = 1e-42f * static_cast<float>(j % 5);
  const int64_t kb = quant::kQ8_KBlockBytes;
  std::vector<uint8_t> want(static_cast<size_t>(7 * kb)), got(want.size(), 0xAA);
  for (int64_t b = 0; b < 7; ++b) quant::q8_K_quantize_block(k.data() + 256 * b, want.data() + b * kb);
  ASSERT_TRUE(set().quantize_act_row(GgmlType::kQ8_K, k.data(), 256 * 7, got.data()));
  for (int64_t b = 0; b < 7; ++b) {
    EXPECT_TRUE(std::equal(got.begin() + b * kb, got.begin() + (b + 1) * kb, want.begin() + b * kb)) << "q8_K block " << b;
  }
}

#if defined(__x86_64__)
// Where the AVX-512 VNNI Q6_K kernels prefetch is chosen by microarchitecture (Zen 4: L2, the
// rest: L1); each choice is its own instantiation of the row dot and the tile, and both match
// the twin on rows longer than the prefetch distance (the prefetches run past a row's end).
TEST(Avx512Q6_K, BothRowPrefetchesMatchTheTwin) {
  EXPECT_EQ(avx512vnni::row_prefetch_for(test::x86_cpu(true, 0x19)), avx512vnni::RowPrefetch::kL2);
  EXPECT_EQ(avx512vnni::row_prefetch_for(test::x86_cpu(true, 0x1a)), avx512vnni::RowPrefetch::kL1);
  EXPECT_EQ(avx512vnni::row_prefetch_for(test::x86_cpu(false, 6)), avx512vnni::RowPrefetch::kL1);

  const KernelSet& set = test::set_named("avx512vnni");
  if (const std::string why = test::lacks(set); !why.empty()) GTEST_SKIP() << why;
  const avx512vnni::RowPrefetch chosen = avx512vnni::row_prefetch();
  std::mt19937 rng(17);
  constexpr int64_t n = 16384;  // 64 blocks, 13 KB per row
  constexpr int kRows = 2;
  std::vector<uint8_t> w;
  for (int r = 0; r < kRows; ++r) {
    const auto row = weights(GgmlType::kQ6_K, r, n, rng);
    w.insert(w.end(), row.begin(), row.end());
  }
  const int64_t w_row_bytes = static_cast<int64_t>(w.size()) / kRows;
  const auto a = quantized(GgmlType::kQ8_K, inputs(2, n, rng));
  QuantDotFn dots[2] = {};
  for (avx512vnni::RowPrefetch p : {avx512vnni::RowPrefetch::kL1, avx512vnni::RowPrefetch::kL2}) {
    avx512vnni::set_row_prefetch(p);
    const QuantDotFn dot = set.quant_dot(GgmlType::kQ6_K);
    dots[static_cast<int>(p)] = dot;
    float tiled[kRows] = {};
    set.quant_tile(GgmlType::kQ6_K)(n, w.data(), w_row_bytes, kRows, a.data(), static_cast<int64_t>(a.size()), 1, tiled, kRows);
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* row = w.data() + r * w_row_bytes;
      const float got = dot(n, row, a.data());
      const float want = quant::vec_dot_fn(GgmlType::kQ6_K)(n, row, a.data());
      EXPECT_NEAR(got, want, 1e-5 * std::abs(want) + 1e-3) << "row " << r;
      EXPECT_EQ(std::bit_cast<uint32_t>(tiled[r]), std::bit_cast<uint32_t>(got)) << "row " << r;
    }
  }
  EXPECT_NE(dots[0], dots[1]) << "both choices ran the same row dot";
  avx512vnni::set_row_prefetch(chosen);
}
#endif

INSTANTIATE_TEST_SUITE_P(Sets, QuantDotMatchesTwin, testing::ValuesIn(test::set_names()), test::set_param_name);

}  // namespace
}  // namespace bitnet::cpu
