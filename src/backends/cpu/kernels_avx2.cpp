// AVX2 set, W2A8 part: the ternary matmul over row groups of 4 rows and the activation
// quantization. Bit-identical to the scalar twin: integer dots are exact, and the float update
// per scale block is the scalar expression evaluated lane by lane (no FMA contraction: the
// CPU backend is compiled with -ffp-contract=off).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_avx2.h"
#include "backends/cpu/kernels_ternary_driver.h"
#include "quant/act_quant.h"

namespace bitnet::cpu::avx2 {

namespace {

// The four activation slices of one 128-column group: a[k] holds columns 32k .. 32k+31, which
// meet the 2-bit field k of the group's code bytes (bits 7-6 for k = 0 ... bits 1-0 for k = 3).
struct GroupActs {
  __m256i a[4];
};

GroupActs load_acts(const int8_t* q) {
  GroupActs g;
  for (int k = 0; k < 4; ++k) g.a[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * k));
  return g;
}

// The codes of one row's group as four vectors of unsigned bytes in {0, 1, 2}, c[k] = field k.
struct GroupCodes {
  __m256i c[4];
};

GroupCodes unpack_codes(const uint8_t* bytes) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes));
  const __m256i mask = _mm256_set1_epi8(3);
  // 16-bit shifts pull bits across the byte boundary; the mask keeps each byte's own field.
  return {{_mm256_and_si256(_mm256_srli_epi16(v, 6), mask), _mm256_and_si256(_mm256_srli_epi16(v, 4), mask),
           _mm256_and_si256(_mm256_srli_epi16(v, 2), mask), _mm256_and_si256(v, mask)}};
}

// Groups whose dots are summed in int16 before widening. Each maddubs int16 lane holds two
// products, |code * q| <= 2 * 128, so |lane| <= 512; a group adds four maddubs results
// (<= 2048) and a span of 8 groups at most 16384. int16 would overflow after 64 maddubs
// results, 16 groups: bitnet.cpp's AVX2 I2_S kernel sums 4096 products and does
// (microsoft/BitNet#629).
constexpr int64_t kInt16Groups = 8;

// dot16 + sum code * q over one group, as 16 int16 lanes.
__m256i add_group_dot(__m256i dot16, const GroupCodes& w, const __m256i a0, const __m256i a1, const __m256i a2,
                      const __m256i a3) {
  const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(w.c[0], a0), _mm256_maddubs_epi16(w.c[1], a1));
  const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(w.c[2], a2), _mm256_maddubs_epi16(w.c[3], a3));
  return _mm256_add_epi16(dot16, _mm256_add_epi16(s01, s23));
}

__m256i add_group_dot(__m256i dot16, const GroupCodes& w, const GroupActs& x) {
  return add_group_dot(dot16, w, x.a[0], x.a[1], x.a[2], x.a[3]);
}

// dot32 + the int16 lanes of dot16, widened in pairs.
__m256i widen_add(__m256i dot32, __m256i dot16) {
  return _mm256_add_epi32(dot32, _mm256_madd_epi16(dot16, _mm256_set1_epi16(1)));
}

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

// Row group rg's codes from group g, and row r's (weights.h's group_offset with the layout's
// row count as a constant, which matmul_ternary checks: the stored count's division cost the
// prefill tile an idiv per row); row r's scale of block b (scale_index, the same way).
const uint8_t* group_codes(const CpuWeight& w, const TernaryShape& sh, int64_t rg, int64_t g) {
  return w.ternary.packed.data() + (rg * sh.n_groups + g) * kTernaryRows * kGroupBytes;
}
const uint8_t* row_codes(const CpuWeight& w, const TernaryShape& sh, int64_t r, int64_t g) {
  return group_codes(w, sh, r / kTernaryRows, g) + r % kTernaryRows * kGroupBytes;
}
float row_scale(const CpuWeight& w, const TernaryShape& sh, int64_t r, int64_t b) {
  return w.ternary.scales[static_cast<size_t>((r / kTernaryRows * sh.n_blocks + b) * kTernaryRows + r % kTernaryRows)];
}

// How far ahead of the group being read decode prefetches its codes: one core's demand
// misses alone leave it short of the memory's bandwidth.
constexpr int64_t kPrefetchBytes = 4096;

// Decode: token t, the 4 rows of row group rg. One pass over the group's codes; each
// activation slice is loaded once for the 4 rows. Returns the 4 outputs. Inlined by force: GCC
// would call it once per row group from the shared decode loop, which costs a few percent.
[[gnu::always_inline]] inline __m128 gemv_row_group(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x,
                                                     int64_t t, int64_t rg) {
  const int8_t* q = x.q + t * w.n_cols;
  const uint8_t* codes = group_codes(w, sh, rg, 0);
  const float* scales = w.ternary.scales.data() + rg * sh.n_blocks * kTernaryRows;
  const __m128 s = _mm_set1_ps(x.scale[t]);
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < sh.n_blocks; ++b) {
    const int64_t g0 = b * sh.block_groups;
    const int64_t g1 = g0 + sh.block_groups;
    __m256i dot[kTernaryRows] = {};
    for (int64_t span = g0; span < g1; span += kInt16Groups) {
      __m256i dot16[kTernaryRows] = {};
      for (int64_t g = span; g < std::min(g1, span + kInt16Groups); ++g) {
        const GroupActs a = load_acts(q + g * kGroupCols);
        const uint8_t* group = codes + g * kTernaryRows * kGroupBytes;
        _mm_prefetch(reinterpret_cast<const char*>(group + kPrefetchBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(group + kPrefetchBytes + 64), _MM_HINT_T0);
        for (int i = 0; i < kTernaryRows; ++i) dot16[i] = add_group_dot(dot16[i], unpack_codes(group + i * kGroupBytes), a);
      }
      for (int i = 0; i < kTernaryRows; ++i) dot[i] = widen_add(dot[i], dot16[i]);
    }
    const __m128i act_sum = _mm_set1_epi32(x.block_sum(t, g0, g1));
    const __m128 d = _mm_cvtepi32_ps(_mm_sub_epi32(hsum4(dot), act_sum));
    acc = _mm_add_ps(acc, _mm_mul_ps(_mm_div_ps(d, s), _mm_loadu_ps(scales + b * kTernaryRows)));
  }
  return acc;
}

// Prefill works on column chunks of one int16 span: a chunk's activations for the token tile
// are copied side by side into an 8 KB buffer, and every row of a sub-block of rows passes over
// them before the next chunk. They are then read from L1: 8 tokens of a 6912-column row are
// 55 KB, more than Zen 3's 32 KB L1, and re-reading them from L2 for every row held the tile to
// about half its instruction rate. Per row and token the chunk dots add up in int32.
constexpr int64_t kChunkGroups = kInt16Groups;
constexpr int64_t kSubRows = 64;  // rows whose int32 and float sums a tile keeps (4 KB)
constexpr int64_t kPrefetchRowGroups = 2;

// One row's dots over n <= kChunkGroups groups (one int16 span: no lane can overflow, as in
// decode) against T tokens' chunk activations (group g, token j at act + (g * T + j) *
// kGroupCols), as T int32 lanes (lanes >= T are 0). Each slice of codes is unpacked just before
// the T tokens use it, so the T int16 sums stay in registers.
template <int T>
[[gnu::always_inline]] inline __m256i chunk_dots(const uint8_t* codes, const int8_t* act, int64_t n) {
  const __m256i mask = _mm256_set1_epi8(3);
  __m256i d[kTileTokens];
  for (int j = 0; j < kTileTokens; ++j) d[j] = _mm256_setzero_si256();
  for (int64_t g = 0; g < n; ++g) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + g * kTernaryRows * kGroupBytes));
    const int8_t* a = act + g * T * kGroupCols;
    for (int k = 0; k < 4; ++k) {
      // Field k of each byte (bits 7-6 for k = 0 ... bits 1-0 for k = 3).
      const __m256i c = _mm256_and_si256(k == 3 ? v : _mm256_srli_epi16(v, 6 - 2 * k), mask);
      for (int j = 0; j < T; ++j) {
        const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(a + j * kGroupCols + 32 * k));
        d[j] = _mm256_add_epi16(d[j], _mm256_maddubs_epi16(c, q));
        // Without this GCC regroups the adds into trees over all 32 products of a group, whose
        // partial sums outnumber the 16 registers and spill.
        asm("" : "+x"(d[j]));
      }
    }
  }
  for (int j = 0; j < kTileTokens; ++j) d[j] = _mm256_madd_epi16(d[j], _mm256_set1_epi16(1));
  return hsum8(d);
}

// Prefetches the chunk's codes (groups [g0, g0 + kChunkGroups) of block end gb1) of the row
// group kPrefetchRowGroups after rg, or, past the sub-block's last row group (rg_end), those
// of the next chunk in its first row groups: with few tokens (a decode step of many sequences)
// the codes come from memory and demand misses alone starve the tile. Inlined by force: GCC 12
// finds a function whose only effects are prefetches free of side effects and drops its calls
// (the tile then ran at half speed on streamed weights).
[[gnu::always_inline]] inline void prefetch_ahead(const CpuWeight& w, const TernaryShape& sh, int64_t rg, int64_t g0, int64_t gb1,
                                                     int64_t rg_first, int64_t rg_end) {
  rg += kPrefetchRowGroups;
  if (rg >= rg_end) rg += rg_first - rg_end, g0 += kChunkGroups;
  if (rg >= rg_end || g0 >= gb1) return;
  const uint8_t* p = group_codes(w, sh, rg, g0);
  for (int64_t off = 0; off < min64(gb1 - g0, kChunkGroups) * kTernaryRows * kGroupBytes; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
  }
}

// Prefill: rows [ra, rb) against T tokens (t0 .. t0+T-1). Lane j of each vector is token t0 + j.
template <int T>
void gemm_tile(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t0, int64_t ra, int64_t rb,
               float* y) {
  alignas(32) int8_t act[kChunkGroups * kTileTokens * kGroupCols];
  alignas(32) int32_t dot[kSubRows][kTileTokens];
  alignas(32) float acc[kSubRows][kTileTokens];
  const __m256 s = _mm256_loadu_ps(x.scale + t0);  // padded to 8 tokens (kTokenPad)
  for (int64_t r0 = ra; r0 < rb; r0 += kSubRows) {
    const int64_t n_rows = min64(rb - r0, kSubRows);
    const int64_t rg_first = r0 / kTernaryRows;
    const int64_t rg_end = (r0 + n_rows - 1) / kTernaryRows + 1;
    for (int64_t i = 0; i < n_rows; ++i) _mm256_store_ps(acc[i], _mm256_setzero_ps());
    for (int64_t b = 0; b < sh.n_blocks; ++b) {
      const int64_t gb0 = b * sh.block_groups;
      const int64_t gb1 = gb0 + sh.block_groups;
      for (int64_t i = 0; i < n_rows; ++i) _mm256_store_si256(reinterpret_cast<__m256i*>(dot[i]), _mm256_setzero_si256());
      __m256i act_sum = _mm256_setzero_si256();
      for (int64_t g0 = gb0; g0 < gb1; g0 += kChunkGroups) {
        const int64_t n = min64(gb1 - g0, kChunkGroups);
        for (int64_t g = 0; g < n; ++g) {
          for (int j = 0; j < T; ++j) {
            const auto* src = reinterpret_cast<const __m256i*>(x.q + (t0 + j) * w.n_cols + (g0 + g) * kGroupCols);
            auto* dst = reinterpret_cast<__m256i*>(act + (g * T + j) * kGroupCols);
            for (int k = 0; k < 4; ++k) _mm256_store_si256(dst + k, _mm256_loadu_si256(src + k));
          }
          act_sum = _mm256_add_epi32(act_sum, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                                  x.group_sum + (g0 + g) * x.token_stride + t0)));
        }
        for (int64_t i = 0; i < n_rows; ++i) {
          const int64_t r = r0 + i;
          if (r % kTernaryRows == 0) prefetch_ahead(w, sh, r / kTernaryRows, g0, gb1, rg_first, rg_end);
          auto* di = reinterpret_cast<__m256i*>(dot[i]);
          _mm256_store_si256(di, _mm256_add_epi32(_mm256_load_si256(di), chunk_dots<T>(row_codes(w, sh, r, g0), act, n)));
        }
      }
      for (int64_t i = 0; i < n_rows; ++i) {
        const __m256i di = _mm256_load_si256(reinterpret_cast<const __m256i*>(dot[i]));
        const __m256 d = _mm256_cvtepi32_ps(_mm256_sub_epi32(di, act_sum));
        const __m256 scale = _mm256_set1_ps(row_scale(w, sh, r0 + i, b));
        _mm256_store_ps(acc[i], _mm256_add_ps(_mm256_load_ps(acc[i]), _mm256_mul_ps(_mm256_div_ps(d, s), scale)));
      }
    }
    for (int64_t i = 0; i < n_rows; ++i) {
      for (int j = 0; j < T; ++j) y[(t0 + j) * w.n_rows + r0 + i] = acc[i][j];
    }
  }
}

// The kernel as the shared drivers call it (kernels_ternary_driver.h).
struct W2A8 {
  static constexpr int kRows = kTernaryRows;
  // A cache block of row groups stays in L2 while every token tile passes over it.
  static constexpr int64_t kBlockCodeBytes = 256 << 10;
  static void row_group(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t, int64_t rg,
                        float* out) {
    _mm_store_ps(out, gemv_row_group(w, sh, x, t, rg));
  }
  template <int T>
  static void tile(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t0, int64_t ra, int64_t rb,
                   float* y) {
    gemm_tile<T>(w, sh, x, t0, ra, rb, y);
  }
};

// 8 activations: round half to even, clamp to [-128, 127], NaN -> 0, as int32.
__m256i quantize8(const float* x, __m256 s) {
  const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x), s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // min/max return their second operand when either is NaN: r last keeps a NaN, then it is zeroed.
  const __m256 clamped = _mm256_max_ps(_mm256_set1_ps(-128.0f), _mm256_min_ps(_mm256_set1_ps(127.0f), r));
  return _mm256_cvtps_epi32(_mm256_and_ps(clamped, _mm256_cmp_ps(r, r, _CMP_ORD_Q)));
}

float max_abs(const float* x, int64_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  int64_t i = 0;
  // max_ps returns its second operand when either is NaN: a NaN |x| never becomes the max.
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), m);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float amax = 0.0f;
  for (float v : lanes) amax = v > amax ? v : amax;
  for (; i < n; ++i) amax = std::fabs(x[i]) > amax ? std::fabs(x[i]) : amax;
  return amax;
}

}  // namespace

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  ternary_matmul<W2A8>(w, x, y, r0, r1);
}

float quantize_act(const float* x, int64_t n_cols, int8_t* q, int32_t* group_sum, int64_t group_sum_stride) {
  // As act_quant_i8: max|x| floored at 1e-5 in double, s = (float)(127 / max).
  const float s = static_cast<float>(127.0 / std::max(static_cast<double>(max_abs(x, n_cols)), 1e-5));
  const __m256 sv = _mm256_set1_ps(s);
  // packs_epi32 and packs_epi16 interleave 128-bit lanes; this puts the 32 bytes back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t k0 = 0; k0 < n_cols; k0 += kGroupCols) {
    const int64_t k1 = std::min(n_cols, k0 + kGroupCols);
    __m256i sum = _mm256_setzero_si256();
    int64_t k = k0;
    for (; k + 32 <= k1; k += 32) {
      const __m256i a = quantize8(x + k, sv), b = quantize8(x + k + 8, sv);
      const __m256i c = quantize8(x + k + 16, sv), d = quantize8(x + k + 24, sv);
      sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d)));
      const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + k), _mm256_permutevar8x32_epi32(bytes, order));
    }
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
    int32_t total = 0;
    for (int32_t v : lanes) total += v;
    for (; k < k1; ++k) {
      q[k] = quant::act_quant_one(x[k], s);
      total += q[k];
    }
    group_sum[k0 / kGroupCols * group_sum_stride] = total;
  }
  return s;
}

}  // namespace bitnet::cpu::avx2

namespace bitnet::cpu {

namespace {
constexpr std::string_view kAvx2Needs[] = {"avx2", "fma", "f16c"};
}

constinit const KernelSet kAvx2Kernels = {
    .name = "avx2",
    .needs = kAvx2Needs,
    .ternary_rows_per_group = avx2::kTernaryRows,
    .matmul_ternary = avx2::matmul_ternary,
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
