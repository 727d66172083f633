// AVX-512 VNNI set, attention: the x86 driver (kernels_x86_attention.h) with row kernels 16
// lanes wide, for up to 4 query heads of a kv group per pass. Per cache row, q . k takes one
// F16 conversion per 16 elements for all of the pass's heads and one FMA per head, o += p * v
// the same, where the AVX2 set's 8-lane kernels take two conversions and two FMAs (q . k) or
// two conversions, multiplies and adds (o += p * v, kept apart there) per head. One 2B-4T
// decode token's attention (4 heads a group) at 128 cached positions: 13.0 -> 8.7 us on one
// Zen 5 core, against converting per head (bench_cpu_kernels attention_heads_f16).
//
// GCC 12's AVX-512 headers seed some intrinsics' results with a self-initialized variable,
// which -Wuninitialized reports at each use (GCC bug 105593, fixed in 13): silenced for the
// header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "backends/cpu/kernels_avx2.h"
#include "backends/cpu/kernels_x86_attention.h"

namespace bitnet::cpu::avx512vnni {

namespace {

// {0, 1, ..., 15}.
__m512i lane_index() { return _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0); }

// The 16 lane sums of v[0..15] in one vector (lane k: the sum of v[k]'s lanes): pairs are
// interleaved and added at 32, 64 and 128 bits, halving the vectors each round. Every vector's
// lanes are added in the same tree, ((l0 + l2) + (l1 + l3)) per 128-bit chunk, then (c0 + c1)
// + (c2 + c3), so a sum does not depend on the vectors beside it.
[[gnu::always_inline]] inline __m512 sum16(const __m512 v[16]) {
  __m512 a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(a[2 * i]), _mm512_castps_pd(a[2 * i + 1]));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(a[2 * i]), _mm512_castps_pd(a[2 * i + 1]));
    b[i] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
  }
  // 128-bit chunk q of b[i]: the chunk-q sums of v[4i .. 4i+3].
  for (int i = 0; i < 2; ++i) {
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  return _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

struct Avx512Rows {
  // Query heads per pass: 4 heads x 4 rows are 16 zmm accumulators, next to the 4 rows'
  // converted elements.
  static constexpr int32_t kHeads = 4;

  // The scaled q . k of NQ heads (q: NQ rows head_dim apart) for the 8 cache rows k[0..7]:
  // s[h * s_stride + i] = (q_h . k[i]) * kq_scale for the first nb rows. All 8 rows at once for
  // up to 2 heads, else 4 at a time (at most 16 accumulators, and for one head still 8
  // independent FMA chains; a pass whose rows are all past nb is skipped): each 16 elements of a
  // row loaded and converted once for the NQ heads, one 16-lane accumulator per head and row,
  // the last head_dim % 16 elements through masked loads; then the pass's (head, row)
  // accumulators summed into the lanes of one vector (sum16), scaled in one multiply and stored
  // per head. F32 and F16 caches take the same steps, so an F16 cache scores exactly as an F32
  // one holding the rounded values, and a head's sums are the same steps whatever heads share
  // the pass.
  template <class C, int NQ>
  static void score8(const float* q, int32_t head_dim, const typename C::T* const k[8], float kq_scale, int64_t nb,
                     float* s, int64_t s_stride) {
    constexpr int R = NQ <= 2 ? 8 : 4;  // rows per pass
    for (int r0 = 0; r0 < nb; r0 += R) {
      const typename C::T* const* kr = k + r0;
      __m512 acc[NQ][R];
      for (int h = 0; h < NQ; ++h) {
        for (int r = 0; r < R; ++r) acc[h][r] = _mm512_setzero_ps();
      }
      int32_t d = 0;
      for (; d + 16 <= head_dim; d += 16) {
        __m512 kv[R];
        for (int r = 0; r < R; ++r) kv[r] = C::load16(kr[r] + d);
        for (int h = 0; h < NQ; ++h) {
          const __m512 qv = _mm512_loadu_ps(q + int64_t{h} * head_dim + d);
          for (int r = 0; r < R; ++r) acc[h][r] = _mm512_fmadd_ps(qv, kv[r], acc[h][r]);
        }
      }
      if (d < head_dim) {
        const __mmask16 m = first_lanes(head_dim - d);
        __m512 kv[R];
        for (int r = 0; r < R; ++r) kv[r] = C::load16_masked(kr[r] + d, m);
        for (int h = 0; h < NQ; ++h) {
          const __m512 qv = _mm512_maskz_loadu_ps(m, q + int64_t{h} * head_dim + d);
          for (int r = 0; r < R; ++r) acc[h][r] = _mm512_fmadd_ps(qv, kv[r], acc[h][r]);
        }
      }
      __m512 v[16];
      for (int i = 0; i < 16; ++i) v[i] = i < NQ * R ? acc[i / R][i % R] : _mm512_setzero_ps();
      const __m512 scaled = _mm512_mul_ps(sum16(v), _mm512_set1_ps(kq_scale));  // lane h * R + r
      const __mmask16 keep = first_lanes(nb - r0 < R ? nb - r0 : R);
      for (int h = 0; h < NQ; ++h) {
        // Head h's R lanes down to lane 0.
        const __m512 lanes = _mm512_permutexvar_ps(_mm512_add_epi32(_mm512_set1_epi32(h * R), lane_index()), scaled);
        _mm512_mask_storeu_ps(s + h * s_stride + r0, keep, lanes);
      }
    }
  }

  // o[d] += p[i] * v_rows[i][d] for the nb rows in order, for NQ heads (p: NQ rows p_stride
  // apart, o: NQ rows head_dim apart), one FMA per element, row and head: 128 dimensions (64
  // for 3-4 heads) of the NQ heads at a time in registers, each row's elements loaded and
  // converted once for them, then 16 at a time, the last head_dim % 16 masked.
  template <class C, int NQ>
  static void add_weighted(const typename C::T* const* v_rows, int64_t nb, const float* p, int64_t p_stride,
                           int32_t head_dim, float* o) {
    constexpr int kVecs = NQ <= 2 ? 8 : 4;
    int32_t d0 = 0;
    for (; d0 + 16 * kVecs <= head_dim; d0 += 16 * kVecs) {
      __m512 acc[NQ][kVecs];
      for (int h = 0; h < NQ; ++h) {
        for (int k = 0; k < kVecs; ++k) acc[h][k] = _mm512_loadu_ps(o + int64_t{h} * head_dim + d0 + 16 * k);
      }
      for (int64_t i = 0; i < nb; ++i) {
        __m512 vv[kVecs];
        for (int k = 0; k < kVecs; ++k) vv[k] = C::load16(v_rows[i] + d0 + 16 * k);
        for (int h = 0; h < NQ; ++h) {
          const __m512 pv = _mm512_set1_ps(p[h * p_stride + i]);
          for (int k = 0; k < kVecs; ++k) acc[h][k] = _mm512_fmadd_ps(pv, vv[k], acc[h][k]);
        }
      }
      for (int h = 0; h < NQ; ++h) {
        for (int k = 0; k < kVecs; ++k) _mm512_storeu_ps(o + int64_t{h} * head_dim + d0 + 16 * k, acc[h][k]);
      }
    }
    for (; d0 < head_dim; d0 += 16) {
      const __mmask16 m = first_lanes(head_dim - d0);
      __m512 acc[NQ];
      for (int h = 0; h < NQ; ++h) acc[h] = _mm512_maskz_loadu_ps(m, o + int64_t{h} * head_dim + d0);
      for (int64_t i = 0; i < nb; ++i) {
        const __m512 vv = C::load16_masked(v_rows[i] + d0, m);
        for (int h = 0; h < NQ; ++h) acc[h] = _mm512_fmadd_ps(_mm512_set1_ps(p[h * p_stride + i]), vv, acc[h]);
      }
      for (int h = 0; h < NQ; ++h) _mm512_mask_storeu_ps(o + int64_t{h} * head_dim + d0, m, acc[h]);
    }
  }
};

}  // namespace

void attention_head(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos, const KvRowMap& rows,
                    int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale, float* scores, float* out) {
  attention_heads_as_f32<Avx512Rows, F32Cache>(q, 1, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale,
                                               scores, out);
}

void attention_head_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos, const KvRowMap& rows,
                        int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale, float* scores, float* out) {
  attention_heads_as_f32<Avx512Rows, F16Cache>(q, 1, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale,
                                               scores, out);
}

void attention_heads(const float* q, int32_t n_q, const float* k_cache, const float* v_cache, int64_t n_pos,
                     const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                     float* scores, float* out) {
  attention_heads_as_f32<Avx512Rows, F32Cache>(q, n_q, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale,
                                               scores, out);
}

void attention_heads_f16(const float* q, int32_t n_q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos,
                         const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                         float* scores, float* out) {
  attention_heads_as_f32<Avx512Rows, F16Cache>(q, n_q, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale,
                                               scores, out);
}

void attention_heads_part(const float* q, int32_t n_q, const float* k_cache, const float* v_cache, int64_t j_begin,
                          int64_t j_end, const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim,
                          float kq_scale, float* scores, float* out, float* max_out, double* sum_out) {
  attend_positions<Avx512Rows, F32Cache>(q, n_q, k_cache, v_cache, j_begin, j_end, rows, row_stride, kv_off, head_dim, kq_scale,
                                   scores, out, max_out, sum_out);
}

void attention_heads_part_f16(const float* q, int32_t n_q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t j_begin,
                              int64_t j_end, const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim,
                              float kq_scale, float* scores, float* out, float* max_out, double* sum_out) {
  attend_positions<Avx512Rows, F16Cache>(q, n_q, k_cache, v_cache, j_begin, j_end, rows, row_stride, kv_off, head_dim, kq_scale,
                                   scores, out, max_out, sum_out);
}

}  // namespace bitnet::cpu::avx512vnni
