// AVX-512 VNNI set: the AVX2 set with a W2A8 matmul on the 512-bit vpdpbusd (unsigned codes x
// signed activations, groups of 4 products added straight into int32 lanes: no int16 stage,
// no overflow to guard). Same layout as the AVX2 kernel: in a row group of 4 rows the 32 code
// bytes of rows i and i+1 for one column group are adjacent, so one 64-byte load feeds two
// rows, each half against the same 32 activations (broadcast to both halves).
//
// Decode (1 token) streams each row group's codes once. Prefill tiles tokens: a column group's
// codes are unpacked once into registers and meet 8 tokens' activations, and the rows are
// walked in cache blocks so that every token tile finds the block's codes in L2.

// GCC 12's AVX-512 headers seed some intrinsics' results with a self-initialized variable,
// which -Wuninitialized reports at each use (GCC bug 105593, fixed in 13): silenced for the
// header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_avx2.h"
#include "backends/cpu/kernels_ternary_driver.h"

namespace bitnet::cpu::avx512vnni {

namespace {

constexpr int kRows = avx2::kTernaryRows;

// Tokens per prefill tile (kTileTokens, 8): their accumulators (2 per token) take 16 of the 32
// zmm registers, and 16 independent product chains hide vpdpbusd's latency.
static_assert(kTileTokens == 8);

// {sum of a[0], ..., sum of a[3]}.
__m128i hsum4(const __m256i a[4]) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

// Field k of 64 code bytes as unsigned bytes in {0, 1, 2} (bits 7-6 for k = 0 ... 1-0 for k = 3).
// 16-bit shifts pull bits across the byte boundary; the mask keeps each byte's own field.
__m512i field(__m512i v, int k) {
  return _mm512_and_si512(_mm512_srli_epi16(v, static_cast<unsigned>(6 - 2 * k)), _mm512_set1_epi8(3));
}

// dot[k] += code * q over field k of one group of two adjacent rows, a[k]: columns 32k .. 32k+31
// in both halves. One accumulator per field: vpdpbusd's latency would otherwise bound decode
// (4 dependent products per group), not the memory it streams from.
void add_group_dot(__m512i dot[4], const uint8_t* codes, const __m512i a[4]) {
  const __m512i v = _mm512_loadu_si512(codes);
  for (int k = 0; k < 4; ++k) dot[k] = _mm512_dpbusd_epi32(dot[k], field(v, k), a[k]);
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
    __m512i dot01[4] = {};
    __m512i dot23[4] = {};
    for (int64_t g = g0; g < g1; ++g) {
      __m512i a[4];
      for (int k = 0; k < 4; ++k) {
        a[k] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + g * kGroupCols + 32 * k)));
      }
      const uint8_t* group = codes + g * kRows * kGroupBytes;
      add_group_dot(dot01, group, a);
      add_group_dot(dot23, group + 2 * kGroupBytes, a);
    }
    const __m512i sum01 = _mm512_add_epi32(_mm512_add_epi32(dot01[0], dot01[1]),
                                           _mm512_add_epi32(dot01[2], dot01[3]));
    const __m512i sum23 = _mm512_add_epi32(_mm512_add_epi32(dot23[0], dot23[1]),
                                           _mm512_add_epi32(dot23[2], dot23[3]));
    const __m256i dot[kRows] = {_mm512_castsi512_si256(sum01), _mm512_extracti64x4_epi64(sum01, 1),
                                _mm512_castsi512_si256(sum23), _mm512_extracti64x4_epi64(sum23, 1)};
    const __m128i act_sum = _mm_set1_epi32(x.block_sum(t, g0, g1));
    const __m128 d = _mm_cvtepi32_ps(_mm_sub_epi32(hsum4(dot), act_sum));
    acc = _mm_add_ps(acc, _mm_mul_ps(_mm_div_ps(d, s), _mm_loadu_ps(scales + b * kRows)));
  }
  return acc;
}

// The lane sums of a tile's accumulators: dot[j][h] holds token j's lanes of rows 2h (lanes
// 0-7) and 2h+1 (lanes 8-15). out[h]'s 128-bit chunk i holds row i, its lane t token 4h + t.
// Three rounds of two shuffles and an add halve the vectors: 16 -> 8 -> 4 -> 2. Inlined by force:
// GCC would call it, passing the 16 accumulators through memory (TQ formats reduce every 2
// groups, where that call costs more than the groups' dot products).
[[gnu::always_inline]] inline void reduce_tile(const __m512i dot[kTileTokens][2], __m512i out[2]) {
  __m512i p[kTileTokens];  // chunk i of p[j]: row i, 4 partial sums of token j
  for (int j = 0; j < kTileTokens; ++j) {
    p[j] = _mm512_add_epi32(_mm512_shuffle_i32x4(dot[j][0], dot[j][1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(dot[j][0], dot[j][1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  __m512i pair[kTileTokens / 2];  // chunk i of pair[m]: row i, {2m, 2m+1, 2m, 2m+1} partial
  for (int m = 0; m < kTileTokens / 2; ++m) {
    pair[m] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * m], p[2 * m + 1]),
                               _mm512_unpackhi_epi32(p[2 * m], p[2 * m + 1]));
  }
  for (int h = 0; h < 2; ++h) {
    out[h] = _mm512_add_epi32(_mm512_unpacklo_epi64(pair[2 * h], pair[2 * h + 1]),
                              _mm512_unpackhi_epi64(pair[2 * h], pair[2 * h + 1]));
  }
}

// Prefill: tokens t0 .. t0+T-1 against the 4 rows of row group rg, writing the rows of
// [r0, r1). Lanes of the float accumulators as reduce_tile's out; the update per block is the
// scalar twin's, lane by lane. t0 is a multiple of kTileTokens, so the 8 padded scales and
// group sums at t0 exist (kTokenPad); lanes of tokens >= T hold 0 and are not written.
template <int T>
void gemm_row_group(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t0, int64_t rg,
                    float* y, int64_t r0, int64_t r1) {
  const int8_t* q = x.q + t0 * w.n_cols;
  const uint8_t* codes = w.ternary.packed.data() + rg * sh.n_groups * kRows * kGroupBytes;
  const float* scales = w.ternary.scales.data() + rg * sh.n_blocks * kRows;
  const __m512 s[2] = {_mm512_broadcast_f32x4(_mm_loadu_ps(x.scale + t0)),
                       _mm512_broadcast_f32x4(_mm_loadu_ps(x.scale + t0 + 4))};
  const __m512i row_of_chunk = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t b = 0; b < sh.n_blocks; ++b) {
    const int64_t g0 = b * sh.block_groups;
    const int64_t g1 = g0 + sh.block_groups;
    __m512i dot[kTileTokens][2] = {};
    __m256i act_sum = _mm256_setzero_si256();  // lane t: token t0 + t
    for (int64_t g = g0; g < g1; ++g) {
      const uint8_t* group = codes + g * kRows * kGroupBytes;
      const __m512i v01 = _mm512_loadu_si512(group);
      const __m512i v23 = _mm512_loadu_si512(group + 2 * kGroupBytes);
      // Field by field: only two unpacked code vectors are live, which leaves the 16
      // accumulators their registers.
      for (int k = 0; k < 4; ++k) {
        const __m512i c01 = field(v01, k);
        const __m512i c23 = field(v23, k);
        for (int j = 0; j < T; ++j) {
          const auto* qk = reinterpret_cast<const __m256i*>(q + j * w.n_cols + g * kGroupCols + 32 * k);
          const __m512i a = _mm512_broadcast_i64x4(_mm256_loadu_si256(qk));
          dot[j][0] = _mm512_dpbusd_epi32(dot[j][0], c01, a);
          dot[j][1] = _mm512_dpbusd_epi32(dot[j][1], c23, a);
        }
      }
      act_sum = _mm256_add_epi32(
          act_sum, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.group_sum + g * x.token_stride + t0)));
    }
    __m512i d[2];
    reduce_tile(dot, d);
    const __m512 scale =
        _mm512_permutexvar_ps(row_of_chunk, _mm512_castps128_ps512(_mm_loadu_ps(scales + b * kRows)));
    const __m128i sums[2] = {_mm256_castsi256_si128(act_sum), _mm256_extracti128_si256(act_sum, 1)};
    for (int h = 0; h < 2; ++h) {
      const __m512 dh = _mm512_cvtepi32_ps(_mm512_sub_epi32(d[h], _mm512_broadcast_i32x4(sums[h])));
      acc[h] = _mm512_add_ps(acc[h], _mm512_mul_ps(_mm512_div_ps(dh, s[h]), scale));
    }
  }
  alignas(64) float out[2][16];
  _mm512_store_ps(out[0], acc[0]);
  _mm512_store_ps(out[1], acc[1]);
  for (int64_t r = std::max(r0, rg * kRows); r < std::min(r1, (rg + 1) * kRows); ++r) {
    for (int t = 0; t < T; ++t) y[(t0 + t) * w.n_rows + r] = out[t / 4][r % kRows * 4 + t % 4];
  }
}

// The kernel as the shared drivers call it (kernels_ternary_driver.h).
struct W2A8 {
  static constexpr int kRows = avx2::kTernaryRows;
  // A cache block of row groups stays in L2 (1 MiB on Zen 4/5) while every token tile passes
  // over it.
  static constexpr int64_t kBlockCodeBytes = 256 << 10;
  static void row_group(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t, int64_t rg,
                        float* out) {
    _mm_store_ps(out, avx512vnni::row_group(w, sh, x, t, rg));
  }
  // Rows [ra, rb) a row group at a time; a block cuts a row group only at r0 or r1.
  template <int T>
  static void tile(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t0, int64_t ra, int64_t rb,
                   float* y) {
    for (int64_t rg = ra / kRows; rg * kRows < rb; ++rg) gemm_row_group<T>(w, sh, x, t0, rg, y, ra, rb);
  }
};

}  // namespace

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  ternary_matmul<W2A8>(w, x, y, r0, r1);
}

}  // namespace bitnet::cpu::avx512vnni

namespace bitnet::cpu {

namespace {
constexpr std::string_view kAvx512VnniNeeds[] = {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                                                 "avx512_vnni"};
}

constinit const KernelSet kAvx512VnniKernels = {
    .name = "avx512vnni",
    .needs = kAvx512VnniNeeds,
    .ternary_rows_per_group = avx2::kTernaryRows,
    .matmul_ternary = avx512vnni::matmul_ternary,
    .matmul_float = avx2::matmul_float,
    .quant_dot = avx512vnni::quant_dot,
    .quant_tile = avx512vnni::quant_tile,
    .quantize_act_row = avx2::quantize_act_row,
    .quantize_act = avx2::quantize_act,
    .rms_norm_row = avx2::rms_norm_row,
    .rope_row = rope_row,
    .attention_head = avx2::attention_head,
    .attention_head_f16 = avx2::attention_head_f16,
    .silu_mul = avx2::silu_mul,
    .relu2_mul = avx2::relu2_mul,
    .add = avx2::add,
};

}  // namespace bitnet::cpu
