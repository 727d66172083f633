// AVX2 set, the ops around the matmuls: rms_norm, attention, gated activations, add.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels_avx2.h"
#include "backends/cpu/kernels_x86_attention.h"

namespace bitnet::cpu::avx2 {

namespace {

double hsum_pd(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

}  // namespace

// The sum of squares is in double as in the scalar twin, over 8 lanes instead of one: each
// square is exact in double, only the additions' order differs (far below float rounding).
void rms_norm_row(const float* x, const float* g, int64_t n, float eps, float* dst) {
  __m256d acc0 = _mm256_setzero_pd();
  __m256d acc1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
    const __m256d hi = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
    acc0 = _mm256_fmadd_pd(lo, lo, acc0);
    acc1 = _mm256_fmadd_pd(hi, hi, acc1);
  }
  double sum = hsum_pd(_mm256_add_pd(acc0, acc1));
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  // (x * scale) * g as the scalar twin: bit-identical for the same scale.
  const __m256 sv = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv), _mm256_loadu_ps(g + i)));
  }
  for (; i < n; ++i) dst[i] = x[i] * scale * g[i];
}

namespace {

// The AVX2 set's row kernels of the shared attention (kernels_x86_attention.h).
struct Avx2Rows {
  // One query head per pass: 8 row accumulators and the q vector fill the 16 ymm registers.
  static constexpr int32_t kHeads = 1;

  // q . k for 8 cache rows k[0..7] at once, as 8 lanes: one accumulator per row over head_dim in
  // steps of 8 (each q vector loaded once for the 8 rows, 8 independent FMA chains, the rows'
  // misses in flight together), reduced by an hadd tree; the last head_dim % 8 products are
  // added per row in order. F32 and F16 caches take the same steps, so an F16 cache scores exactly
  // as an F32 one holding the rounded values.
  template <class C, int NQ>
  static void dot8(const float* q, int32_t head_dim, const typename C::T* const k[8], float out[][8]) {
    static_assert(NQ == 1);
    __m256 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
    int32_t d = 0;
    for (; d + 8 <= head_dim; d += 8) {
      const __m256 qv = _mm256_loadu_ps(q + d);
      for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(qv, C::load8(k[i] + d), acc[i]);
    }
    store_lane_sums8(acc, out[0]);
    for (int i = 0; i < 8; ++i) {
      for (int32_t t = d; t < head_dim; ++t) out[0][i] += q[t] * C::load1(k[i] + t);
    }
  }

  // s[i] = (q . k[i]) * kq_scale for the first nb of the 8 rows.
  template <class C, int NQ>
  static void score8(const float* q, int32_t head_dim, const typename C::T* const k[8], float kq_scale, int64_t nb,
                     float* s, int64_t /*s_stride*/) {
    float dots[1][8];
    dot8<C, NQ>(q, head_dim, k, dots);
    for (int64_t i = 0; i < nb; ++i) s[i] = dots[0][i] * kq_scale;
  }

  // o[d] += p[i] * v_rows[i][d] for the nb rows in order, 64 dimensions at a time in registers.
  template <class C, int NQ>
  static void add_weighted(const typename C::T* const* v_rows, int64_t nb, const float* p, int64_t /*p_stride*/,
                           int32_t head_dim, float* o) {
    static_assert(NQ == 1);
    constexpr int kDims = 64;
    int32_t d0 = 0;
    for (; d0 + kDims <= head_dim; d0 += kDims) {
      __m256 acc[kDims / 8];
      for (int k = 0; k < kDims / 8; ++k) acc[k] = _mm256_loadu_ps(o + d0 + 8 * k);
      for (int64_t i = 0; i < nb; ++i) {
        const __m256 pv = _mm256_set1_ps(p[i]);
        for (int k = 0; k < kDims / 8; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(pv, C::load8(v_rows[i] + d0 + 8 * k)));
      }
      for (int k = 0; k < kDims / 8; ++k) _mm256_storeu_ps(o + d0 + 8 * k, acc[k]);
    }
    for (int32_t d = d0; d < head_dim; ++d) {
      float acc = o[d];
      for (int64_t i = 0; i < nb; ++i) acc += p[i] * C::load1(v_rows[i] + d);
      o[d] = acc;
    }
  }
};

}  // namespace

void attention_head(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos, const KvRowMap& rows,
                    int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                    float* scores, float* out) {
  attention_heads_as_f32<Avx2Rows, F32Cache>(q, 1, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale, scores, out);
}

void attention_head_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos, const KvRowMap& rows,
                        int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                        float* scores, float* out) {
  attention_heads_as_f32<Avx2Rows, F16Cache>(q, 1, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale, scores, out);
}

void attention_heads(const float* q, int32_t n_q, const float* k_cache, const float* v_cache, int64_t n_pos,
                     const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                     float* scores, float* out) {
  attention_heads_as_f32<Avx2Rows, F32Cache>(q, n_q, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale, scores, out);
}

void attention_heads_f16(const float* q, int32_t n_q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos,
                         const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                         float* scores, float* out) {
  attention_heads_as_f32<Avx2Rows, F16Cache>(q, n_q, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale, scores, out);
}

void attention_heads_part(const float* q, int32_t n_q, const float* k_cache, const float* v_cache, int64_t j_begin,
                          int64_t j_end, const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim,
                          float kq_scale, float* scores, float* out, float* max_out, double* sum_out) {
  attend_positions<Avx2Rows, F32Cache>(q, n_q, k_cache, v_cache, j_begin, j_end, rows, row_stride, kv_off, head_dim, kq_scale,
                                   scores, out, max_out, sum_out);
}

void attention_heads_part_f16(const float* q, int32_t n_q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t j_begin,
                              int64_t j_end, const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim,
                              float kq_scale, float* scores, float* out, float* max_out, double* sum_out) {
  attend_positions<Avx2Rows, F16Cache>(q, n_q, k_cache, v_cache, j_begin, j_end, rows, row_stride, kv_off, head_dim, kq_scale,
                                   scores, out, max_out, sum_out);
}

// silu(a) * b with a vector exp: within a few ulp of the scalar twin's std::exp.
void silu_mul(const float* a, const float* b, int64_t n, float* dst) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 av = _mm256_loadu_ps(a + i);
    const __m256 den = _mm256_add_ps(one, exp_ps(_mm256_xor_ps(av, sign)));
    _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_div_ps(av, den), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) dst[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
}

// Exact: the compiler vectorizes these loops with AVX2.
void relu2_mul(const float* a, const float* b, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    const float r = std::max(a[i], 0.0f);
    dst[i] = r * r * b[i];
  }
}

void add(const float* a, const float* b, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

namespace {
// 8 floats to halves by F16C, rounded to nearest even as the scalar twin (fp32_to_fp16); a NaN
// becomes the twin's quiet NaN, sign | 0x7e00, where F16C would keep its payload.
__m128i to_fp16x8(__m256 v) {
  const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
  const __m128i quiet = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(static_cast<int16_t>(0x8000))), _mm_set1_epi16(0x7e00));
  return _mm_blendv_epi8(h, quiet, nan16);
}
}  // namespace

void fp32_to_fp16_row(const float* x, int64_t n, uint16_t* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), to_fp16x8(_mm256_loadu_ps(x + i)));
  }
  if (i < n) {  // the last n % 8 through a zero-padded vector
    alignas(32) float in[8] = {};
    alignas(16) uint16_t out[8];
    for (int64_t j = 0; j < n - i; ++j) in[j] = x[i + j];
    _mm_store_si128(reinterpret_cast<__m128i*>(out), to_fp16x8(_mm256_load_ps(in)));
    for (int64_t j = 0; j < n - i; ++j) dst[i + j] = out[j];
  }
}

}  // namespace bitnet::cpu::avx2
