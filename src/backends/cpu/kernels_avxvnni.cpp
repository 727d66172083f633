// AVX-VNNI set: the AVX2 set with a W2A8 matmul on the 256-bit VEX vpdpbusd, which multiplies
// unsigned codes by signed activations and adds groups of 4 products straight into int32
// lanes (no int16 stage, so no overflow to guard). Same layout as the AVX2 kernel
// (kTernaryRows). Decode takes a row group of 4 rows at a time. Prefill takes one row against
// a tile of 8 tokens: 8 accumulators, one unpacked code vector at a time, the activations as
// memory operands (16 ymm registers hold no larger tile; 3 rows x 4 tokens, 12 product chains,
// spilled and ran slower). Rows are walked in cache blocks so that every token tile finds the
// block's codes in L2.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_avx2.h"
#include "backends/cpu/kernels_ternary_driver.h"

namespace bitnet::cpu::avxvnni {

namespace {

constexpr int kRows = avx2::kTernaryRows;
// {sum of a[0], ..., sum of a[3]}.
__m128i hsum4(const __m256i a[4]) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

// {sum of a[0], ..., sum of a[7]}.
__m256i hsum8(const __m256i a[8]) {
  const __m256i lo = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
  const __m256i hi = _mm256_hadd_epi32(_mm256_hadd_epi32(a[4], a[5]), _mm256_hadd_epi32(a[6], a[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}

// Field k of 32 code bytes as unsigned bytes in {0, 1, 2}: bits 7-6 for k = 0 ... 1-0 for
// k = 3, the codes of columns 32k .. 32k+31 of the group. 16-bit shifts pull bits across the
// byte boundary; the mask keeps each byte's own field.
__m256i field(__m256i v, int k) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 6 - 2 * k), _mm256_set1_epi8(3));
}

// dot[k % 2] += code * q over field k of one group of one row (activation slice k: columns
// 32k .. 32k+31). Two accumulators per row: with one, vpdpbusd's latency would bound decode
// (4 dependent products per group), not the memory it streams from.
void add_group_dot(__m256i dot[2], const uint8_t* codes, const __m256i a[4]) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
  for (int k = 0; k < 4; ++k) dot[k % 2] = _mm256_dpbusd_avx_epi32(dot[k % 2], field(v, k), a[k]);
}

// Decode: token t, the 4 rows of row group rg; the float update as the scalar twin, lane by lane.
__m128 row_group(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t, int64_t rg) {
  const int8_t* q = x.q + t * w.n_cols;
  const uint8_t* codes = w.ternary.packed.data() + rg * sh.n_groups * kRows * kGroupBytes;
  const float* scales = w.ternary.scales.data() + rg * sh.n_blocks * kRows;
  const __m128 s = _mm_set1_ps(x.scale[t]);
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < sh.n_blocks; ++b) {
    const int64_t g0 = b * sh.block_groups;
    const int64_t g1 = g0 + sh.block_groups;
    __m256i dot2[kRows][2] = {};
    for (int64_t g = g0; g < g1; ++g) {
      __m256i a[4];
      for (int k = 0; k < 4; ++k) a[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + g * kGroupCols + 32 * k));
      for (int i = 0; i < kRows; ++i) add_group_dot(dot2[i], codes + (g * kRows + i) * kGroupBytes, a);
    }
    __m256i dot[kRows];
    for (int i = 0; i < kRows; ++i) dot[i] = _mm256_add_epi32(dot2[i][0], dot2[i][1]);
    const __m128i act_sum = _mm_set1_epi32(x.block_sum(t, g0, g1));
    const __m128 d = _mm_cvtepi32_ps(_mm_sub_epi32(hsum4(dot), act_sum));
    acc = _mm_add_ps(acc, _mm_mul_ps(_mm_div_ps(d, s), _mm_loadu_ps(scales + b * kRows)));
  }
  return acc;
}

// Lane t: the activation sum of token t0 + t over groups [g0, g1) (8 tokens from t0 exist:
// kTokenPad). Summed apart from the dot products, whose loop needs every register.
__m256i block_sums(const Q8Rows& x, int64_t t0, int64_t g0, int64_t g1) {
  __m256i sum = _mm256_setzero_si256();
  for (int64_t g = g0; g < g1; ++g) {
    const auto* group_sums = reinterpret_cast<const __m256i*>(x.group_sum + g * x.token_stride + t0);
    sum = _mm256_add_epi32(sum, _mm256_loadu_si256(group_sums));
  }
  return sum;
}

// Prefill: row r against tokens t0 .. t0+T-1; each group's codes are unpacked once and meet
// the T tokens' activations. Lane j of the float accumulator is token t0 + j; t0 is a multiple
// of kTileTokens, so the 8 padded scales and group sums at t0 exist (kTokenPad).
template <int T>
void gemm_row(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t0, int64_t r, float* y) {
  // Row r's group g is at row_codes + g * kRows * kGroupBytes, its block b scale at
  // row_scales[b * kRows] (weights.h).
  const uint8_t* row_codes = w.ternary.packed.data() + w.ternary.group_offset(r, 0, sh.n_groups);
  const float* row_scales = w.ternary.scales.data() + w.ternary.scale_index(r, 0, sh.n_blocks);
  const int8_t* q = x.q + t0 * w.n_cols;
  const __m256 s = _mm256_loadu_ps(x.scale + t0);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < sh.n_blocks; ++b) {
    const int64_t g0 = b * sh.block_groups;
    const int64_t g1 = g0 + sh.block_groups;
    __m256i dot[kTileTokens] = {};  // lanes of tokens >= T stay 0
    for (int64_t g = g0; g < g1; ++g) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_codes + g * kRows * kGroupBytes));
      for (int k = 0; k < 4; ++k) {
        const __m256i c = field(v, k);
        for (int j = 0; j < T; ++j) {
          const auto* a = reinterpret_cast<const __m256i*>(q + j * w.n_cols + g * kGroupCols + 32 * k);
          dot[j] = _mm256_dpbusd_avx_epi32(dot[j], c, _mm256_loadu_si256(a));
        }
      }
    }
    const __m256i act_sum = block_sums(x, t0, g0, g1);
    const __m256 d = _mm256_cvtepi32_ps(_mm256_sub_epi32(hsum8(dot), act_sum));
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_div_ps(d, s), _mm256_set1_ps(row_scales[b * kRows])));
  }
  alignas(32) float out[kTileTokens];
  _mm256_store_ps(out, acc);
  for (int j = 0; j < T; ++j) y[(t0 + j) * w.n_rows + r] = out[j];
}

// The kernel as the shared drivers call it (kernels_ternary_driver.h).
struct W2A8 {
  static constexpr int kRows = avx2::kTernaryRows;
  // A cache block of row groups stays in L2 while every token tile passes over it.
  static constexpr int64_t kBlockCodeBytes = 256 << 10;
  static void row_group(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t, int64_t rg,
                        float* out) {
    _mm_store_ps(out, avxvnni::row_group(w, sh, x, t, rg));
  }
  template <int T>
  static void tile(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t0, int64_t ra, int64_t rb,
                   float* y) {
    for (int64_t r = ra; r < rb; ++r) gemm_row<T>(w, sh, x, t0, r, y);
  }
};

}  // namespace

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  ternary_matmul<W2A8>(w, x, y, r0, r1);
}

}  // namespace bitnet::cpu::avxvnni

namespace bitnet::cpu {

namespace {
constexpr std::string_view kAvxVnniNeeds[] = {"avx2", "fma", "f16c", "avx_vnni"};
}

constinit const KernelSet kAvxVnniKernels = {
    .name = "avxvnni",
    .needs = kAvxVnniNeeds,
    .ternary_rows_per_group = avx2::kTernaryRows,
    .matmul_ternary = avxvnni::matmul_ternary,
    .matmul_float = avx2::matmul_float,
    .quant_dot = avx2::quant_dot,
    .quant_tile = avx2::quant_tile,
    .quantize_act_row = avx2::quantize_act_row,
    .quantize_act = avx2::quantize_act,
    .rms_norm_row = avx2::rms_norm_row,
    .attention_head = avx2::attention_head,
    .attention_head_f16 = avx2::attention_head_f16,
    .attention_heads = avx2::attention_heads,
    .attention_heads_f16 = avx2::attention_heads_f16,
    .attention_heads_part = avx2::attention_heads_part,
    .attention_heads_part_f16 = avx2::attention_heads_part_f16,
    .silu_mul = avx2::silu_mul,
    .relu2_mul = avx2::relu2_mul,
    .add = avx2::add,
    .fp32_to_fp16_row = avx2::fp32_to_fp16_row,
};

}  // namespace bitnet::cpu
