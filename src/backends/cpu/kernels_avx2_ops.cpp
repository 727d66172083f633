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

// The AVX2 set's row kernels of the shared attention (kernels_x86_attention.h), for one or two
// query heads per pass: two heads share each converted K and V element, halving the F16
// conversions (one per FMA for a head alone). Each (head, row) dot is one 8-lane accumulator
// over head_dim reduced by the same hadd tree (store_lane_sums8 sums each vector on its own),
// and each output element the same multiply and add, whatever heads share the pass.
struct Avx2Rows {
  // Query heads per pass: 2 heads x 4 rows are 8 accumulators (one head takes 8 rows), next to
  // the converted elements in the 16 ymm registers.
  static constexpr int32_t kHeads = 2;

  // q . k of NQ heads for R = 8 / NQ cache rows kr[0..R-1] as 8 sums (lane h * R + r): one
  // accumulator per head and row over head_dim in steps of 8 (each K vector converted once for
  // the NQ heads, 8 independent FMA chains), reduced by an hadd tree; the last head_dim % 8
  // products are added per head and row in order. F32 and F16 caches take the same steps, so an
  // F16 cache scores exactly as an F32 one holding the rounded values.
  template <class C, int NQ>
  static void dot8(const float* q, int32_t head_dim, const typename C::T* const* kr, float out[8]) {
    static_assert(NQ == 1 || NQ == 2);
    constexpr int R = 8 / NQ;
    __m256 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
    int32_t d = 0;
    for (; d + 8 <= head_dim; d += 8) {
      __m256 kv[R];
      for (int r = 0; r < R; ++r) kv[r] = C::load8(kr[r] + d);
      for (int h = 0; h < NQ; ++h) {
        const __m256 qv = _mm256_loadu_ps(q + int64_t{h} * head_dim + d);
        for (int r = 0; r < R; ++r) acc[h * R + r] = _mm256_fmadd_ps(qv, kv[r], acc[h * R + r]);
      }
    }
    store_lane_sums8(acc, out);
    for (int h = 0; h < NQ; ++h) {
      for (int r = 0; r < R; ++r) {
        for (int32_t t = d; t < head_dim; ++t) out[h * R + r] += q[int64_t{h} * head_dim + t] * C::load1(kr[r] + t);
      }
    }
  }

  // s[h * s_stride + i] = (q_h . k[i]) * kq_scale for the first nb of the 8 rows: one pass of 8
  // rows for one head, two of 4 for two (the second skipped when nb <= 4).
  template <class C, int NQ>
  static void score8(const float* q, int32_t head_dim, const typename C::T* const k[8], float kq_scale, int64_t nb,
                     float* s, int64_t s_stride) {
    constexpr int R = 8 / NQ;
    for (int r0 = 0; r0 < nb; r0 += R) {
      float dots[8];
      dot8<C, NQ>(q, head_dim, k + r0, dots);
      for (int h = 0; h < NQ; ++h) {
        for (int64_t i = 0; i < R && r0 + i < nb; ++i) s[h * s_stride + r0 + i] = dots[h * R + i] * kq_scale;
      }
    }
  }

  // o[d] += p[i] * v_rows[i][d] for the nb rows in order, for NQ heads (p: NQ rows p_stride
  // apart, o: NQ rows head_dim apart): 64 dimensions of one head, or 32 of two, at a time in
  // registers (each element converted once for both), the multiply and the add kept apart; the
  // last dimensions one at a time, with the same two steps.
  template <class C, int NQ>
  static void add_weighted(const typename C::T* const* v_rows, int64_t nb, const float* p, int64_t p_stride,
                           int32_t head_dim, float* o) {
    static_assert(NQ == 1 || NQ == 2);
    constexpr int kVecs = 8 / NQ;
    int32_t d0 = 0;
    for (; d0 + 8 * kVecs <= head_dim; d0 += 8 * kVecs) {
      __m256 acc[NQ][kVecs];
      for (int h = 0; h < NQ; ++h) {
        for (int k = 0; k < kVecs; ++k) acc[h][k] = _mm256_loadu_ps(o + int64_t{h} * head_dim + d0 + 8 * k);
      }
      for (int64_t i = 0; i < nb; ++i) {
        __m256 vv[kVecs];
        for (int k = 0; k < kVecs; ++k) vv[k] = C::load8(v_rows[i] + d0 + 8 * k);
        for (int h = 0; h < NQ; ++h) {
          const __m256 pv = _mm256_set1_ps(p[h * p_stride + i]);
          for (int k = 0; k < kVecs; ++k) acc[h][k] = _mm256_add_ps(acc[h][k], _mm256_mul_ps(pv, vv[k]));
        }
      }
      for (int h = 0; h < NQ; ++h) {
        for (int k = 0; k < kVecs; ++k) _mm256_storeu_ps(o + int64_t{h} * head_dim + d0 + 8 * k, acc[h][k]);
      }
    }
    for (int h = 0; h < NQ; ++h) {
      for (int32_t d = d0; d < head_dim; ++d) {
        float acc = o[int64_t{h} * head_dim + d];
        for (int64_t i = 0; i < nb; ++i) acc += p[h * p_stride + i] * C::load1(v_rows[i] + d);
        o[int64_t{h} * head_dim + d] = acc;
      }
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
