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

// ---- T5 layout (5 codes per byte, weights.h) ----
//
// Decode never extracts a code: with m_0 the byte and m_{i+1} = 3 m_i mod 256 (two byte adds),
// 256 c_i = 3 m_i - m_{i+1}, so over a vector's 64 bytes 256 <c_i, a> = 3 <m_i, a> - <m_{i+1}, a>:
// two vpdpbusd on the unsigned states (P and Q below), and (3P - Q) / 256 is the exact block
// dot. 20 instructions per 320 weights against 15 for the 2-bit kernel's 320, for 80% of its
// bytes: decode is bound by memory bandwidth, not by them (docs/performance.md).

// P and Q of one block for the 4 rows of a row group.
struct T5Acc {
  __m512i p[kT5Rows];
  __m512i q[kT5Rows];
  void clear() {
    for (int r = 0; r < kT5Rows; ++r) p[r] = q[r] = _mm512_setzero_si512();
  }
  // The 4 rows' exact dots, (3P - Q) / 256. In wrapping int32 arithmetic: P may wrap on long
  // rows, 3P - Q = 256 * dot does not (t5_fits).
  __m128i dots() const {
    __m256i s[kT5Rows];
    for (int r = 0; r < kT5Rows; ++r) {
      const __m512i d = _mm512_sub_epi32(_mm512_add_epi32(p[r], _mm512_add_epi32(p[r], p[r])), q[r]);
      s[r] = _mm256_add_epi32(_mm512_castsi512_si256(d), _mm512_extracti64x4_epi64(d, 1));
    }
    return _mm_srai_epi32(hsum4(s), 8);
  }
};

// One position of the 4 rows' states m against 64 activations: P += <m, a>, m = 3m, Q += <m, a>.
[[gnu::always_inline]] inline void t5_position(__m512i m[kT5Rows], const int8_t* act, T5Acc& acc) {
  const __m512i a = _mm512_loadu_si512(act);
  for (int r = 0; r < kT5Rows; ++r) {
    acc.p[r] = _mm512_dpbusd_epi32(acc.p[r], m[r], a);
    m[r] = _mm512_add_epi8(m[r], _mm512_add_epi8(m[r], m[r]));
    acc.q[r] = _mm512_dpbusd_epi32(acc.q[r], m[r], a);
  }
}

// Decode: token 0 against the 4 rows of row group rg. kBlocked: a scale per 256 columns (the
// float update per block, in block order: a chunk's blocks 0-3 after their vectors, block 4,
// spread over position 4 of all 4 vectors, after the last); else one scale per row.
template <bool kBlocked>
__m128 t5_row_group(const CpuWeight& w, const Q8Rows& x, int64_t rg) {
  const int64_t n_vec = t5_vectors(w.n_cols);
  const int64_t n_chunks = w.n_cols / kT5ChunkCols;
  const int64_t n_blocks = w.n_cols / w.ternary.scale_block;
  const uint8_t* codes = w.ternary.packed.data() + rg * n_vec * kT5Rows * kT5VectorBytes;
  const float* scales = w.ternary.scales.data() + rg * n_blocks * kT5Rows;
  const __m128 s = _mm_set1_ps(x.scale[0]);
  __m128 acc = _mm_setzero_ps();
  const auto update = [&](const T5Acc& a, int64_t b) {
    const int64_t g0 = kBlocked ? 2 * b : 0;
    const int64_t g1 = kBlocked ? g0 + 2 : w.n_cols / kGroupCols;
    const __m128 d = _mm_cvtepi32_ps(_mm_sub_epi32(a.dots(), _mm_set1_epi32(x.block_sum(0, g0, g1))));
    acc = _mm_add_ps(acc, _mm_mul_ps(_mm_div_ps(d, s), _mm_loadu_ps(scales + b * kT5Rows)));
  };
  T5Acc cur, fifth;
  cur.clear();
  fifth.clear();
  T5Acc& last = kBlocked ? fifth : cur;
  for (int64_t k = 0; k < n_chunks; ++k) {
    for (int v = 0; v < 4; ++v) {
      const uint8_t* c = codes + (4 * k + v) * kT5Rows * kT5VectorBytes;
      __m512i m[kT5Rows];
      for (int r = 0; r < kT5Rows; ++r) m[r] = _mm512_loadu_si512(c + r * kT5VectorBytes);
      const int8_t* a = x.q + kT5ChunkCols * k + 256 * v;
      for (int i = 0; i < 4; ++i) t5_position(m, a + 64 * i, cur);
      t5_position(m, x.q + kT5ChunkCols * k + 1024 + 64 * v, last);
      if constexpr (kBlocked) {
        update(cur, 5 * k + v);
        cur.clear();
      }
    }
    if constexpr (kBlocked) {
      update(fifth, 5 * k + 4);
      fifth.clear();
    }
  }
  for (int64_t u = 4 * n_chunks; u < n_vec; ++u) {  // the tail: vectors of 4 (or 2) positions
    const uint8_t* c = codes + u * kT5Rows * kT5VectorBytes;
    __m512i m[kT5Rows];
    for (int r = 0; r < kT5Rows; ++r) m[r] = _mm512_loadu_si512(c + r * kT5VectorBytes);
    const int64_t col0 = kT5ChunkCols * n_chunks + 256 * (u - 4 * n_chunks);
    const int64_t n_pos = min64(4, (w.n_cols - col0) / 64);
    for (int64_t i = 0; i < n_pos; ++i) t5_position(m, x.q + col0 + 64 * i, cur);
    if constexpr (kBlocked) {
      update(cur, col0 / 256);
      cur.clear();
    }
  }
  if constexpr (!kBlocked) update(cur, 0);
  return acc;
}

template <bool kBlocked>
void t5_gemv(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  for (int64_t rg = r0 / kT5Rows; rg * kT5Rows < r1; ++rg) {
    alignas(16) float out[kT5Rows];
    _mm_store_ps(out, t5_row_group<kBlocked>(w, x, rg));
    for (int64_t r = max64(r0, rg * kT5Rows); r < min64(r1, (rg + 1) * kT5Rows); ++r) y[r] = out[r % kT5Rows];
  }
}

// The codes of position i of a state vector m: floor(3m / 256) = [m >= 86] + [m >= 171].
__m512i t5_codes(__m512i m) {
  const __m512i one = _mm512_set1_epi8(1);
  return _mm512_add_epi8(_mm512_maskz_mov_epi8(_mm512_cmpge_epu8_mask(m, _mm512_set1_epi8(86)), one),
                         _mm512_maskz_mov_epi8(_mm512_cmpge_epu8_mask(m, _mm512_set1_epi8(static_cast<char>(171))), one));
}

// The 32 bytes of a 2-bit group (weights.h) from the codes of its columns 0-63 (lo) and
// 64-127 (hi): byte j = lo[j] << 6 | lo[j+32] << 4 | hi[j] << 2 | hi[j+32].
void store_group(uint8_t* dst, __m512i lo, __m512i hi) {
  // x[j] = lo[j] << 4 | hi[j]; then byte j = x[j] << 2 | x[j+32]. Bytes stay below 256: the
  // 16-bit shifts carry nothing into the next byte.
  const __m512i x = _mm512_or_si512(_mm512_slli_epi16(lo, 4), hi);
  const __m256i g = _mm256_or_si256(_mm256_slli_epi16(_mm512_castsi512_si256(x), 2), _mm512_extracti64x4_epi64(x, 1));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), g);
}

// Row groups [rg0, rg0 + n_rg) of T5 weight w rewritten in the 2-bit layout (rows_per_group 4)
// into out, row group rg0 first.
void t5_to_2bit(const CpuWeight& w, int64_t rg0, int64_t n_rg, CpuWeight& out) {
  const int64_t n_vec = t5_vectors(w.n_cols);
  const int64_t n_chunks = w.n_cols / kT5ChunkCols;
  const int64_t n_groups = w.n_cols / kGroupCols;
  const int64_t n_blocks = w.n_cols / w.ternary.scale_block;
  for (int64_t g = 0; g < n_rg; ++g) {
    const uint8_t* codes = w.ternary.packed.data() + (rg0 + g) * n_vec * kT5Rows * kT5VectorBytes;
    for (int r = 0; r < kT5Rows; ++r) {
      const auto group = [&](int64_t column_group) {
        return out.ternary.packed.data() + out.ternary.group_offset(g * kT5Rows + r, column_group, n_groups);
      };
      for (int64_t k = 0; k < n_chunks; ++k) {
        __m512i fifth[4];
        for (int v = 0; v < 4; ++v) {
          __m512i m = _mm512_loadu_si512(codes + ((4 * k + v) * kT5Rows + r) * kT5VectorBytes);
          __m512i c[4];
          for (int i = 0; i < 4; ++i) {
            c[i] = t5_codes(m);
            m = _mm512_add_epi8(m, _mm512_add_epi8(m, m));
          }
          fifth[v] = t5_codes(m);
          store_group(group(10 * k + 2 * v), c[0], c[1]);
          store_group(group(10 * k + 2 * v + 1), c[2], c[3]);
        }
        store_group(group(10 * k + 8), fifth[0], fifth[1]);
        store_group(group(10 * k + 9), fifth[2], fifth[3]);
      }
      for (int64_t u = 4 * n_chunks; u < n_vec; ++u) {
        __m512i m = _mm512_loadu_si512(codes + (u * kT5Rows + r) * kT5VectorBytes);
        __m512i c[4];
        for (int i = 0; i < 4; ++i) {
          c[i] = t5_codes(m);
          m = _mm512_add_epi8(m, _mm512_add_epi8(m, m));
        }
        const int64_t g0 = (kT5ChunkCols * n_chunks + 256 * (u - 4 * n_chunks)) / kGroupCols;
        store_group(group(g0), c[0], c[1]);
        if (g0 + 1 < n_groups) store_group(group(g0 + 1), c[2], c[3]);
      }
    }
    const float* src = w.ternary.scales.data() + (rg0 + g) * n_blocks * kT5Rows;
    float* dst = out.ternary.scales.data() + g * n_blocks * kT5Rows;
    for (int64_t i = 0; i < n_blocks * kT5Rows; ++i) dst[i] = src[i];
  }
}

// Prefill on T5 weights: a cache block of row groups at a time is rewritten in the 2-bit
// layout into this thread's scratch and run through the 2-bit tiles, so the tiles stay the
// one prefill kernel; the rewrite costs one pass over the block, shared by all tokens.
void t5_gemm(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  const int64_t rg_bytes = w.n_cols / kGroupCols * kT5Rows * kGroupBytes;  // 2-bit codes of a row group
  const int64_t block_rg = max64(1, W2A8::kBlockCodeBytes / rg_bytes);
  for (int64_t rg0 = r0 / kT5Rows; rg0 * kT5Rows < r1; rg0 += block_rg) {
    const int64_t n_rg = min64(block_rg, (r1 + kT5Rows - 1) / kT5Rows - rg0);
    T5Scratch& scratch = t5_prefill_scratch(w, n_rg, x.n_tokens);
    t5_to_2bit(w, rg0, n_rg, scratch.w);
    const int64_t base = rg0 * kT5Rows;
    const int64_t a = max64(r0, base) - base;
    const int64_t b = min64(r1, base + n_rg * kT5Rows) - base;
    ternary_gemm<W2A8>(scratch.w, x, scratch.y.data(), a, b);
    for (int64_t t = 0; t < x.n_tokens; ++t) {
      for (int64_t r = a; r < b; ++r) y[t * w.n_rows + base + r] = scratch.y[static_cast<size_t>(t * scratch.w.n_rows + r)];
    }
  }
}

}  // namespace

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  if (w.ternary.layout != TernaryLayout::k5Trit) return ternary_matmul<W2A8>(w, x, y, r0, r1);
  BITNET_CHECK(w.ternary.rows_per_group == kT5Rows);
  if (x.n_tokens > 1) return t5_gemm(w, x, y, r0, r1);
  if (w.ternary.scale_block == w.n_cols) return t5_gemv<false>(w, x, y, r0, r1);
  t5_gemv<true>(w, x, y, r0, r1);
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
    .ternary_layout = TernaryLayout::k5Trit,
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
