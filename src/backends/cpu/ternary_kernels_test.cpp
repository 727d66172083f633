// W2A8 kernels of every kernel set against the scalar twin, bit for bit: odd shapes, the row
// ranges a thread split produces, worst-case codes and activations; and the scalar twin and
// the activation quantization against their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "backends/cpu/kernel_test_util.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_avx512vnni.h"
#include "core/thread_pool.h"
#include "quant/act_quant.h"

namespace bitnet::cpu {
namespace {

using test::EverySet;
using test::TestQ8;

constexpr float kUnwritten = -12345.0f;  // marks outputs a kernel must not touch

// y = kernels.matmul_ternary over rows [r0, r1) for every token; the rest stays kUnwritten.
std::vector<float> run_ternary(const KernelSet& kernels, const CpuWeight& w, const Q8Rows& x,
                               std::span<const int64_t> cuts) {
  std::vector<float> y(static_cast<size_t>(x.n_tokens * w.n_rows), kUnwritten);
  for (size_t i = 0; i + 1 < cuts.size(); ++i) kernels.matmul_ternary(w, x, y.data(), cuts[i], cuts[i + 1]);
  return y;
}

// Bitwise equality, with the first mismatches named.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, int64_t n_rows,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  int reported = 0;
  for (size_t i = 0; i < got.size() && reported < 5; ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      ADD_FAILURE() << what << ": token " << static_cast<int64_t>(i) / n_rows << " row "
                    << static_cast<int64_t>(i) % n_rows << ": " << got[i] << " != " << want[i];
      ++reported;
    }
  }
}

struct TernaryCase {
  GgmlType type;
  int64_t n_rows;
  int64_t n_cols;
  int64_t n_tokens;
};

std::string case_name(const TernaryCase& c) {
  return std::string(ggml_type_name(c.type)) + " " + std::to_string(c.n_rows) + "x" + std::to_string(c.n_cols) +
         " tokens " + std::to_string(c.n_tokens);
}

// Runs `set` and the scalar twin on the same file weight and activations, over the whole range
// and over a thread-like split at `inner_cuts` and n - 1 (inside row groups), and compares bits.
// `layout`: the one the set's weights are asked in (default: the set's ternary_layout).
void check_against_twin(const KernelSet& set, const test::FileWeight& file, const Q8Rows& x, const std::string& what,
                        std::initializer_list<int64_t> inner_cuts = {1, 6, 7},
                        std::optional<TernaryLayout> layout = std::nullopt) {
  const CpuWeight twin_w = test::prepare(file, kScalarKernels.ternary_rows_per_group);
  const CpuWeight set_w = test::prepare(file, set.ternary_rows_per_group, layout.value_or(set.ternary_layout));
  const int64_t n = file.n_rows;
  const int64_t whole[] = {0, n};
  const auto want = run_ternary(kScalarKernels, twin_w, x, whole);
  expect_same_bits(run_ternary(set, set_w, x, whole), want, n, what + " [0, n)");
  if (set.order_ternary_act != nullptr && set_w.ternary.layout == TernaryLayout::k5Trit) {  // ordered once by the caller, as the backend does
    std::vector<int8_t> ordered(static_cast<size_t>(x.n_tokens * x.n_cols));
    for (int64_t t = 0; t < x.n_tokens; ++t) set.order_ternary_act(x.q + t * x.n_cols, x.n_cols, ordered.data() + t * x.n_cols);
    Q8Rows xo = x;
    xo.q_ordered = ordered.data();
    expect_same_bits(run_ternary(set, set_w, xo, whole), want, n, what + " [0, n), ordered by the caller");
  }
  // Cuts at 1, 6, 7 and n - 1 by default: partial row groups at both ends of ranges, a one-row
  // range.
  std::vector<int64_t> cuts = {0};
  for (int64_t c : inner_cuts) {
    if (c > cuts.back() && c < n) cuts.push_back(c);
  }
  if (n - 1 > cuts.back()) cuts.push_back(n - 1);
  cuts.push_back(n);
  expect_same_bits(run_ternary(set, set_w, x, cuts), want, n, what + " split");
  // Each range alone: its rows as the twin's, every other row untouched.
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const int64_t range[] = {cuts[i], cuts[i + 1]};
    auto only = want;
    for (int64_t t = 0; t < x.n_tokens; ++t) {
      for (int64_t r = 0; r < n; ++r) {
        if (r < range[0] || r >= range[1]) only[static_cast<size_t>(t * n + r)] = kUnwritten;
      }
    }
    expect_same_bits(run_ternary(set, set_w, x, range), only, n,
                     what + " rows [" + std::to_string(range[0]) + ", " + std::to_string(range[1]) + ")");
  }
}

class TernaryMatchesTwin : public EverySet {};

TEST_P(TernaryMatchesTwin, OddShapesAndThreadSplits) {
  std::mt19937 rng(7);
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    // 1408 and 6912: the T5 layout's 1280-column chunks with tails of 2 and 4 positions.
    for (int64_t n_cols : {128, 256, 384, 1408, 2560, 6912}) {
      if (type != GgmlType::kI2_S && n_cols % 256 != 0) continue;  // TQ blocks are 256 columns
      for (int64_t n_rows : {1, 3, 5, 13, 37}) {
        const auto codes = test::random_codes(n_rows * n_cols, rng);
        const auto file = test::ternary_file(type, codes, test::random_scales(type, n_rows * n_cols, rng), n_cols, n_rows);
        for (int64_t n_tokens : {1, 2, 3, 5, 8, 13}) {
          const Q8Buffer q8 = test::random_q8(n_tokens, n_cols, rng);
          check_against_twin(set(), file, q8.rows(), case_name({type, n_rows, n_cols, n_tokens}));
        }
      }
    }
  }
}

// Prefill kernels take tokens in tiles (8 on x86) and rows in cache blocks: every token count
// around the tile sizes, against I2_S-style (one scale per row) and TQ-style (one per 256
// columns) weights, with row ranges that start and end inside row groups and cache blocks.
TEST_P(TernaryMatchesTwin, TokenTilesAndRowBlocks) {
  std::mt19937 rng(5);
  struct Shape {
    int64_t n_rows, n_cols;
    std::vector<int64_t> token_counts;
  };
  // 16384 columns: a 256 KiB block of codes holds 16 row groups (64 rows), so 150 rows span 3,
  // and 8 tokens' activations (128 KiB) take the AVX-512 T5 tiles 4 parts. 137 tokens: past the
  // T5 tiles' largest step with the vpavgb decoder (kT5NativeMaxTokens), where blocks are
  // rewritten in the 2-bit layout (BothTileDecodersMatchTheTwin runs both decoders).
  const Shape shapes[] = {{37, 512, {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 24, 33, 67, 137}},
                          {150, 16384, {1, 2, 8, 13, 33}}};
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    for (const Shape& sh : shapes) {
      const auto codes = test::random_codes(sh.n_rows * sh.n_cols, rng);
      const auto file = test::ternary_file(type, codes, test::random_scales(type, sh.n_rows * sh.n_cols, rng),
                                           sh.n_cols, sh.n_rows);
      for (int64_t n_tokens : sh.token_counts) {
        const Q8Buffer q8 = test::random_q8(n_tokens, sh.n_cols, rng);
        check_against_twin(set(), file, q8.rows(), case_name({type, sh.n_rows, sh.n_cols, n_tokens}),
                           {3, 21, 61, 64, 66, 129});
      }
    }
  }
}

// All codes 2 (w = +1) or all 0 (w = -1) against activations at the int8 limits: the largest
// sums the int16 stage of a maddubs kernel ever holds (bitnet.cpp overflows here, #629).
TEST_P(TernaryMatchesTwin, WorstCaseSums) {
  const int64_t n_cols = 2560, n_rows = 13;
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    for (uint8_t code : {uint8_t{2}, uint8_t{0}}) {
      const std::vector<uint8_t> codes(static_cast<size_t>(n_rows * n_cols), code);
      std::vector<float> scales(static_cast<size_t>(n_rows * n_cols / quant::ternary_scale_block(type, n_rows * n_cols)), 1.0f);
      const auto file = test::ternary_file(type, codes, scales, n_cols, n_rows);
      for (int64_t n_tokens : {1, 9, 17}) {  // decode, and prefill with partial token tiles
        std::vector<int8_t> q(static_cast<size_t>(n_tokens * n_cols));
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t k = 0; k < n_cols; ++k) {
            const int8_t pattern[] = {127, -127, -128, static_cast<int8_t>(k % 2 ? -127 : 127),
                                      static_cast<int8_t>(k % 2 ? -128 : 127)};
            q[static_cast<size_t>(t * n_cols + k)] = pattern[t % 5];
          }
        }
        const TestQ8 x(q, std::vector<float>(static_cast<size_t>(n_tokens), 127.0f), n_tokens, n_cols);
        const std::string what = case_name({type, n_rows, n_cols, n_tokens}) + " code " + std::to_string(code);
        check_against_twin(set(), file, x.rows(), what);
        // And the value itself: all codes 2 against all 127 is 2 * 127 * n_cols before the
        // "- act_sum" term, (2*127 - 127) * n_cols / 127 after it.
        const CpuWeight w = test::prepare(file, set().ternary_rows_per_group, set().ternary_layout);
        const int64_t whole[] = {0, n_rows};
        const auto y = run_ternary(set(), w, x.rows(), whole);
        const float want_first = code == 2 ? static_cast<float>(n_cols) : -static_cast<float>(n_cols);
        EXPECT_FLOAT_EQ(y[0], want_first) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sets, TernaryMatchesTwin, testing::ValuesIn(test::set_names()), test::set_param_name);

#if defined(__x86_64__)
// The AVX-512 VNNI set's T5 tiles with each of their two code decoders (the CPU picks one,
// kernels_avx512vnni.h): token counts around the tile and the parts of a wide row, one scale
// per row (the native tiles), random codes and all codes 2 against the int8 limits; 137 tokens
// are rewritten 2-bit blocks with the vpavgb decoder, native tiles with the compare one.
TEST(TernaryT5, BothTileDecodersMatchTheTwin) {
  const KernelSet& set = test::set_named("avx512vnni");
  if (const std::string why = test::lacks(set); !why.empty()) GTEST_SKIP() << why;
  const avx512vnni::T5Decode chosen = avx512vnni::t5_decode();
  std::mt19937 rng(31);
  for (avx512vnni::T5Decode d : {avx512vnni::T5Decode::kAverage, avx512vnni::T5Decode::kCompare}) {
    avx512vnni::set_t5_decode(d);
    const std::string decoder = d == avx512vnni::T5Decode::kCompare ? "compare" : "average";
    for (int64_t n_cols : {512, 16384}) {
      const int64_t n_rows = 37;
      for (bool extreme : {false, true}) {
        const auto codes = extreme ? std::vector<uint8_t>(static_cast<size_t>(n_rows * n_cols), 2)
                                   : test::random_codes(n_rows * n_cols, rng);
        const auto file = test::ternary_file(GgmlType::kI2_S, codes, test::random_scales(GgmlType::kI2_S, n_rows * n_cols, rng),
                                             n_cols, n_rows);
        for (int64_t n_tokens : {2, 7, 8, 13, 137}) {
          if (n_tokens > 13 && n_cols > 512) continue;
          const Q8Buffer q8 = test::random_q8(n_tokens, n_cols, rng);
          check_against_twin(set, file, q8.rows(), decoder + " " + case_name({GgmlType::kI2_S, n_rows, n_cols, n_tokens}),
                             {3, 21});
        }
      }
    }
  }
  avx512vnni::set_t5_decode(chosen);
}

// T5 decode prefetches 4 KB ahead on Zen 4, 8 KB elsewhere (kernels_avx512vnni.h): a choice
// made from the features alone, so it is checked on any machine.
TEST(TernaryT5, DecodePrefetchDistanceByMicroarchitecture) {
  EXPECT_EQ(avx512vnni::t5_decode_prefetch_bytes_for(test::x86_cpu(true, 0x19)), 4096);
  EXPECT_EQ(avx512vnni::t5_decode_prefetch_bytes_for(test::x86_cpu(true, 0x1a)), 8192);
  EXPECT_EQ(avx512vnni::t5_decode_prefetch_bytes_for(test::x86_cpu(false, 6)), 8192);
}

// One Zen 4 thread asks the AVX-512 VNNI set's weights in the 2-bit layout (kernels_avx512vnni.h);
// the set then reads shapes that T5 holds in it too: decode, partial and whole token tiles.
TEST(TernaryT5, OneZen4ThreadReadsTheTwoBitLayout) {
  const CpuFeatures zen4 = test::x86_cpu(true, 0x19);
  EXPECT_EQ(avx512vnni::ternary_layout_for(zen4, 1), TernaryLayout::k2Bit);
  EXPECT_EQ(avx512vnni::ternary_layout_for(zen4, 2), TernaryLayout::k5Trit);
  EXPECT_EQ(avx512vnni::ternary_layout_for(test::x86_cpu(true, 0x1a), 1), TernaryLayout::k5Trit);
  EXPECT_EQ(avx512vnni::ternary_layout_for(test::x86_cpu(false, 6), 1), TernaryLayout::k5Trit);

  const KernelSet& set = test::set_named("avx512vnni");
  if (const std::string why = test::lacks(set); !why.empty()) GTEST_SKIP() << why;
  std::mt19937 rng(37);
  const int64_t n_rows = 37, n_cols = 2560;
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    for (bool extreme : {false, true}) {
      const auto codes = extreme ? std::vector<uint8_t>(static_cast<size_t>(n_rows * n_cols), 2)
                                 : test::random_codes(n_rows * n_cols, rng);
      const auto file = test::ternary_file(type, codes, test::random_scales(type, n_rows * n_cols, rng), n_cols, n_rows);
      ASSERT_EQ(test::prepare(file, set.ternary_rows_per_group, TernaryLayout::k2Bit).ternary.layout, TernaryLayout::k2Bit);
      for (int64_t n_tokens : {1, 9, 16, 33}) {
        const Q8Buffer q8 = test::random_q8(n_tokens, n_cols, rng);
        check_against_twin(set, file, q8.rows(), "2-bit " + case_name({type, n_rows, n_cols, n_tokens}), {1, 6, 7},
                           TernaryLayout::k2Bit);
      }
    }
  }
}
#endif

// TQ rows whose blocks all share one scale keep one scale per row (the kernels' per-row path);
// one differing block keeps the per-block scales. Both agree with the definition.
TEST(TernaryScales, UniformBlockScalesCollapseToOnePerRow) {
  std::mt19937 rng(5);
  const int64_t n_cols = 1280, n_rows = 6;
  const auto codes = test::random_codes(n_cols * n_rows, rng);
  for (GgmlType type : {GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    for (bool uniform : {true, false}) {
      std::vector<float> scales(static_cast<size_t>(n_rows * n_cols / 256));
      for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.0078125f * static_cast<float>(1 + i / 5);  // per row
      if (!uniform) scales[7] = 0.5f;  // row 1, block 2
      const auto file = test::ternary_file(type, codes, scales, n_cols, n_rows);
      for (const auto& [rows_per_group, layout] : {std::pair{1, TernaryLayout::k2Bit}, std::pair{4, TernaryLayout::k5Trit}}) {
        const CpuWeight w = test::prepare(file, rows_per_group, layout);
        EXPECT_EQ(w.ternary.scale_block, uniform ? n_cols : 256) << ggml_type_name(type);
        const TestQ8 x(std::vector<int8_t>(static_cast<size_t>(n_cols), 3), {1.0f}, 1, n_cols);
        std::vector<float> y(static_cast<size_t>(n_rows));
        scalar::matmul_ternary(w, x.rows(), y.data(), 0, n_rows);
        for (int64_t r = 0; r < n_rows; ++r) {
          double want = 0.0;
          for (int64_t k = 0; k < n_cols; ++k) {
            const int64_t i = r * n_cols + k;
            want += (codes[static_cast<size_t>(i)] - 1.0) * 3.0 * scales[static_cast<size_t>(i / 256)];
          }
          EXPECT_NEAR(y[static_cast<size_t>(r)], want, 1e-4 * (1.0 + std::abs(want))) << "row " << r;
        }
      }
    }
  }
}

// The scalar twin itself against the definition, in double.
class TwinMatchesDefinition : public testing::TestWithParam<GgmlType> {};

TEST_P(TwinMatchesDefinition, DoubleReference) {
  const GgmlType type = GetParam();
  std::mt19937 rng(2);
  const int64_t n_cols = 512, n_rows = 37, n_tokens = 3;
  const auto codes = test::random_codes(n_cols * n_rows, rng);
  const auto scales = test::random_scales(type, n_cols * n_rows, rng);
  const int64_t block = quant::ternary_scale_block(type, n_cols * n_rows);
  const CpuWeight w = test::prepare(test::ternary_file(type, codes, scales, n_cols, n_rows), 1);
  const auto x = test::random_floats(n_cols * n_tokens, rng);
  Q8Buffer q8;
  q8.resize(n_tokens, n_cols);
  for (int64_t t = 0; t < n_tokens; ++t) q8.quantize(kScalarKernels, t, x.data() + t * n_cols);
  const Q8Rows q = q8.rows();
  std::vector<float> y(static_cast<size_t>(n_rows * n_tokens));
  scalar::matmul_ternary(w, q, y.data(), 0, n_rows);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) {
      double ref = 0.0;
      for (int64_t k = 0; k < n_cols; ++k) {
        const int64_t i = r * n_cols + k;
        ref += (codes[static_cast<size_t>(i)] - 1.0) * q.q[t * n_cols + k] * scales[static_cast<size_t>(i / block)];
      }
      ref /= q.scale[t];
      EXPECT_NEAR(y[static_cast<size_t>(t * n_rows + r)], ref, 1e-4 * (1.0 + std::abs(ref))) << "row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, TwinMatchesDefinition,
                         testing::Values(GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0));

// Rows of 1 repack to the I2_S code bytes; rows of 4 interleave them per column group.
TEST(TernaryLayout, RowGroupsInterleaveTheI2SCodeBytes) {
  std::mt19937 rng(1);
  const int64_t n_cols = 256, n_rows = 6;
  const auto codes = test::random_codes(n_cols * n_rows, rng);
  const float scale = 0.5f;
  const auto file = test::ternary_file(GgmlType::kI2_S, codes, {scale}, n_cols, n_rows);
  const CpuWeight flat = test::prepare(file, 1);
  ASSERT_EQ(flat.ternary.packed.size(), static_cast<size_t>(n_cols * n_rows / 4));
  EXPECT_EQ(0, std::memcmp(flat.ternary.packed.data(), file.bytes.data(), flat.ternary.packed.size()));
  const CpuWeight grouped = test::prepare(file, 4);
  ASSERT_EQ(grouped.ternary.packed.size(), static_cast<size_t>(n_cols * 8 / 4));  // 2 row groups
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t g = 0; g < 2; ++g) {
      const uint8_t* got = grouped.ternary.packed.data() + ((r / 4 * 2 + g) * 4 + r % 4) * 32;
      for (int j = 0; j < 32; ++j) {
        const uint8_t want = r < n_rows ? file.bytes[static_cast<size_t>(r * 64 + g * 32 + j)] : uint8_t{0x55};
        ASSERT_EQ(got[j], want) << "row " << r << " group " << g << " byte " << j;
      }
    }
    EXPECT_EQ(grouped.ternary.scales[static_cast<size_t>(r)], r < n_rows ? scale : 0.0f) << "row " << r;
  }
}

TEST(TernaryLayout, CorruptCodesAreAnErrorInEveryChunk) {
  const int64_t n_cols = 256, n_rows = 300;
  std::mt19937 rng(2);
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0}) {
    auto file = test::ternary_file(type, test::random_codes(n_cols * n_rows, rng),
                                   test::random_scales(type, n_cols * n_rows, rng), n_cols, n_rows);
    // Code 3 in the last row: bits 7-6 (I2_S) or 1-0 (TQ2_0) of its third code byte.
    const int64_t row_bytes = static_cast<int64_t>(file.bytes.size() - (type == GgmlType::kI2_S ? 32 : 0)) / n_rows;
    file.bytes[static_cast<size_t>(299 * row_bytes + 2)] |= type == GgmlType::kI2_S ? 0xc0 : 0x03;
    const hal::WeightDesc d{"blk.0.ffn_up.weight", type, {n_cols, n_rows, 1, 1}, file.bytes};
    ThreadPool pool(2);
    for (TernaryLayout layout : {TernaryLayout::k2Bit, TernaryLayout::k5Trit}) {
      const auto w = prepare_weight(d, 4, &pool, layout);
      ASSERT_FALSE(w.ok()) << ggml_type_name(type);
      EXPECT_NE(w.status().message().find("blk.0.ffn_up.weight"), std::string::npos) << w.status().to_string();
    }
  }
}

// The pool's threads repack row groups chunk by chunk (the last one also fills the padding
// rows of a partial last group): the same bytes and scales as one thread, in both layouts.
TEST(TernaryLayout, ThePoolRepacksAsOneThreadDoes) {
  const int64_t n_cols = 1280, n_rows = 4 * 40 + 3;  // 41 row groups, the last with one row
  std::mt19937 rng(6);
  ThreadPool pool(2);
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0}) {
    const auto file = test::ternary_file(type, test::random_codes(n_cols * n_rows, rng),
                                         test::random_scales(type, n_cols * n_rows, rng), n_cols, n_rows);
    const hal::WeightDesc d{"w", type, {n_cols, n_rows, 1, 1}, file.bytes};
    for (TernaryLayout layout : {TernaryLayout::k2Bit, TernaryLayout::k5Trit}) {
      auto one = prepare_weight(d, 4, nullptr, layout);
      auto many = prepare_weight(d, 4, &pool, layout);
      ASSERT_TRUE(one.ok() && many.ok());
      ASSERT_EQ(many->ternary.layout, layout);
      ASSERT_EQ(many->ternary.packed.size(), one->ternary.packed.size());
      EXPECT_EQ(0, std::memcmp(many->ternary.packed.data(), one->ternary.packed.data(), one->ternary.packed.size()))
          << ggml_type_name(type) << " layout " << static_cast<int>(layout);
      EXPECT_EQ(many->ternary.scales, one->ternary.scales);
    }
  }
}

// The T5 layout (weights.h): its bytes hold the codes where the layout says, and the scalar twin
// reads it to the bits it reads the 2-bit layout to (random and extreme codes and activations).
TEST(TernaryT5, BytesHoldTheCodesWhereTheLayoutSays) {
  std::mt19937 rng(3);
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0}) {  // both read straight from their bit pairs
    for (int64_t n_cols : {128, 384, 1280, 1408, 6912}) {
      if (type == GgmlType::kTQ2_0 && n_cols % 256 != 0) continue;
      SCOPED_TRACE(std::string(ggml_type_name(type)));
      const int64_t n_rows = 6;
      const auto codes = test::random_codes(n_rows * n_cols, rng);
      const auto scales = test::random_scales(type, n_rows * n_cols, rng);
      const auto file = test::ternary_file(type, codes, scales, n_cols, n_rows);
      const CpuWeight w = test::prepare(file, kT5Rows, TernaryLayout::k5Trit);
      ASSERT_EQ(w.ternary.layout, TernaryLayout::k5Trit);
      const int64_t n_blocks = n_cols / w.ternary.scale_block;
      for (int64_t r = 0; r < 8; ++r) {
        for (int64_t b = 0; b < n_blocks; ++b) {
          const float want = r >= n_rows ? 0.0f : scales[static_cast<size_t>(scales.size() == 1 ? 0 : r * n_blocks + b)];
          ASSERT_EQ(w.ternary.scales[w.ternary.scale_index(r, b, n_blocks)], want) << "row " << r << " block " << b;
        }
      }
      const int64_t n_vec = t5_vectors(n_cols);
      ASSERT_EQ(w.ternary.packed.size(), static_cast<size_t>(2 * kT5Rows * n_vec * kT5VectorBytes));
      std::vector<int> seen(static_cast<size_t>(n_cols), 0);
      for (int64_t r = 0; r < 8; ++r) {
        for (int64_t u = 0; u < n_vec; ++u) {
          for (int64_t j = 0; j < kT5VectorBytes; ++j) {
            unsigned m = w.ternary.packed[static_cast<size_t>(((r / 4 * n_vec + u) * 4 + r % 4) * kT5VectorBytes + j)];
            for (int i = 0; i < 5; ++i, m = (3 * m) & 255) {
              const int64_t col = t5_column(n_cols, u, i, j);
              const unsigned want = r < n_rows && col >= 0 ? codes[static_cast<size_t>(r * n_cols + col)] : 1u;
              ASSERT_EQ((3 * m) >> 8, want) << "n_cols " << n_cols << " row " << r << " vector " << u << " byte " << j;
              if (r == 0 && col >= 0) ++seen[static_cast<size_t>(col)];
            }
          }
        }
      }
      for (int64_t c = 0; c < n_cols; ++c) ASSERT_EQ(seen[static_cast<size_t>(c)], 1) << "column " << c;
    }
  }
}

TEST(TernaryT5, TwinReadsBothLayoutsToTheSameBits) {
  std::mt19937 rng(9);
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0}) {
    for (int64_t n_cols : {128, 384, 1280, 1408, 2560, 6912}) {
      if (type != GgmlType::kI2_S && n_cols % 256 != 0) continue;
      for (int extreme = 0; extreme < 3; ++extreme) {  // random; all codes 2; all codes 0
        const int64_t n_rows = 7;
        auto codes = test::random_codes(n_rows * n_cols, rng);
        if (extreme > 0) std::fill(codes.begin(), codes.end(), extreme == 1 ? uint8_t{2} : uint8_t{0});
        const auto file = test::ternary_file(type, codes, test::random_scales(type, n_rows * n_cols, rng), n_cols, n_rows);
        const CpuWeight w2 = test::prepare(file, kT5Rows);
        const CpuWeight w5 = test::prepare(file, kT5Rows, TernaryLayout::k5Trit);
        ASSERT_EQ(w5.ternary.layout, TernaryLayout::k5Trit);
        for (int64_t n_tokens : {1, 3, 9}) {
          std::vector<int8_t> q(static_cast<size_t>(n_tokens * n_cols));
          for (size_t k = 0; k < q.size(); ++k) {
            const int8_t limits[] = {127, -127, -128};
            q[k] = extreme > 0 ? limits[(k + static_cast<size_t>(extreme)) % 3] : static_cast<int8_t>(rng() % 255 - 127);
          }
          const TestQ8 x(q, std::vector<float>(static_cast<size_t>(n_tokens), 127.0f), n_tokens, n_cols);
          const int64_t whole[] = {0, n_rows};
          const int64_t split[] = {0, 3, 5, n_rows};
          const std::string what = case_name({type, n_rows, n_cols, n_tokens}) + " extreme " + std::to_string(extreme);
          const auto want = run_ternary(kScalarKernels, w2, x.rows(), whole);
          expect_same_bits(run_ternary(kScalarKernels, w5, x.rows(), whole), want, n_rows, what);
          expect_same_bits(run_ternary(kScalarKernels, w5, x.rows(), split), want, n_rows, what + " split");
        }
      }
    }
  }
}

// Weights the T5 kernels do not take stay 2-bit: rows of 32768 columns or more (their int32
// P/Q sums could wrap past 256 * dot), and rows that are not kT5Rows-row groups.
TEST(TernaryT5, OtherWeightsStayTwoBit) {
  std::mt19937 rng(4);
  const auto wide = test::ternary_file(GgmlType::kI2_S, test::random_codes(32768, rng), {1.0f}, 32768, 1);
  EXPECT_EQ(test::prepare(wide, kT5Rows, TernaryLayout::k5Trit).ternary.layout, TernaryLayout::k2Bit);
  const auto narrow = test::ternary_file(GgmlType::kI2_S, test::random_codes(32640, rng), {1.0f}, 32640, 1);
  EXPECT_EQ(test::prepare(narrow, kT5Rows, TernaryLayout::k5Trit).ternary.layout, TernaryLayout::k5Trit);
  EXPECT_EQ(test::prepare(narrow, 1, TernaryLayout::k5Trit).ternary.layout, TernaryLayout::k2Bit);
}

// Activation quantization of every set against quant::act_quant_i8, bit for bit.
class QuantizeActMatchesReference : public EverySet {};

TEST_P(QuantizeActMatchesReference, ValuesScalesAndGroupSums) {
  std::mt19937 rng(11);
  std::vector<std::vector<float>> rows;
  for (int64_t n : {1, 7, 31, 32, 100, 128, 129, 300, 2560, 6912}) rows.push_back(test::random_floats(n, rng, 3.0f));
  // Halves: amax 127 gives s = 1, so x * s lands on .5 exactly (round half to even).
  rows.push_back({127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 3.5f});
  rows.push_back(std::vector<float>(200, 0.0f));                             // all zero: s = 1.27e7
  rows.push_back({NAN, 1.0f, -2.0f, INFINITY, 0.25f, -INFINITY, NAN, 3.0f});  // inf: s = 0, NaN -> 0
  auto big = test::random_floats(256, rng, 1e30f);
  rows.push_back(big);
  for (const auto& x : rows) {
    const auto n = static_cast<int64_t>(x.size());
    std::vector<int8_t> want_q(x.size()), got_q(x.size());
    int32_t want_sum = 0;
    const float want_s = quant::act_quant_i8(x.data(), n, want_q.data(), &want_sum);
    const int64_t stride = 3;  // group sums of another token sit between this token's ones
    std::vector<int32_t> sums(static_cast<size_t>((n + 127) / 128 * stride), -1);
    const float got_s = set().quantize_act(x.data(), n, got_q.data(), sums.data(), stride);
    EXPECT_EQ(std::memcmp(&got_s, &want_s, sizeof(float)), 0) << "n " << n << ": s " << got_s << " != " << want_s;
    EXPECT_EQ(got_q, want_q) << "n " << n;
    int32_t total = 0;
    for (int64_t g = 0; g * 128 < n; ++g) {
      int32_t want_group = 0;
      for (int64_t k = g * 128; k < std::min(n, g * 128 + 128); ++k) want_group += want_q[static_cast<size_t>(k)];
      EXPECT_EQ(sums[static_cast<size_t>(g * stride)], want_group) << "n " << n << " group " << g;
      EXPECT_EQ(sums[static_cast<size_t>(g * stride + 1)], -1) << "wrote outside its stride";
      total += want_group;
    }
    EXPECT_EQ(total, want_sum);
  }
}

INSTANTIATE_TEST_SUITE_P(Sets, QuantizeActMatchesReference, testing::ValuesIn(test::set_names()), test::set_param_name);

}  // namespace
}  // namespace bitnet::cpu
