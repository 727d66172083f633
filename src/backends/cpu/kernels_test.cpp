// Float kernels: the scalar twin against straightforward double-precision references, and
// every kernel set against the scalar twin (within rounding: their sums run in other orders).
#include "backends/cpu/kernels.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/attention_split.h"
#include "backends/cpu/kernel_test_util.h"
#include "core/fp16.h"
#include "quant/quant.h"

namespace bitnet::cpu {
namespace {

using test::EverySet;
using test::random_floats;

// |got - want| <= tol * (1 + |want|) element by element, the first mismatches named.
void expect_close(std::span<const float> got, std::span<const float> want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= tol * (1.0 + std::abs(static_cast<double>(want[i]))))) {
      ADD_FAILURE() << what << " [" << i << "]: " << got[i] << " vs " << want[i];
      ++reported;
    }
  }
}

// A K and V cache as an F16 cache holds them: the halves, and the floats they round to.
struct HalfCache {
  std::vector<uint16_t> k16, v16;
  std::vector<float> k_rounded, v_rounded;
  HalfCache(const std::vector<float>& k, const std::vector<float>& v) : k16(k.size()), v16(v.size()), k_rounded(k.size()), v_rounded(v.size()) {
    fp32_to_fp16_row(k.data(), static_cast<int64_t>(k.size()), k16.data());
    fp32_to_fp16_row(v.data(), static_cast<int64_t>(v.size()), v16.data());
    for (size_t i = 0; i < k.size(); ++i) k_rounded[i] = fp16_to_fp32(k16[i]);
    for (size_t i = 0; i < v.size(); ++i) v_rounded[i] = fp16_to_fp32(v16[i]);
  }
};

test::FileWeight float_file(GgmlType type, int64_t n_cols, int64_t n_rows, std::mt19937& rng) {
  const auto values = random_floats(n_cols * n_rows, rng);
  auto bytes = quant::quantize(type, values.data(), n_rows, n_cols);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return {bytes.ok() ? std::move(*bytes) : std::vector<uint8_t>{}, type, n_cols, n_rows};
}

class FloatMatmul : public testing::TestWithParam<GgmlType> {};

TEST_P(FloatMatmul, ScalarMatchesDoubleReferenceOfDequantizedWeights) {
  const GgmlType type = GetParam();
  std::mt19937 rng(3);
  const int64_t n_cols = 256, n_rows = 21, n_tokens = 2;
  const auto file = float_file(type, n_cols, n_rows, rng);
  const CpuWeight w = test::prepare(file, 1);
  std::vector<float> deq(static_cast<size_t>(n_cols * n_rows));
  ASSERT_TRUE(quant::dequantize(type, file.bytes, n_cols * n_rows, deq.data()).ok());
  const auto x = random_floats(n_cols * n_tokens, rng);
  std::vector<float> y(static_cast<size_t>(n_rows * n_tokens));
  scalar::matmul_float(w, x.data(), n_tokens, y.data(), 0, n_rows);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) {
      double ref = 0.0;
      for (int64_t k = 0; k < n_cols; ++k) ref += static_cast<double>(deq[static_cast<size_t>(r * n_cols + k)]) * x[static_cast<size_t>(t * n_cols + k)];
      double tol = 1e-4 * (1.0 + std::abs(ref));
      if (quant_act_format(type)) {
        // Q4_0, Q6_K, ... meet 8-bit activations (Q8_0/Q8_K), as in llama.cpp: each activation
        // moves by at most half a step of its block's max|x| / 127 <= the row's, so the dot by
        // at most that times sum |w|.
        double max_x = 0.0, sum_w = 0.0;
        for (int64_t k = 0; k < n_cols; ++k) {
          max_x = std::max(max_x, std::abs(static_cast<double>(x[static_cast<size_t>(t * n_cols + k)])));
          sum_w += std::abs(static_cast<double>(deq[static_cast<size_t>(r * n_cols + k)]));
        }
        tol += 0.5 * max_x / 127.0 * sum_w;
      }
      EXPECT_NEAR(y[static_cast<size_t>(t * n_rows + r)], ref, tol);
    }
  }
}

// The scalar twin's Q4_0 / Q4_1 / Q4_K / Q5_K / Q6_K matmul is ggml's generic vec_dot on the
// activations quantized to the type's vec_dot_type, bit for bit.
TEST(FloatMatmul, QuantizedTypesAreLlamaCppDotOnQuantizedActivations) {
  std::mt19937 rng(4);
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    const int64_t n_cols = 512, n_rows = 5, n_tokens = 3;
    const auto file = float_file(type, n_cols, n_rows, rng);
    const CpuWeight w = test::prepare(file, 1);
    const auto x = random_floats(n_cols * n_tokens, rng);
    std::vector<float> y(static_cast<size_t>(n_rows * n_tokens));
    scalar::matmul_float(w, x.data(), n_tokens, y.data(), 0, n_rows);
    const auto row_bytes = static_cast<size_t>(w.row_bytes);
    for (int64_t t = 0; t < n_tokens; ++t) {
      auto a = quant::quantize(*quant::vec_dot_type(type), x.data() + t * n_cols, 1, n_cols);
      ASSERT_TRUE(a.ok()) << a.status().to_string();
      for (int64_t r = 0; r < n_rows; ++r) {
        auto want = quant::vec_dot(type, std::span(file.bytes).subspan(r * row_bytes, row_bytes), *a, n_cols);
        ASSERT_TRUE(want.ok()) << want.status().to_string();
        EXPECT_EQ(y[static_cast<size_t>(t * n_rows + r)], *want) << "row " << r << " token " << t;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, FloatMatmul,
                         testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                                         GgmlType::kQ6_K, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K,
                                         GgmlType::kQ5_K, GgmlType::kQ5_0));

// Every set's float matmul against the scalar twin, on odd shapes and thread-split ranges.
class FloatMatchesTwin : public EverySet {};

TEST_P(FloatMatchesTwin, OddShapes) {
  std::mt19937 rng(5);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    for (int64_t n_cols : {32, 100, 256, 2560}) {
      if (n_cols % ggml_type_traits(static_cast<uint32_t>(type))->block_elems != 0) continue;
      for (int64_t n_rows : {1, 3, 5, 13, 37}) {
        const auto file = float_file(type, n_cols, n_rows, rng);
        const CpuWeight w = test::prepare(file, 1);
        for (int64_t n_tokens : {1, 2, 3, 5}) {
          const auto x = random_floats(n_cols * n_tokens, rng);
          std::vector<float> want(static_cast<size_t>(n_rows * n_tokens));
          std::vector<float> got(want.size(), NAN);
          scalar::matmul_float(w, x.data(), n_tokens, want.data(), 0, n_rows);
          const int64_t mid = n_rows / 3;
          set().matmul_float(w, x.data(), n_tokens, got.data(), 0, mid);
          set().matmul_float(w, x.data(), n_tokens, got.data(), mid, n_rows);
          // Float sums of n_cols products in another order: a few ulp of the largest partial sums.
          expect_close(got, want, 2e-5 * std::sqrt(static_cast<double>(n_cols)),
                       std::string(ggml_type_name(type)) + " " + std::to_string(n_rows) + "x" +
                           std::to_string(n_cols) + " tokens " + std::to_string(n_tokens));
        }
      }
    }
  }
}

TEST_P(FloatMatchesTwin, RmsNorm) {
  std::mt19937 rng(6);
  for (int64_t n : {1, 7, 64, 2560, 6913}) {
    const auto x = random_floats(n, rng, 5.0f);
    const auto g = random_floats(n, rng);
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    scalar::rms_norm_row(x.data(), g.data(), n, 1e-5f, want.data());
    set().rms_norm_row(x.data(), g.data(), n, 1e-5f, got.data());
    expect_close(got, want, 1e-6, "rms_norm n " + std::to_string(n));
  }
}

TEST_P(FloatMatchesTwin, Attention) {
  std::mt19937 rng(8);
  for (int32_t head_dim : {8, 64, 72, 128}) {
    for (int64_t n_pos : {1, 5, 300}) {
      const int64_t n_embd_kv = 2 * head_dim, kv_off = head_dim;
      const auto q = random_floats(head_dim, rng);
      const auto k = random_floats(n_pos * n_embd_kv, rng);
      const auto v = random_floats(n_pos * n_embd_kv, rng);
      std::vector<float> scores(static_cast<size_t>(n_pos)), want(static_cast<size_t>(head_dim)), got(want.size());
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      scalar::attention_head(q.data(), k.data(), v.data(), n_pos, KvRowMap{}, n_embd_kv, kv_off, head_dim, scale, scores.data(), want.data());
      set().attention_head(q.data(), k.data(), v.data(), n_pos, KvRowMap{}, n_embd_kv, kv_off, head_dim, scale, scores.data(), got.data());
      expect_close(got, want, 1e-5, "attention head_dim " + std::to_string(head_dim) + " n_pos " + std::to_string(n_pos));
    }
  }
}

// attention_heads (GQA: n_q query heads over one kv head, each K and V row read once for the
// group) gives each head attention_head's result bit for bit, through a block table too, for
// both cache types, on odd head sizes and on position counts around its 64-position blocks.
TEST_P(FloatMatchesTwin, AttentionHeadsOfAGroupEqualEachHeadAlone) {
  if (set().attention_heads == nullptr || set().attention_heads_f16 == nullptr) {
    GTEST_SKIP() << set().name << " has no grouped attention (the backend runs attention_head per head)";
  }
  std::mt19937 rng(13);
  constexpr int32_t kShift = 4;
  for (int32_t head_dim : {8, 64, 72, 128}) {
    for (int64_t n_pos : {1, 5, 63, 64, 65, 200}) {
      for (int32_t n_q : {1, 3, 4, kMaxGroupHeads}) {
        const int64_t n_embd_kv = 2 * head_dim, kv_off = head_dim;
        const int64_t n_blocks = (n_pos >> kShift) + 2;
        std::vector<int32_t> table(static_cast<size_t>(n_blocks));
        for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 5 + 1) % table.size());
        const KvRowMap rows{table.data(), kShift};
        const auto q = random_floats(int64_t{n_q} * head_dim, rng);
        const auto k = random_floats(n_blocks * (1 << kShift) * n_embd_kv, rng);
        const auto v = random_floats(n_blocks * (1 << kShift) * n_embd_kv, rng);
        std::vector<uint16_t> k16(k.size()), v16(v.size());
        fp32_to_fp16_row(k.data(), static_cast<int64_t>(k.size()), k16.data());
        fp32_to_fp16_row(v.data(), static_cast<int64_t>(v.size()), v16.data());
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        const std::string what = "head_dim " + std::to_string(head_dim) + " n_pos " + std::to_string(n_pos) + " n_q " +
                                 std::to_string(n_q);
        for (const bool f16 : {false, true}) {
          std::vector<float> scores(static_cast<size_t>(kMaxGroupHeads * n_pos));
          std::vector<float> got(q.size()), want(q.size());
          for (int32_t h = 0; h < n_q; ++h) {
            const float* qh = q.data() + int64_t{h} * head_dim;
            float* wh = want.data() + int64_t{h} * head_dim;
            if (f16) {
              set().attention_head_f16(qh, k16.data(), v16.data(), n_pos, rows, n_embd_kv, kv_off, head_dim, scale, scores.data(), wh);
            } else {
              set().attention_head(qh, k.data(), v.data(), n_pos, rows, n_embd_kv, kv_off, head_dim, scale, scores.data(), wh);
            }
          }
          if (f16) {
            set().attention_heads_f16(q.data(), n_q, k16.data(), v16.data(), n_pos, rows, n_embd_kv, kv_off, head_dim, scale,
                                      scores.data(), got.data());
          } else {
            set().attention_heads(q.data(), n_q, k.data(), v.data(), n_pos, rows, n_embd_kv, kv_off, head_dim, scale,
                                  scores.data(), got.data());
          }
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << what << (f16 ? " f16" : " f32");
        }
      }
    }
  }
}

// attention_heads_part over consecutive ranges of positions, merged by combine_attention_parts,
// gives the whole attention: against the scalar twin's, for both cache types, through a block
// table, on parts of the backend's size and of an odd one, the last part shorter.
TEST_P(FloatMatchesTwin, AttentionPartsCombineToTheWhole) {
  if (set().attention_heads_part == nullptr || set().attention_heads_part_f16 == nullptr) {
    GTEST_SKIP() << set().name << " has no split attention (the backend attends to all positions in one call)";
  }
  std::mt19937 rng(14);
  constexpr int32_t kShift = 4;
  for (int32_t head_dim : {8, 64, 72, 128}) {
    for (int64_t n_pos : {1, 100, 513, 1300}) {
      for (int64_t part : {kAttentionPartPositions, int64_t{37}}) {
        for (int32_t n_q : {1, 2, 3}) {  // the AVX-512 row kernels' passes: 8 rows for 1-2 heads, 4 for more
          const int64_t row_stride = 2 * head_dim, kv_off = head_dim;
          const int64_t n_blocks = (n_pos >> kShift) + 2;
          std::vector<int32_t> table(static_cast<size_t>(n_blocks));
          for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 7 + 3) % table.size());
          const KvRowMap rows{table.data(), kShift};
          const auto q = random_floats(int64_t{n_q} * head_dim, rng);
          // Scores spread over several units, so that the parts' maxima differ.
          const auto k = random_floats(n_blocks * (1 << kShift) * row_stride, rng, 3.0f);
          const auto v = random_floats(n_blocks * (1 << kShift) * row_stride, rng);
          const HalfCache half(k, v);
          const std::vector<uint16_t>& k16 = half.k16;
          const std::vector<uint16_t>& v16 = half.v16;
          const std::vector<float>& k_rounded = half.k_rounded;
          const std::vector<float>& v_rounded = half.v_rounded;
          const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
          const int64_t n_parts = (n_pos + part - 1) / part;
          for (const bool f16 : {false, true}) {
            const std::string what = "head_dim " + std::to_string(head_dim) + " n_pos " + std::to_string(n_pos) + " n_q " + std::to_string(n_q) + " part " +
                                     std::to_string(part) + (f16 ? " f16" : " f32");
            std::vector<float> want(q.size()), got(q.size());
            std::vector<float> scores(static_cast<size_t>(n_pos));
            for (int32_t h = 0; h < n_q; ++h) {
              scalar::attention_head(q.data() + h * head_dim, f16 ? k_rounded.data() : k.data(), f16 ? v_rounded.data() : v.data(),
                                     n_pos, rows, row_stride, kv_off, head_dim, scale, scores.data(), want.data() + h * head_dim);
            }
            std::vector<float> outs(static_cast<size_t>(n_parts * n_q * head_dim), NAN), maxes(static_cast<size_t>(n_parts * n_q));
            std::vector<double> sums(maxes.size());
            std::vector<float> part_scores(static_cast<size_t>(n_q * part));
            for (int64_t c = 0; c < n_parts; ++c) {
              const int64_t j1 = std::min(n_pos, (c + 1) * part);
              float* o = outs.data() + c * n_q * head_dim;
              if (f16) {
                set().attention_heads_part_f16(q.data(), n_q, k16.data(), v16.data(), c * part, j1, rows, row_stride, kv_off, head_dim,
                                               scale, part_scores.data(), o, maxes.data() + c * n_q, sums.data() + c * n_q);
              } else {
                set().attention_heads_part(q.data(), n_q, k.data(), v.data(), c * part, j1, rows, row_stride, kv_off, head_dim, scale,
                                           part_scores.data(), o, maxes.data() + c * n_q, sums.data() + c * n_q);
              }
            }
            combine_attention_parts(n_parts, n_q, head_dim, outs.data(), maxes.data(), sums.data(), got.data());
            expect_close(got, want, 1e-5, what);
          }
        }
      }
    }
  }
}

// A paged cache (blocks of 16 positions in a shuffled order, one block unused) gives the result
// of the same rows stored contiguously, bit for bit, in every set and for both cache types.
TEST_P(FloatMatchesTwin, AttentionThroughABlockTable) {
  std::mt19937 rng(12);
  constexpr int32_t kShift = 4, kBlock = 1 << kShift;
  for (int64_t n_pos : {1, 16, 37, 100}) {
    const int32_t head_dim = 64;
    const int64_t n_embd_kv = 2 * head_dim, kv_off = head_dim;
    const int64_t n_blocks = (n_pos + kBlock - 1) / kBlock + 1;
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(table.size() - 1 - i);  // reversed
    const auto q = random_floats(head_dim, rng);
    const auto k = random_floats(n_pos * n_embd_kv, rng);
    const auto v = random_floats(n_pos * n_embd_kv, rng);
    std::vector<float> kp(static_cast<size_t>(n_blocks * kBlock * n_embd_kv), 1e9f), vp(kp.size(), 1e9f);
    const KvRowMap rows{table.data(), kShift};
    for (int64_t j = 0; j < n_pos; ++j) {
      std::copy_n(k.begin() + j * n_embd_kv, n_embd_kv, kp.begin() + rows.row(j) * n_embd_kv);
      std::copy_n(v.begin() + j * n_embd_kv, n_embd_kv, vp.begin() + rows.row(j) * n_embd_kv);
    }
    std::vector<float> scores(static_cast<size_t>(n_pos)), want(static_cast<size_t>(head_dim)), got(want.size());
    const float scale = 0.125f;
    set().attention_head(q.data(), k.data(), v.data(), n_pos, KvRowMap{}, n_embd_kv, kv_off, head_dim, scale, scores.data(), want.data());
    set().attention_head(q.data(), kp.data(), vp.data(), n_pos, rows, n_embd_kv, kv_off, head_dim, scale, scores.data(), got.data());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "n_pos " << n_pos;
    std::vector<uint16_t> k16(k.size()), v16(v.size()), kp16(kp.size()), vp16(vp.size());
    fp32_to_fp16_row(k.data(), static_cast<int64_t>(k.size()), k16.data());
    fp32_to_fp16_row(v.data(), static_cast<int64_t>(v.size()), v16.data());
    fp32_to_fp16_row(kp.data(), static_cast<int64_t>(kp.size()), kp16.data());
    fp32_to_fp16_row(vp.data(), static_cast<int64_t>(vp.size()), vp16.data());
    set().attention_head_f16(q.data(), k16.data(), v16.data(), n_pos, KvRowMap{}, n_embd_kv, kv_off, head_dim, scale, scores.data(), want.data());
    set().attention_head_f16(q.data(), kp16.data(), vp16.data(), n_pos, rows, n_embd_kv, kv_off, head_dim, scale, scores.data(), got.data());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float))) << "f16 n_pos " << n_pos;
  }
}

// An F16 cache: every set against the scalar twin on odd head sizes and positions, and each
// set's F16 kernel equal, bit for bit, to its own F32 kernel on the rounded cache (the
// elements are converted exactly and then used in the same operations).
TEST_P(FloatMatchesTwin, AttentionF16) {
  std::mt19937 rng(10);
  for (int32_t head_dim : {8, 13, 64, 72, 128}) {
    for (int64_t n_pos : {1, 5, 300}) {
      const int64_t n_embd_kv = 2 * head_dim, kv_off = head_dim;
      const auto q = random_floats(head_dim, rng);
      const auto k = random_floats(n_pos * n_embd_kv, rng);
      const auto v = random_floats(n_pos * n_embd_kv, rng);
      const HalfCache half(k, v);
      const std::vector<uint16_t>& k16 = half.k16;
      const std::vector<uint16_t>& v16 = half.v16;
      const std::vector<float>& k_rounded = half.k_rounded;
      const std::vector<float>& v_rounded = half.v_rounded;
      std::vector<float> scores(static_cast<size_t>(n_pos)), want(static_cast<size_t>(head_dim)), got(want.size()),
          same_set_f32(want.size());
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      const std::string what = "attention_f16 head_dim " + std::to_string(head_dim) + " n_pos " + std::to_string(n_pos);
      scalar::attention_head(q.data(), k_rounded.data(), v_rounded.data(), n_pos, KvRowMap{}, n_embd_kv, kv_off, head_dim, scale,
                             scores.data(), want.data());
      set().attention_head_f16(q.data(), k16.data(), v16.data(), n_pos, KvRowMap{}, n_embd_kv, kv_off, head_dim, scale,
                               scores.data(), got.data());
      expect_close(got, want, 1e-5, what);
      set().attention_head(q.data(), k_rounded.data(), v_rounded.data(), n_pos, KvRowMap{}, n_embd_kv, kv_off, head_dim, scale,
                           scores.data(), same_set_f32.data());
      EXPECT_EQ(0, std::memcmp(got.data(), same_set_f32.data(), got.size() * sizeof(float))) << what;
    }
  }
}

// The rows kStoreKv writes: fp32_to_fp16 (round to nearest even) element by element.
TEST(Fp16Rows, RoundToNearestEvenAsTheScalarConversion) {
  std::mt19937 rng(11);
  auto x = random_floats(1000, rng, 70000.0f);  // past 65504: some overflow to inf
  x[0] = 1.0f + std::ldexp(1.0f, -11);      // a tie: rounds down to even 1.0
  x[1] = 1.0f + 3 * std::ldexp(1.0f, -11);  // a tie: rounds up to even
  x[2] = 1e-7f;                             // subnormal half
  std::vector<uint16_t> got(x.size());
  fp32_to_fp16_row(x.data(), static_cast<int64_t>(x.size()), got.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], fp32_to_fp16(x[i])) << i << ": " << x[i];
  EXPECT_EQ(got[0], 0x3c00);
  EXPECT_EQ(got[1], 0x3c02);
}

// A set's own conversion equals the scalar one bit for bit: ties, subnormal halves, overflow to
// inf, signed zeros, infinities, NaNs (a quiet NaN of the input's sign, payload dropped), and
// every length's tail.
TEST_P(FloatMatchesTwin, Fp16Rows) {
  if (set().fp32_to_fp16_row == nullptr) GTEST_SKIP() << set().name << " uses the scalar conversion";
  std::mt19937 rng(12);
  auto x = random_floats(4096, rng, 70000.0f);
  const float specials[] = {1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11), 1e-7f, -1e-7f,
                            std::ldexp(1.0f, -25), std::ldexp(1.5f, -25), 65504.0f, 65519.99f, 65520.0f,
                            -65520.0f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-40f,
                            std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0xffc12345u)};
  for (size_t i = 0; i < std::size(specials); ++i) x[i] = specials[i];
  for (size_t i = 0; i < 512; ++i) x[1024 + i] = std::bit_cast<float>(static_cast<uint32_t>(rng()));  // any bits
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{9}, int64_t{640}, int64_t{4096}}) {
    std::vector<uint16_t> got(static_cast<size_t>(n) + 1, 0xabcd), want(static_cast<size_t>(n));
    set().fp32_to_fp16_row(x.data() + 4096 - n, n, got.data());
    fp32_to_fp16_row(x.data() + 4096 - n, n, want.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << n << " " << i;
    EXPECT_EQ(got[static_cast<size_t>(n)], 0xabcd) << "wrote past the row";
  }
  std::vector<uint16_t> got(std::size(specials)), want(std::size(specials));
  set().fp32_to_fp16_row(x.data(), static_cast<int64_t>(got.size()), got.data());
  fp32_to_fp16_row(x.data(), static_cast<int64_t>(want.size()), want.data());
  EXPECT_EQ(got, want);
}

TEST_P(FloatMatchesTwin, GatedActivationsAndAdd) {
  std::mt19937 rng(9);
  for (int64_t n : {1, 9, 6912}) {
    auto a = random_floats(n, rng, 6.0f);
    a[0] = -100.0f;  // exp(100) stays finite in the vector exp, is inf in std::exp: both give ~0
    const auto b = random_floats(n, rng);
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    scalar::silu_mul(a.data(), b.data(), n, want.data());
    set().silu_mul(a.data(), b.data(), n, got.data());
    expect_close(got, want, 1e-6, "silu_mul");
    scalar::relu2_mul(a.data(), b.data(), n, want.data());
    set().relu2_mul(a.data(), b.data(), n, got.data());
    EXPECT_EQ(got, want) << "relu2_mul";
    scalar::add(a.data(), b.data(), n, want.data());
    set().add(a.data(), b.data(), n, got.data());
    EXPECT_EQ(got, want) << "add";
  }
}

INSTANTIATE_TEST_SUITE_P(Sets, FloatMatchesTwin, testing::ValuesIn(test::set_names()), test::set_param_name);

TEST(CpuKernels, RmsNorm) {
  const std::vector<float> x = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<float> g = {1.0f, 2.0f, 0.5f, -1.0f};
  std::vector<float> y(4);
  scalar::rms_norm_row(x.data(), g.data(), 4, 1e-5f, y.data());
  double ms = 0;
  for (float v : x) ms += v * v;
  const double inv = 1.0 / std::sqrt(ms / 4 + 1e-5);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[i], x[i] * inv * g[i], 1e-6);
}

void rope_reference(std::vector<double>& v, int n_rot, int64_t pos, double base, bool neox) {
  for (int i = 0; i < n_rot / 2; ++i) {
    const double theta = static_cast<double>(pos) * std::pow(base, -2.0 * i / n_rot);
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + n_rot / 2 : 2 * i + 1;
    const double x0 = v[static_cast<size_t>(a)], x1 = v[static_cast<size_t>(b)];
    v[static_cast<size_t>(a)] = x0 * std::cos(theta) - x1 * std::sin(theta);
    v[static_cast<size_t>(b)] = x0 * std::sin(theta) + x1 * std::cos(theta);
  }
}

TEST(CpuKernels, RopeNormAndNeox) {
  std::mt19937 rng(4);
  const int n_head = 2;
  for (bool neox : {false, true}) {
    for (int head_dim : {16, 256}) {  // 256: more pairs than one batch of sines and cosines
      for (int n_rot : {head_dim, head_dim / 2}) {
        for (int64_t pos : {0, 1, 17, 300}) {
          auto x = random_floats(head_dim * n_head, rng);
          hal::RopeParams p{neox ? hal::RopeStyle::kNeox : hal::RopeStyle::kNorm, n_rot, 10000.0f, 1.0f};
          std::vector<float> y = x;
          rope_row(y.data(), n_head, head_dim, pos, p);
          for (int h = 0; h < n_head; ++h) {
            std::vector<double> ref(x.begin() + h * head_dim, x.begin() + (h + 1) * head_dim);
            rope_reference(ref, n_rot, pos, 10000.0, neox);
            for (int i = 0; i < head_dim; ++i) {
              EXPECT_NEAR(y[static_cast<size_t>(h * head_dim + i)], ref[static_cast<size_t>(i)], 2e-3)
                  << (neox ? "neox" : "norm") << " n_rot " << n_rot << " pos " << pos << " i " << i;
            }
          }
        }
      }
    }
  }
}

TEST(CpuKernels, AttentionHeadIsSoftmaxWeightedSum) {
  std::mt19937 rng(5);
  const int head_dim = 8;
  const int64_t n_pos = 5, n_embd_kv = 16, kv_off = 8;
  const auto q = random_floats(head_dim, rng);
  const auto k = random_floats(n_pos * n_embd_kv, rng);
  const auto v = random_floats(n_pos * n_embd_kv, rng);
  std::vector<float> scores(n_pos), out(head_dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  scalar::attention_head(q.data(), k.data(), v.data(), n_pos, KvRowMap{}, n_embd_kv, kv_off, head_dim, scale, scores.data(), out.data());
  std::vector<double> w(n_pos);
  double sum = 0;
  for (int64_t j = 0; j < n_pos; ++j) {
    double d = 0;
    for (int i = 0; i < head_dim; ++i) d += q[static_cast<size_t>(i)] * k[static_cast<size_t>(j * n_embd_kv + kv_off + i)];
    w[static_cast<size_t>(j)] = std::exp(d * scale);
    sum += w[static_cast<size_t>(j)];
  }
  for (int i = 0; i < head_dim; ++i) {
    double ref = 0;
    for (int64_t j = 0; j < n_pos; ++j) ref += w[static_cast<size_t>(j)] / sum * v[static_cast<size_t>(j * n_embd_kv + kv_off + i)];
    EXPECT_NEAR(out[static_cast<size_t>(i)], ref, 1e-5);
  }
}

TEST(CpuKernels, GatedActivations) {
  const std::vector<float> a = {-2.0f, -0.5f, 0.0f, 1.5f};
  const std::vector<float> b = {1.0f, 2.0f, 3.0f, -1.0f};
  std::vector<float> y(4);
  scalar::relu2_mul(a.data(), b.data(), 4, y.data());
  EXPECT_EQ(y, (std::vector<float>{0.0f, 0.0f, 0.0f, -2.25f}));
  scalar::silu_mul(a.data(), b.data(), 4, y.data());
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[i], a[i] / (1 + std::exp(-a[i])) * b[i], 1e-6);
}

}  // namespace
}  // namespace bitnet::cpu
