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

#include <unistd.h>

#include <algorithm>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_avx2.h"
#include "backends/cpu/kernels_avx512_reduce.h"
#include "backends/cpu/kernels_avx512vnni.h"
#include "backends/cpu/kernels_ternary_driver.h"

namespace bitnet::cpu::avx512vnni {

namespace {

constexpr int kRows = avx2::kTernaryRows;

// How far ahead of the column group being read the 2-bit tiles prefetch their codes (a row
// group's follow one another, and the next row group's follow those). A batched decode step
// of 8 sequences meets each line of codes once, straight from memory: without the prefetch the
// tiles ran at 85% of their rate in cache (bench_cpu_kernels gemm_w2a8_2bit_streamed
// 6912x2560 tokens:8 on Zen 4, one thread 170 -> 196 GMAC/s against 198 in L2, two threads 308
// -> 366-377). Prefill's later token tiles find the lines in L2 already.
constexpr int64_t kTilePrefetchBytes = 16384;

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

// Field k of 64 code bytes left where it lies: code * 4^(3-k), the other fields' bits cleared.
// One vpandd where field() takes a shift as well.
__m512i field_in_place(__m512i v, int k) { return _mm512_and_si512(v, _mm512_set1_epi8(static_cast<char>(3 << (6 - 2 * k)))); }

// dot[k] += 4^(3-k) * code * q over field k of one group of two adjacent rows (field_in_place),
// a[k]: columns 32k .. 32k+31 in both halves; fields_sum takes the factors out, exactly. One
// accumulator per field: vpdpbusd's latency would otherwise bound decode (4 dependent products
// per group), not the memory it streams from. Per 64 code bytes 4 vpdpbusd and 4 vpandd, where
// shifting each field down first took 7 byte operations: on Zen 4 those ran on the two pipes
// beside vpdpbusd's at one 512-bit operation per cycle, and bounded one thread's decode
// (docs/performance.md, 2026-11-29 13:00).
void add_group_dot(__m512i dot[4], const uint8_t* codes, const __m512i a[4]) {
  const __m512i v = _mm512_loadu_si512(codes);
  for (int k = 0; k < 4; ++k) dot[k] = _mm512_dpbusd_epi32(dot[k], field_in_place(v, k), a[k]);
}

// The exact sum of add_group_dot's 4 accumulators: field k's is a multiple of 4^(3-k) (codes
// up to 3 and |q| <= 128 keep every lane within int32 for rows of up to 2^21 columns).
__m512i fields_sum(const __m512i dot[4]) {
  return _mm512_add_epi32(_mm512_add_epi32(_mm512_srai_epi32(dot[0], 6), _mm512_srai_epi32(dot[1], 4)),
                          _mm512_add_epi32(_mm512_srai_epi32(dot[2], 2), dot[3]));
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
    const __m512i sum01 = fields_sum(dot01);
    const __m512i sum23 = fields_sum(dot23);
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
// [r0, r1) of y, whose tokens are ldy floats apart. Lanes of the float accumulators as reduce_tile's out; the update per block is the
// scalar twin's, lane by lane. t0 is a multiple of kTileTokens, so the 8 padded scales and
// group sums at t0 exist (kTokenPad); lanes of tokens >= T hold 0 and are not written.
template <int T>
void gemm_row_group(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t0, int64_t rg,
                    float* y, int64_t ldy, int64_t r0, int64_t r1) {
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
      _mm_prefetch(reinterpret_cast<const char*>(group + kTilePrefetchBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(group + kTilePrefetchBytes + 64), _MM_HINT_T0);
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
    for (int t = 0; t < T; ++t) y[(t0 + t) * ldy + r] = out[t / 4][r % kRows * 4 + t % 4];
  }
}

// Rows [ra, rb) of y (tokens ldy floats apart) against tokens t0 .. t0+T-1, a row group at a
// time; a cache block cuts a row group only at its first or last row.
template <int T>
void gemm_rows(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t0, int64_t ra, int64_t rb,
               float* y, int64_t ldy) {
  for (int64_t rg = ra / kRows; rg * kRows < rb; ++rg) gemm_row_group<T>(w, sh, x, t0, rg, y, ldy, ra, rb);
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
  template <int T>
  static void tile(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t0, int64_t ra, int64_t rb,
                   float* y) {
    gemm_rows<T>(w, sh, x, t0, ra, rb, y, w.n_rows);
  }
};

// ---- T5 layout (5 codes per byte, weights.h) ----
//
// Decode never extracts a code: with m_0 the byte and m_{i+1} = 3 m_i mod 256 (two byte adds),
// 256 c_i = 3 m_i - m_{i+1}, so over a vector's 64 bytes 256 <c_i, a> = 3 <m_i, a> - <m_{i+1}, a>:
// two vpdpbusd on the unsigned states (P and Q below), and (3P - Q) / 256 is the exact dot.
// 20 instructions per 320 weights against the 2-bit kernel's 15, for 80% of its bytes: on two
// threads decode is bound by memory bandwidth, not by them (docs/performance.md). The
// activations are first put in T5 order (T5Act), so each position reads 64 consecutive bytes.

// 3P - Q = 256 dot per lane, in wrapping int32: P may wrap on long rows, 3P - Q does not
// (t5_fits).
inline __m512i t5_dot256(__m512i p, __m512i q) { return _mm512_sub_epi32(_mm512_add_epi32(p, _mm512_add_epi32(p, p)), q); }

// P and Q of the 4 rows of a row group.
struct T5Acc {
  __m512i p[kT5Rows];
  __m512i q[kT5Rows];
  void clear() {
    for (int r = 0; r < kT5Rows; ++r) p[r] = q[r] = _mm512_setzero_si512();
  }
  __m512i d(int r) const { return t5_dot256(p[r], q[r]); }
  // The 4 rows' dots, summed over all lanes.
  __m128i dots() const {
    __m256i s[kT5Rows];
    for (int r = 0; r < kT5Rows; ++r) {
      const __m512i dr = d(r);
      s[r] = _mm256_add_epi32(_mm512_castsi512_si256(dr), _mm512_extracti64x4_epi64(dr, 1));
    }
    return _mm_srai_epi32(hsum4(s), 8);
  }
  // The dots of each 128-bit quarter (a chunk's blocks 0-3): lane 4b + r = block b, row r.
  __m512i quarter_dots() const {
    const __m512i d0 = d(0), d1 = d(1), d2 = d(2), d3 = d(3);
    const __m512i x01 = _mm512_add_epi32(_mm512_unpacklo_epi32(d0, d1), _mm512_unpackhi_epi32(d0, d1));
    const __m512i x23 = _mm512_add_epi32(_mm512_unpacklo_epi32(d2, d3), _mm512_unpackhi_epi32(d2, d3));
    return _mm512_srai_epi32(_mm512_add_epi32(_mm512_unpacklo_epi64(x01, x23), _mm512_unpackhi_epi64(x01, x23)), 8);
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

// One token's activations q[n_cols] in T5 order into dst[n_cols].
void t5_order(const int8_t* q, int64_t n_cols, int8_t* out) {
  const int64_t n_chunks = n_cols / kT5ChunkCols;
  for (int64_t k = 0; k < n_chunks; ++k) {
    const int8_t* src = q + kT5ChunkCols * k;
    int8_t* dst = out + kT5ChunkCols * k;
    for (int v = 0; v < 4; ++v) {
      for (int i = 0; i < 4; ++i) {
        for (int b = 0; b < 4; ++b) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 320 * v + 64 * i + 16 * b),
                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 256 * b + 64 * v + 16 * i)));
        }
      }
      _mm512_storeu_si512(dst + 320 * v + 256, _mm512_loadu_si512(src + 1024 + 64 * v));
    }
  }
  for (int64_t c = kT5ChunkCols * n_chunks; c < n_cols; c += 64) _mm512_storeu_si512(out + c, _mm512_loadu_si512(q + c));
}

// n_tokens tokens' activations in T5 order from token 0: the caller's (x.q_ordered), else
// ordered into this thread's scratch.
const int8_t* t5_ordered(const Q8Rows& x, int64_t n_cols, int64_t n_tokens) {
  if (x.q_ordered != nullptr) return x.q_ordered;
  T5Act& a = t5_act_scratch(n_cols, n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) t5_order(x.q + t * n_cols, n_cols, a.q.data() + t * n_cols);
  return a.q.data();
}

// One token's activations in T5 order and its sums per 256-column block (these in column order).
struct T5TokenAct {
  const int8_t* q;
  const int32_t* block_sum;
};

// Token 0's T5TokenAct; the sums only where a scale block is shorter than the row.
T5TokenAct t5_act(const CpuWeight& w, const Q8Rows& x) {
  T5Act& a = t5_act_scratch(w.n_cols);
  const int8_t* q = t5_ordered(x, w.n_cols, 1);
  if (w.ternary.scale_block != w.n_cols) {
    for (int64_t b = 0; b < w.n_cols / 256; ++b) a.block_sum[static_cast<size_t>(b)] = x.block_sum(0, 2 * b, 2 * b + 2);
  }
  return {q, a.block_sum.data()};
}

// The native tiles' distance (rounded up to whole row groups in t5_tile). A batched decode step
// of 8 sequences, distances alternating step by step in one process (a throwaway harness):
// 16 KB took 0.973-0.994 of 8 KB's time, 32 KB 0.992-1.002.
constexpr int64_t kT5TilePrefetchBytes = 16384;

// Prefetches rows 0 .. R-1 of the T5 vector `ahead` bytes past c (one line per row). Inlined
// by force: GCC 12 drops calls to a function whose only effects are prefetches. Decode runs
// `ahead` past the vector being read (the row groups follow one another in memory, so this runs
// on into the next): as in the AVX2 set, one core's demand misses alone leave it short of the
// memory's bandwidth. 8 KB, or 4 KB on Zen 4 (t5_decode_prefetch_bytes, kernels_avx512vnni.h).
template <int R>
[[gnu::always_inline]] inline void prefetch_t5_ahead(const uint8_t* c, int64_t ahead) {
  for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(c + ahead + r * kT5VectorBytes), _MM_HINT_T0);
}

// Decode with a scale per 256 columns: the 4 rows of row group rg against one token (its
// activations `act`), the float update per block in block order (a chunk's blocks 0-3 from the
// quarters of positions 0-3, then block 4 from position 4). One scale per row: t5_gemv_rows.
__m128 t5_row_group_blocked(const CpuWeight& w, const Q8Rows& x, const T5TokenAct& act, int64_t rg, int64_t ahead) {
  const int64_t n_vec = t5_vectors(w.n_cols);
  const int64_t n_chunks = w.n_cols / kT5ChunkCols;
  const int64_t n_blocks = w.n_cols / w.ternary.scale_block;
  const uint8_t* codes = w.ternary.packed.data() + rg * n_vec * kT5Rows * kT5VectorBytes;
  const float* scales = w.ternary.scales.data() + rg * n_blocks * kT5Rows;
  const __m128 s = _mm_set1_ps(x.scale[0]);
  __m128 acc = _mm_setzero_ps();
  // One block's update, from the 4 rows' dots.
  const auto update = [&](__m128i dot, int64_t b) {
    const int32_t act_sum = act.block_sum[b];
    const __m128 d = _mm_cvtepi32_ps(_mm_sub_epi32(dot, _mm_set1_epi32(act_sum)));
    acc = _mm_add_ps(acc, _mm_mul_ps(_mm_div_ps(d, s), _mm_loadu_ps(scales + b * kT5Rows)));
  };
  T5Acc cur, fifth;
  cur.clear();
  fifth.clear();
  const __m512i quarter_of_lane = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m512 s16 = _mm512_set1_ps(x.scale[0]);
  for (int64_t k = 0; k < n_chunks; ++k) {
    for (int v = 0; v < 4; ++v) {
      const uint8_t* c = codes + (4 * k + v) * kT5Rows * kT5VectorBytes;
      prefetch_t5_ahead<kT5Rows>(c, ahead);
      __m512i m[kT5Rows];
      for (int r = 0; r < kT5Rows; ++r) m[r] = _mm512_loadu_si512(c + r * kT5VectorBytes);
      const int8_t* a = act.q + kT5ChunkCols * k + 320 * v;
      for (int i = 0; i < 4; ++i) t5_position(m, a + 64 * i, cur);
      t5_position(m, a + 256, fifth);
    }
    // Blocks 5k .. 5k+3 in the 16 lanes at once, then added to acc one after the other.
    const __m512i sums = _mm512_permutexvar_epi32(
        quarter_of_lane, _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(act.block_sum + 5 * k))));
    const __m512 d = _mm512_cvtepi32_ps(_mm512_sub_epi32(cur.quarter_dots(), sums));
    const __m512 u = _mm512_mul_ps(_mm512_div_ps(d, s16), _mm512_loadu_ps(scales + 5 * k * kT5Rows));
    acc = _mm_add_ps(acc, _mm512_castps512_ps128(u));
    acc = _mm_add_ps(acc, _mm512_extractf32x4_ps(u, 1));
    acc = _mm_add_ps(acc, _mm512_extractf32x4_ps(u, 2));
    acc = _mm_add_ps(acc, _mm512_extractf32x4_ps(u, 3));
    update(fifth.dots(), 5 * k + 4);
    cur.clear();
    fifth.clear();
  }
  for (int64_t u = 4 * n_chunks; u < n_vec; ++u) {  // the tail: vectors of 4 (or 2) positions
    const uint8_t* c = codes + u * kT5Rows * kT5VectorBytes;
    prefetch_t5_ahead<kT5Rows>(c, ahead);
    __m512i m[kT5Rows];
    for (int r = 0; r < kT5Rows; ++r) m[r] = _mm512_loadu_si512(c + r * kT5VectorBytes);
    const int64_t col0 = kT5ChunkCols * n_chunks + 256 * (u - 4 * n_chunks);
    const int64_t n_pos = min64(4, (w.n_cols - col0) / 64);
    for (int64_t i = 0; i < n_pos; ++i) t5_position(m, act.q + col0 + 64 * i, cur);
    update(cur.dots(), col0 / 256);
    cur.clear();
  }
  return acc;
}

// The 16 lane sums of v[0..15] in one vector (lane k: sum of v[k]): pairs are interleaved and
// added at 32, 64 and 128 bits, halving the vectors each round.
[[gnu::always_inline]] inline __m512i reduce16(const __m512i v[16]) {
  __m512i a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) {
    a[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  }
  for (int i = 0; i < 4; ++i) {
    b[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_epi64(a[2 * i], a[2 * i + 1]));
  }
  // 128-bit chunk q of b[i]: the chunk-q sums of v[4i .. 4i+3].
  for (int i = 0; i < 2; ++i) {
    c[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  return _mm512_add_epi32(_mm512_shuffle_i32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_i32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// Decode with one scale per row: 256 x the exact int32 dots of the 4 rows of row group rg, one
// vector per row (lane sums), all vectors in one flat loop (a full vector's 5 positions are
// 320 consecutive activations in T5 order). Plain local accumulators: GCC keeps them in
// registers without the copies it makes of T5Acc's arrays.
void t5_row_group_dots(const CpuWeight& w, const int8_t* a, int64_t rg, int64_t ahead, __m512i d[kT5Rows]) {
  const int64_t n_cols = w.n_cols;
  const int64_t n_vec = t5_vectors(n_cols);
  const int64_t n_full = 4 * (n_cols / kT5ChunkCols);
  const uint8_t* c = w.ternary.packed.data() + rg * n_vec * kT5Rows * kT5VectorBytes;
  __m512i p0 = _mm512_setzero_si512(), p1 = p0, p2 = p0, p3 = p0, q0 = p0, q1 = p0, q2 = p0, q3 = p0;
  const auto position = [&](__m512i& m0, __m512i& m1, __m512i& m2, __m512i& m3, const int8_t* x) {
    const __m512i v = _mm512_loadu_si512(x);
    p0 = _mm512_dpbusd_epi32(p0, m0, v);
    p1 = _mm512_dpbusd_epi32(p1, m1, v);
    p2 = _mm512_dpbusd_epi32(p2, m2, v);
    p3 = _mm512_dpbusd_epi32(p3, m3, v);
    m0 = _mm512_add_epi8(m0, _mm512_add_epi8(m0, m0));
    m1 = _mm512_add_epi8(m1, _mm512_add_epi8(m1, m1));
    m2 = _mm512_add_epi8(m2, _mm512_add_epi8(m2, m2));
    m3 = _mm512_add_epi8(m3, _mm512_add_epi8(m3, m3));
    q0 = _mm512_dpbusd_epi32(q0, m0, v);
    q1 = _mm512_dpbusd_epi32(q1, m1, v);
    q2 = _mm512_dpbusd_epi32(q2, m2, v);
    q3 = _mm512_dpbusd_epi32(q3, m3, v);
  };
  int64_t u = 0;
  for (; u < n_full; ++u, c += kT5Rows * kT5VectorBytes) {
    prefetch_t5_ahead<kT5Rows>(c, ahead);
    __m512i m0 = _mm512_load_si512(c), m1 = _mm512_load_si512(c + 64), m2 = _mm512_load_si512(c + 128),
            m3 = _mm512_load_si512(c + 192);
    const int8_t* x = a + 320 * u;
    for (int i = 0; i < 5; ++i) position(m0, m1, m2, m3, x + 64 * i);
  }
  for (; u < n_vec; ++u, c += kT5Rows * kT5VectorBytes) {  // the tail: vectors of 4 (or 2) positions
    prefetch_t5_ahead<kT5Rows>(c, ahead);  // the stream's lines as far ahead as the full vectors'
    __m512i m0 = _mm512_load_si512(c), m1 = _mm512_load_si512(c + 64), m2 = _mm512_load_si512(c + 128),
            m3 = _mm512_load_si512(c + 192);
    const int64_t col0 = kT5ChunkCols * (n_full / 4) + 256 * (u - n_full);
    for (int64_t i = 0; i < min64(4, (n_cols - col0) / 64); ++i) position(m0, m1, m2, m3, a + col0 + 64 * i);
  }
  d[0] = t5_dot256(p0, q0);
  d[1] = t5_dot256(p1, q1);
  d[2] = t5_dot256(p2, q2);
  d[3] = t5_dot256(p3, q3);
}

// Decode with one scale per row, rows [r0, r1): 4 row groups' dots at a time are reduced
// together (reduce16) and go through the float update as one vector of 16 rows, so the long
// reduce-convert-divide chain runs once per 16 rows, off the row groups' loop.
void t5_gemv_rows(const CpuWeight& w, const Q8Rows& x, const int8_t* act, float* y, int64_t r0, int64_t r1) {
  const __m512 s = _mm512_set1_ps(x.scale[0]);
  const __m512i act_sum = _mm512_set1_epi32(x.block_sum(0, 0, w.n_cols / kGroupCols));
  const int64_t rg_end = (r1 + kT5Rows - 1) / kT5Rows;
  const int64_t ahead = t5_decode_prefetch_bytes();
  for (int64_t rg0 = r0 / kT5Rows; rg0 < rg_end; rg0 += 4) {
    __m512i d[16];
    for (int g = 0; g < 4; ++g) {
      if (rg0 + g < rg_end) {
        t5_row_group_dots(w, act, rg0 + g, ahead, d + kT5Rows * g);
      } else {
        for (int r = 0; r < kT5Rows; ++r) d[kT5Rows * g + r] = _mm512_setzero_si512();
      }
    }
    const int64_t row0 = rg0 * kT5Rows;
    const int64_t lo = max64(r0, row0) - row0;
    const int64_t hi = min64(r1, row0 + 16) - row0;
    const __mmask16 rows = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
    const __m512 dot = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srai_epi32(reduce16(d), 8), act_sum));
    const __m512 sc = _mm512_maskz_loadu_ps(rows, w.ternary.scales.data() + row0);
    _mm512_mask_storeu_ps(y + row0, rows, _mm512_add_ps(_mm512_setzero_ps(), _mm512_mul_ps(_mm512_div_ps(dot, s), sc)));
  }
}

void t5_gemv_blocked(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  const T5TokenAct act = t5_act(w, x);
  const int64_t ahead = t5_decode_prefetch_bytes();
  for (int64_t rg = r0 / kT5Rows; rg * kT5Rows < r1; ++rg) {
    alignas(16) float out[kT5Rows];
    _mm_store_ps(out, t5_row_group_blocked(w, x, act, rg, ahead));
    for (int64_t r = max64(r0, rg * kT5Rows); r < min64(r1, (rg + 1) * kT5Rows); ++r) y[r] = out[r % kT5Rows];
  }
}

// The codes of position i of a state vector m: floor(3m / 256) = [m >= 86] + [m >= 171].
__m512i t5_codes(__m512i m) {
  const __m512i one = _mm512_set1_epi8(1);
  return _mm512_add_epi8(_mm512_maskz_mov_epi8(_mm512_cmpge_epu8_mask(m, _mm512_set1_epi8(86)), one),
                         _mm512_maskz_mov_epi8(_mm512_cmpge_epu8_mask(m, _mm512_set1_epi8(static_cast<char>(171))), one));
}

// 64 x the codes of position i of a state vector m, for vpdpbusd: bit 7 of vpavgb(m, 84) =
// (m + 85) / 256 = [m >= 171] and bit 7 of vpavgb(m, 169) = [m >= 86], and the rounding average
// of those two bits (0 or 128 each) is 0, 64 or 128. Five byte operations that Zen 4 runs beside
// vpdpbusd, where t5_codes' compares take vpdpbusd's own pipes.
[[gnu::always_inline]] inline __m512i t5_codes64(__m512i m) {
  const __m512i top = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i ge171 = _mm512_and_si512(_mm512_avg_epu8(m, _mm512_set1_epi8(84)), top);
  const __m512i ge86 = _mm512_and_si512(_mm512_avg_epu8(m, _mm512_set1_epi8(static_cast<char>(169))), top);
  return _mm512_avg_epu8(ge171, ge86);
}

// The same bytes from two compares into mask registers (T5Decode::kCompare).
[[gnu::always_inline]] inline __m512i t5_codes64_compare(__m512i m) {
  const __mmask64 ge86 = _mm512_cmpge_epu8_mask(m, _mm512_set1_epi8(86));
  const __mmask64 ge171 = _mm512_cmpge_epu8_mask(m, _mm512_set1_epi8(static_cast<char>(171)));
  return _mm512_mask_blend_epi8(ge171, _mm512_maskz_mov_epi8(ge86, _mm512_set1_epi8(64)),
                                _mm512_set1_epi8(static_cast<char>(128)));
}

template <T5Decode D>
[[gnu::always_inline]] inline __m512i t5_codes64_by(__m512i m) {
  return D == T5Decode::kCompare ? t5_codes64_compare(m) : t5_codes64(m);
}

// One row's T5 vectors (row r of row group `codes`) as codes in column order into row[n_cols].
void t5_row_codes(const uint8_t* codes, int r, int64_t n_cols, uint8_t* row) {
  const int64_t n_vec = t5_vectors(n_cols);
  const int64_t n_chunks = n_cols / kT5ChunkCols;
  for (int64_t k = 0; k < n_chunks; ++k) {
    for (int v = 0; v < 4; ++v) {
      __m512i m = _mm512_loadu_si512(codes + ((4 * k + v) * kT5Rows + r) * kT5VectorBytes);
      uint8_t* dst = row + kT5ChunkCols * k + 64 * v;
      for (int i = 0; i < 4; ++i, dst += 16) {
        const __m512i c = t5_codes(m);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_castsi512_si128(c));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 256), _mm512_extracti32x4_epi32(c, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 512), _mm512_extracti32x4_epi32(c, 2));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 768), _mm512_extracti32x4_epi32(c, 3));
        m = _mm512_add_epi8(m, _mm512_add_epi8(m, m));
      }
      _mm512_storeu_si512(row + kT5ChunkCols * k + 1024 + 64 * v, t5_codes(m));
    }
  }
  for (int64_t u = 4 * n_chunks; u < n_vec; ++u) {
    __m512i m = _mm512_loadu_si512(codes + (u * kT5Rows + r) * kT5VectorBytes);
    const int64_t col0 = kT5ChunkCols * n_chunks + 256 * (u - 4 * n_chunks);
    for (int64_t c = col0; c < min64(n_cols, col0 + 256); c += 64) {
      _mm512_storeu_si512(row + c, t5_codes(m));
      m = _mm512_add_epi8(m, _mm512_add_epi8(m, m));
    }
  }
}

// Row groups [rg0, rg0 + n_rg) of T5 weight w rewritten in the 2-bit layout (rows_per_group 4)
// into s.w, row group rg0 first. A 2-bit group's byte j = c[j] << 6 | c[j+32] << 4 |
// c[j+64] << 2 | c[j+96] for its 128 codes c.
void t5_to_2bit(const CpuWeight& w, int64_t rg0, int64_t n_rg, T5Scratch& s) {
  const int64_t n_vec = t5_vectors(w.n_cols);
  const int64_t n_groups = w.n_cols / kGroupCols;
  const int64_t n_blocks = w.n_cols / w.ternary.scale_block;
  uint8_t* row = s.codes.data();
  for (int64_t g = 0; g < n_rg; ++g) {
    const uint8_t* codes = w.ternary.packed.data() + (rg0 + g) * n_vec * kT5Rows * kT5VectorBytes;
    for (int r = 0; r < kT5Rows; ++r) {
      t5_row_codes(codes, r, w.n_cols, row);
      for (int64_t cg = 0; cg < n_groups; ++cg) {
        // x[j] = c[j] << 4 | c[j+64]; then byte j = x[j] << 2 | x[j+32]. Bytes stay below 256:
        // the 16-bit shifts carry nothing into the next byte.
        const __m512i x = _mm512_or_si512(_mm512_slli_epi16(_mm512_loadu_si512(row + kGroupCols * cg), 4),
                                          _mm512_loadu_si512(row + kGroupCols * cg + 64));
        const __m256i b = _mm256_or_si256(_mm256_slli_epi16(_mm512_castsi512_si256(x), 2), _mm512_extracti64x4_epi64(x, 1));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(s.w.ternary.packed.data() + s.w.ternary.group_offset(g * kT5Rows + r, cg, n_groups)), b);
      }
    }
    const float* src = w.ternary.scales.data() + (rg0 + g) * n_blocks * kT5Rows;
    float* dst = s.w.ternary.scales.data() + g * n_blocks * kT5Rows;
    for (int64_t i = 0; i < n_blocks * kT5Rows; ++i) dst[i] = src[i];
  }
}

// Row groups [rg0, rg0 + n_rg) of T5 weight w, one scale per row, rewritten in the 2-bit layout
// (rows_per_group 4) with the columns in T5 order, for activations in T5 order (t5_order): the
// row's dot is the same sum, in another order, exact in int32. Position k of a row (its k-th 64
// codes, vector after vector) holds T5-order columns 64k .. 64k+63, so 2-bit group g is positions
// 2g and 2g+1, P and P' (codes c): byte j = P[j] << 6 | P[32+j] << 4 | P'[j] << 2 | P'[32+j].
// Straight from the states in registers: no row of codes in memory, as t5_to_2bit needs for
// column order. The codes come as 64c (t5_codes64: bits 7-6, off the compare pipes), so
// X = 64P | 64P' >> 4 holds P[j] << 6 | P'[j] << 2 in its low half and the same of P[32+j],
// P'[32+j] in its high half, and byte j = X[j] | X[32+j] >> 2. The 16-bit shifts carry
// nothing into the next byte: each byte's low bits are 0 where they would cross.
void t5_to_2bit_t5order(const CpuWeight& w, int64_t rg0, int64_t n_rg, T5Scratch& s) {
  const int64_t n_vec = t5_vectors(w.n_cols);
  const int64_t n_full = 4 * (w.n_cols / kT5ChunkCols);
  const int64_t n_groups = w.n_cols / kGroupCols;
  for (int64_t g = 0; g < n_rg; ++g) {
    const uint8_t* codes = w.ternary.packed.data() + (rg0 + g) * n_vec * kT5Rows * kT5VectorBytes;
    for (int r = 0; r < kT5Rows; ++r) {
      uint8_t* dst = s.w.ternary.packed.data() + s.w.ternary.group_offset(g * kT5Rows + r, 0, n_groups);
      __m512i first = _mm512_setzero_si512();  // 64 x the codes of the group's first position
      bool have_first = false;
      for (int64_t u = 0; u < n_vec; ++u) {
        __m512i m = _mm512_load_si512(codes + (u * kT5Rows + r) * kT5VectorBytes);
        const int64_t n_pos = u < n_full ? 5 : min64(4, (w.n_cols - kT5ChunkCols * (n_full / 4) - 256 * (u - n_full)) / 64);
        for (int64_t i = 0; i < n_pos; ++i) {
          const __m512i c = t5_codes64(m);
          m = _mm512_add_epi8(m, _mm512_add_epi8(m, m));
          if (!have_first) {
            first = c;
            have_first = true;
            continue;
          }
          const __m512i x = _mm512_or_si512(first, _mm512_srli_epi16(c, 4));
          const __m256i b = _mm256_or_si256(_mm512_castsi512_si256(x), _mm256_srli_epi16(_mm512_extracti64x4_epi64(x, 1), 2));
          _mm256_store_si256(reinterpret_cast<__m256i*>(dst), b);
          dst += kT5Rows * kGroupBytes;  // the row's next group
          have_first = false;
        }
      }
    }
    const float* src = w.ternary.scales.data() + (rg0 + g) * kT5Rows;
    for (int r = 0; r < kT5Rows; ++r) s.w.ternary.scales[static_cast<size_t>(g * kT5Rows + r)] = src[r];
  }
}

// ---- T5 prefill with one scale per row: codes decoded in registers ----
//
// A position's 64 codes of a row are decoded once (t5_codes64) and meet the same position of up
// to 8 tokens' activations: one accumulator and one vpdpbusd per token. No block is rewritten,
// which pays for small token counts (batched decode steps of a server). The int32 dot of a
// whole row is exact in any order, so the one float update per row and token gives the scalar
// twin's bits.
//
// Two rows per pass (each activation vector meets both rows' codes) for every token count up
// to 8: 16 accumulators at 8 tokens. Each activation vector is loaded once into a register
// (load_once): GCC folds a vector load into every vpdpbusd that reads it, and with that second
// L1 load per product the load pipes were busy enough that Zen 5 dropped the weights' software
// prefetches (measured with a throwaway program: lines prefetched from such a loop were not in
// the cache afterwards). The tile then waited on memory: 2 rows x 8 tokens ran 390-410 GMAC/s
// per core on weights in cache but about 210 streamed, below the one-row pass's 309 that was
// used for 5-8 tokens until then; loaded once it streams at 394-401 (bench_cpu_kernels
// gemm_w2a8_streamed 6912x2560 tokens:8, one thread; 735-765 on two against 573-589).

// v, kept in a register: the empty asm stops GCC from folding the load into each instruction
// that reads it (see above).
[[gnu::always_inline]] inline __m512i load_once(const int8_t* p) {
  __m512i v = _mm512_loadu_si512(p);
  asm("" : "+v"(v));
  return v;
}

// A T5 weight's vector counts: all vectors of a row, and the full ones (5 positions) first.
struct T5Vectors {
  int64_t n_vec, n_full;
  explicit T5Vectors(int64_t n_cols) : n_vec(t5_vectors(n_cols)), n_full(4 * (n_cols / kT5ChunkCols)) {}
  // The first column of vector u >= n_full (a tail vector of 256 columns, or 128 for the last).
  int64_t tail_col0(int64_t u) const { return kT5ChunkCols * (n_full / 4) + 256 * (u - n_full); }
};

// One position of rows r and r + 1 (states m0, m1) against tokens 0 .. T-1 (token j's 64
// activations at a + j * stride) into acc0[j], acc1[j]; then the states step to the next position.
// The empty asm at the end keeps GCC from interleaving positions: it had spilled 5 of the 16
// accumulators per vector, and those stack loads and stores, with the load pipes as busy as
// they are here, again cost the weights' prefetches (streamed on one thread 337-351 -> 390-392
// GMAC/s; a 2B-4T step of 8 sequences 207-208 -> 225-229 tok/s).
template <int T, T5Decode D>
[[gnu::always_inline]] inline void t5_pair_position(__m512i& m0, __m512i& m1, const int8_t* a, int64_t stride, __m512i acc0[8],
                                                    __m512i acc1[8]) {
  const __m512i c0 = t5_codes64_by<D>(m0), c1 = t5_codes64_by<D>(m1);
  for (int j = 0; j < T; ++j) {
    const __m512i x = load_once(a + j * stride);
    acc0[j] = _mm512_dpbusd_epi32(acc0[j], c0, x);
    acc1[j] = _mm512_dpbusd_epi32(acc1[j], c1, x);
  }
  m0 = _mm512_add_epi8(m0, _mm512_add_epi8(m0, m0));
  m1 = _mm512_add_epi8(m1, _mm512_add_epi8(m1, m1));
  for (int j = 0; j < T; ++j) asm("" : "+v"(acc0[j]), "+v"(acc1[j]));
}

// Vectors [u0, u1) of every row: the part of the rows that one sweep of a tile covers.
struct T5Part {
  int64_t u0, u1;
};

// Rows r and r + 1 of row group rg, vectors [part.u0, part.u1), against T <= 8 tokens (act:
// their T5-ordered activations, n_cols apart): lane j of out[i] is 64 x the exact dot of that
// part of row r + i and token j (0 for j >= T). Full vectors (5 positions, 320 consecutive
// activations), then the tail's vectors of 4 positions, the last of 2 if n_cols % 256 == 128:
// position counts fixed at compile time, and the 5 positions unrolled by force (GCC otherwise
// kept a loop whose 16 accumulators rotated through registers and the stack: 267 GMAC/s in
// cache against 415). The codes are prefetched `ahead` bytes on.
template <int T, T5Decode D>
void t5_row_pair_dots(const CpuWeight& w, const T5Vectors& nv, int64_t rg, int r, const int8_t* act, T5Part part,
                      int64_t ahead, __m256i out[2]) {
  static_assert(T <= 8);
  const int64_t n_cols = w.n_cols;
  const uint8_t* c = w.ternary.packed.data() + ((rg * nv.n_vec + part.u0) * kT5Rows + r) * kT5VectorBytes;
  __m512i acc0[8], acc1[8];
  for (int j = 0; j < 8; ++j) acc0[j] = acc1[j] = _mm512_setzero_si512();
  int64_t u = part.u0;
  for (; u < min64(part.u1, nv.n_full); ++u, c += kT5Rows * kT5VectorBytes) {
    // A batched decode step's few tokens pass over codes that come from memory, as decode's.
    prefetch_t5_ahead<2>(c, ahead);
    __m512i m0 = _mm512_load_si512(c), m1 = _mm512_load_si512(c + kT5VectorBytes);
#pragma GCC unroll 5
    for (int i = 0; i < 5; ++i) t5_pair_position<T, D>(m0, m1, act + 320 * u + 64 * i, n_cols, acc0, acc1);
  }
  for (; u < part.u1; ++u, c += kT5Rows * kT5VectorBytes) {
    prefetch_t5_ahead<2>(c, ahead);
    __m512i m0 = _mm512_load_si512(c), m1 = _mm512_load_si512(c + kT5VectorBytes);
    const int64_t col0 = nv.tail_col0(u);
    for (int i = 0; i < 2; ++i) t5_pair_position<T, D>(m0, m1, act + col0 + 64 * i, n_cols, acc0, acc1);
    if (n_cols - col0 >= 256) {
      for (int i = 2; i < 4; ++i) t5_pair_position<T, D>(m0, m1, act + col0 + 64 * i, n_cols, acc0, acc1);
    }
  }
  out[0] = lane_sums8(acc0);
  out[1] = lane_sums8(acc1);
}

// A tile sweeps its rows one part at a time, each part's activations at most two thirds of
// the L1 data cache (t5_part_act_bytes: 32 KB of Zen 5's 48 KB, 21 KB of Zen 4's and Cascade
// Lake's 32 KB), the rest left to the codes passing through: every row pair's pass reads all of
// the part's activations, and 8 tokens x 6912 columns (the down projection) missed L1
// throughout (on Zen 5, parts of 24 KB ran the down projection 3-4% slower than of 32 KB).
// Rows in several parts are swept this many row groups (64 rows) at a time, their int32 dots
// waiting on the stack (2 KB); a row of one part runs its epilogue after each row group
// (sweeping 16 there ran the 2560-column shapes 3-7% slower).
constexpr int64_t kT5SweepRowGroups = 16;

// Token counts up to this take t5_gemm_rows, larger ones t5_gemm (matmul_ternary), where the
// tiles decode by T5Decode::kAverage. 2B-4T prompts on 2 Zen 5 threads with that decoder,
// native tiles against rewritten blocks, tok/s: pp40 343-348 against 292, pp64 352-354 against
// 321-326, pp128 352 against 346-348, pp256 346-350 against 351, pp512 321-326 against 332-340
// (equal after the accumulators stopped spilling). With kCompare (Zen 5) the native tiles win
// at every count and take them all: pp192 367-368 against 345-346, pp512 346-348 against 339-341,
// pp1024 313-314 against 307-311.
constexpr int64_t kT5NativeMaxTokens = 128;

// Two thirds of this CPU's L1 data cache (32 KB where the system does not say), read once.
int64_t t5_part_act_bytes() {
  static const int64_t bytes = [] {
#ifdef _SC_LEVEL1_DCACHE_SIZE
    const long l1d = ::sysconf(_SC_LEVEL1_DCACHE_SIZE);
#else
    const long l1d = 0;
#endif
    return (l1d >= (16 << 10) ? static_cast<int64_t>(l1d) : int64_t{48} << 10) * 2 / 3;
  }();
  return bytes;
}

// How many parts a T5 weight's rows take for T tokens: as few as keep each part's activations
// within t5_part_act_bytes (up to kT5MaxParts: rows past 256K columns pass it). Part i of n
// holds vectors [n_vec * i / n, n_vec * (i + 1) / n).
constexpr int64_t kT5MaxParts = 64;
int64_t t5_part_count(const T5Vectors& nv, int64_t n_cols, int64_t T) {
  const int64_t limit = t5_part_act_bytes();
  return min64(min64(nv.n_vec, kT5MaxParts), (T * n_cols + limit - 1) / limit);
}

// Tokens t0 .. t0+T-1 against rows [ra, rb) (whole row groups but at ra and rb), one scale per
// row: y = 0 + (dot - act_sum) / s * scale, the scalar twin's float steps. A sweep of row
// groups runs part after part, adding the parts' exact int32 dots; then two rows of a row group
// share one float epilogue: lane 8p + j holds row 2q + p (pair q) and token j.
template <int T, T5Decode D>
void t5_tile(const CpuWeight& w, const Q8Rows& x, const int8_t* act, int64_t t0, int64_t ra, int64_t rb, float* y,
             int64_t n_parts) {
  alignas(64) int32_t sums[16];
  alignas(64) float s[16];
  for (int k = 0; k < 16; ++k) {
    const int64_t t = t0 + min64(k % 8, T - 1);
    sums[k] = x.block_sum(t, 0, w.n_cols / kGroupCols);
    s[k] = x.scale[t];
  }
  const __m512i sum16 = _mm512_load_si512(sums);
  const __m512 s16 = _mm512_load_ps(s);
  const __m512i lane_row = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
  const int8_t* a = act + t0 * w.n_cols;
  const T5Vectors nv(w.n_cols);
  // Prefetch distance: whole row groups, so a sweep fetches the lines of its own part.
  const int64_t rg_bytes = nv.n_vec * kT5Rows * kT5VectorBytes;
  const int64_t ahead = rg_bytes * ((kT5TilePrefetchBytes + rg_bytes - 1) / rg_bytes);
  const auto in_range = [&](int64_t row) { return row >= ra && row < rb; };
  const int64_t rg_end = (rb + kT5Rows - 1) / kT5Rows;
  T5Part parts[kT5MaxParts];
  for (int64_t p = 0; p < n_parts; ++p) parts[p] = {nv.n_vec * p / n_parts, nv.n_vec * (p + 1) / n_parts};
  const int64_t sweep = n_parts == 1 ? 1 : kT5SweepRowGroups;
  for (int64_t rg0 = ra / kT5Rows; rg0 < rg_end; rg0 += sweep) {
    const int64_t n_rg = min64(sweep, rg_end - rg0);
    __m512i dots[kT5SweepRowGroups][kT5Rows / 2];  // pair q of row group rg0 + i: rows 2q (low half), 2q + 1
    for (int64_t p = 0; p < n_parts; ++p) {
      for (int64_t i = 0; i < n_rg; ++i) {
        for (int q = 0; q < kT5Rows / 2; ++q) {
          const int64_t row0 = (rg0 + i) * kT5Rows + 2 * q;
          if (!in_range(row0) && !in_range(row0 + 1)) continue;
          __m256i pair[2];
          t5_row_pair_dots<T, D>(w, nv, rg0 + i, 2 * q, a, parts[p], ahead, pair);
          const __m512i d = _mm512_inserti64x4(_mm512_castsi256_si512(pair[0]), pair[1], 1);
          dots[i][q] = p == 0 ? d : _mm512_add_epi32(dots[i][q], d);
        }
      }
    }
    for (int64_t i = 0; i < n_rg; ++i) {
      const int64_t rg = rg0 + i;
      for (int q = 0; q < kT5Rows / 2; ++q) {
        const int64_t row0 = rg * kT5Rows + 2 * q;
        if (!in_range(row0) && !in_range(row0 + 1)) continue;
        const __m512 sc = _mm512_permutexvar_ps(_mm512_add_epi32(lane_row, _mm512_set1_epi32(2 * q)),
                                                _mm512_castps128_ps512(_mm_loadu_ps(w.ternary.scales.data() + rg * kT5Rows)));
        const __m512 d = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srai_epi32(dots[i][q], 6), sum16));
        alignas(64) float out[16];
        _mm512_store_ps(out, _mm512_add_ps(_mm512_setzero_ps(), _mm512_mul_ps(_mm512_div_ps(d, s16), sc)));
        // Fixed-size stores: GCC turned the general loop into memcpy calls of run-time size when
        // it copied lanes by a row range, a fifth of the tile's time for 8 tokens.
        for (int p = 0; p < 2; ++p) {
          if (!in_range(row0 + p)) continue;
          for (int j = 0; j < T; ++j) y[(t0 + j) * w.n_rows + row0 + p] = out[8 * p + j];
        }
      }
    }
  }
}

// Rows [r0, r1) against all tokens, in cache blocks of row groups that every token tile passes
// over while they are in L2, as ternary_gemm; tiles of 8 tokens, the rows in parts (t5_part_count).
void t5_gemm_rows(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  using Tile = void (*)(const CpuWeight&, const Q8Rows&, const int8_t*, int64_t, int64_t, int64_t, float*, int64_t);
  static constexpr Tile kTiles[2][9] = {
      {nullptr, t5_tile<1, T5Decode::kAverage>, t5_tile<2, T5Decode::kAverage>, t5_tile<3, T5Decode::kAverage>,
       t5_tile<4, T5Decode::kAverage>, t5_tile<5, T5Decode::kAverage>, t5_tile<6, T5Decode::kAverage>,
       t5_tile<7, T5Decode::kAverage>, t5_tile<8, T5Decode::kAverage>},
      {nullptr, t5_tile<1, T5Decode::kCompare>, t5_tile<2, T5Decode::kCompare>, t5_tile<3, T5Decode::kCompare>,
       t5_tile<4, T5Decode::kCompare>, t5_tile<5, T5Decode::kCompare>, t5_tile<6, T5Decode::kCompare>,
       t5_tile<7, T5Decode::kCompare>, t5_tile<8, T5Decode::kCompare>}};
  const Tile* tiles = kTiles[t5_decode() == T5Decode::kCompare ? 1 : 0];
  const int8_t* act = t5_ordered(x, w.n_cols, x.n_tokens);
  const T5Vectors nv(w.n_cols);
  const int64_t rg_bytes = nv.n_vec * kT5Rows * kT5VectorBytes;
  const int64_t block_rows = kT5Rows * max64(1, W2A8::kBlockCodeBytes / rg_bytes);
  const int64_t n_parts = t5_part_count(nv, w.n_cols, min64(8, x.n_tokens));
  for (int64_t rb = r0; rb < r1;) {
    const int64_t rb_end = min64(r1, rb / kT5Rows * kT5Rows + block_rows);
    for (int64_t t0 = 0; t0 < x.n_tokens; t0 += 8) tiles[min64(8, x.n_tokens - t0)](w, x, act, t0, rb, rb_end, y, n_parts);
    rb = rb_end;
  }
}

// Prefill on T5 weights with a scale per 256 columns: a cache block of row groups at a time is rewritten in the 2-bit
// layout into this thread's scratch and run through the 2-bit tiles, so the tiles stay the
// one prefill kernel; the rewrite costs one pass over the block, shared by all tokens.
// With one scale per row the block is rewritten with its columns in T5 order and the tiles
// read the activations in T5 order too (t5_to_2bit_t5order): half the rewrite's work. The
// activation sums of the tiles' one block are the whole row's, the same in any order.
void t5_gemm(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  using Tile = void (*)(const CpuWeight&, const TernaryShape&, const Q8Rows&, int64_t, int64_t, int64_t, float*, int64_t);
  static constexpr Tile kTiles[kTileTokens + 1] = {nullptr,     gemm_rows<1>, gemm_rows<2>, gemm_rows<3>, gemm_rows<4>,
                                                   gemm_rows<5>, gemm_rows<6>, gemm_rows<7>, gemm_rows<8>};
  const int64_t rg_bytes = w.n_cols / kGroupCols * kT5Rows * kGroupBytes;  // 2-bit codes of a row group
  const int64_t block_rg = max64(1, W2A8::kBlockCodeBytes / rg_bytes);
  const bool t5_order_cols = w.ternary.scale_block == w.n_cols;
  Q8Rows xt = x;
  if (t5_order_cols) {
    xt.q = t5_ordered(x, w.n_cols, x.n_tokens);
  }
  for (int64_t rg0 = r0 / kT5Rows; rg0 * kT5Rows < r1; rg0 += block_rg) {
    const int64_t n_rg = min64(block_rg, (r1 + kT5Rows - 1) / kT5Rows - rg0);
    T5Scratch& scratch = t5_prefill_scratch(w, n_rg);
    if (t5_order_cols) {
      t5_to_2bit_t5order(w, rg0, n_rg, scratch);
    } else {
      t5_to_2bit(w, rg0, n_rg, scratch);
    }
    // The block's rows a .. b-1 are rows base + a .. of y: the tiles write there directly.
    const int64_t base = rg0 * kT5Rows;
    const int64_t a = max64(r0, base) - base;
    const int64_t b = min64(r1, base + n_rg * kT5Rows) - base;
    const TernaryShape sh(scratch.w);
    for (int64_t t0 = 0; t0 < x.n_tokens; t0 += kTileTokens) {
      kTiles[min64(kTileTokens, x.n_tokens - t0)](scratch.w, sh, xt, t0, a, b, y + base, w.n_rows);
    }
  }
}

}  // namespace

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  if (w.ternary.layout != TernaryLayout::k5Trit) return ternary_matmul<W2A8>(w, x, y, r0, r1);
  BITNET_CHECK(w.ternary.rows_per_group == kT5Rows);
  if (x.n_tokens > 1) {
    // Decoding codes in registers costs more per token than the 2-bit tiles, rewriting a block
    // costs more per block: on 2B-4T shapes the first wins up to about 128 tokens, or at every
    // count with the compare decoder (kT5NativeMaxTokens, docs/performance.md).
    const bool native = w.ternary.scale_block == w.n_cols &&
                        (x.n_tokens <= kT5NativeMaxTokens || t5_decode() == T5Decode::kCompare);
    return native ? t5_gemm_rows(w, x, y, r0, r1) : t5_gemm(w, x, y, r0, r1);
  }
  if (w.ternary.scale_block == w.n_cols) return t5_gemv_rows(w, x, t5_act(w, x).q, y, r0, r1);
  t5_gemv_blocked(w, x, y, r0, r1);
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
    .ternary_layout_for_threads = avx512vnni::ternary_layout_for_threads,
    .matmul_ternary = avx512vnni::matmul_ternary,
    .order_ternary_act = avx512vnni::t5_order,
    .matmul_float = avx2::matmul_float,
    .quant_dot = avx512vnni::quant_dot,
    .quant_tile = avx512vnni::quant_tile,
    .q6_K_lanes_dot = avx512vnni::q6_K_lanes_dot,
    .q6_K_lanes_tile = avx512vnni::q6_K_lanes_tile,
    .quantize_act_row = avx2::quantize_act_row,
    .quantize_act = avx2::quantize_act,
    .rms_norm_row = avx2::rms_norm_row,
    .attention_head = avx512vnni::attention_head,
    .attention_head_f16 = avx512vnni::attention_head_f16,
    .attention_heads = avx512vnni::attention_heads,
    .attention_heads_f16 = avx512vnni::attention_heads_f16,
    .attention_heads_part = avx512vnni::attention_heads_part,
    .attention_heads_part_f16 = avx512vnni::attention_heads_part_f16,
    .silu_mul = avx2::silu_mul,
    .relu2_mul = avx2::relu2_mul,
    .add = avx2::add,
    .fp32_to_fp16_row = avx2::fp32_to_fp16_row,
};

}  // namespace bitnet::cpu
