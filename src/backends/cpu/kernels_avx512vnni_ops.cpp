// AVX-512 VNNI set, attention: the x86 driver (kernels_x86_attention.h) with row kernels 16
// lanes wide. Per cache row and head, q . k takes one F16 conversion and one FMA per 16
// elements and o += p * v the same, where the AVX2 set's 8-lane kernels take two conversions
// and two FMAs (q . k) or two conversions, multiplies and adds (o += p * v, kept apart there):
// a batched decode step of 8 sequences spent 6.5% of its time in attention at 64-128 cached
// positions (docs/performance.md).
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

// The lanes of a row's last head_dim % 16 elements.
__mmask16 tail_mask(int32_t n) { return static_cast<__mmask16>((1u << n) - 1); }

struct Avx512Rows {
  // q . k for 8 cache rows k[0..7] at once: one 16-lane accumulator per row (each q vector
  // loaded once for the 8 rows), the last head_dim % 16 elements through masked loads, then
  // each accumulator's halves added and the 8 rows reduced by store_lane_sums8. F32 and F16
  // caches take the same steps, so an F16 cache scores exactly as an F32 one holding the
  // rounded values.
  template <class C>
  static void dot8(const float* q, const typename C::T* const k[8], int32_t head_dim, float out[8]) {
    __m512 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm512_setzero_ps();
    int32_t d = 0;
    for (; d + 16 <= head_dim; d += 16) {
      const __m512 qv = _mm512_loadu_ps(q + d);
      for (int i = 0; i < 8; ++i) acc[i] = _mm512_fmadd_ps(qv, C::load16(k[i] + d), acc[i]);
    }
    if (d < head_dim) {
      const __mmask16 m = tail_mask(head_dim - d);
      const __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
      for (int i = 0; i < 8; ++i) acc[i] = _mm512_fmadd_ps(qv, C::load16_masked(k[i] + d, m), acc[i]);
    }
    __m256 h[8];
    for (int i = 0; i < 8; ++i) {
      h[i] = _mm256_add_ps(_mm512_castps512_ps256(acc[i]), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[i]), 1)));
    }
    store_lane_sums8(h, out);
  }

  // o[d] += p[i] * v_rows[i][d] for the nb rows in order, one FMA per element and row: 128
  // dimensions at a time in 8 registers, then 16 at a time, the last head_dim % 16 masked.
  template <class C>
  static void add_weighted(const typename C::T* const* v_rows, int64_t nb, const float* p, int32_t head_dim, float* o) {
    constexpr int kVecs = 8;
    int32_t d0 = 0;
    for (; d0 + 16 * kVecs <= head_dim; d0 += 16 * kVecs) {
      __m512 acc[kVecs];
      for (int k = 0; k < kVecs; ++k) acc[k] = _mm512_loadu_ps(o + d0 + 16 * k);
      for (int64_t i = 0; i < nb; ++i) {
        const __m512 pv = _mm512_set1_ps(p[i]);
        for (int k = 0; k < kVecs; ++k) acc[k] = _mm512_fmadd_ps(pv, C::load16(v_rows[i] + d0 + 16 * k), acc[k]);
      }
      for (int k = 0; k < kVecs; ++k) _mm512_storeu_ps(o + d0 + 16 * k, acc[k]);
    }
    for (; d0 < head_dim; d0 += 16) {
      const __mmask16 m = head_dim - d0 >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(head_dim - d0);
      __m512 acc = _mm512_maskz_loadu_ps(m, o + d0);
      for (int64_t i = 0; i < nb; ++i) acc = _mm512_fmadd_ps(_mm512_set1_ps(p[i]), C::load16_masked(v_rows[i] + d0, m), acc);
      _mm512_mask_storeu_ps(o + d0, m, acc);
    }
  }
};

}  // namespace

void attention_head(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos, const KvRowMap& rows,
                    int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale, float* scores, float* out) {
  attention_heads_as_f32<Avx512Rows, F32Cache>(q, 1, k_cache, v_cache, n_pos, rows, n_embd_kv, kv_off, head_dim, kq_scale,
                                               scores, out);
}

void attention_head_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos, const KvRowMap& rows,
                        int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale, float* scores, float* out) {
  attention_heads_as_f32<Avx512Rows, F16Cache>(q, 1, k_cache, v_cache, n_pos, rows, n_embd_kv, kv_off, head_dim, kq_scale,
                                               scores, out);
}

void attention_heads(const float* q, int32_t n_q, const float* k_cache, const float* v_cache, int64_t n_pos,
                     const KvRowMap& rows, int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale,
                     float* scores, float* out) {
  attention_heads_as_f32<Avx512Rows, F32Cache>(q, n_q, k_cache, v_cache, n_pos, rows, n_embd_kv, kv_off, head_dim, kq_scale,
                                               scores, out);
}

void attention_heads_f16(const float* q, int32_t n_q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos,
                         const KvRowMap& rows, int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale,
                         float* scores, float* out) {
  attention_heads_as_f32<Avx512Rows, F16Cache>(q, n_q, k_cache, v_cache, n_pos, rows, n_embd_kv, kv_off, head_dim, kq_scale,
                                               scores, out);
}

}  // namespace bitnet::cpu::avx512vnni
