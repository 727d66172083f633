// AVX2 set, the ops around the matmuls: rms_norm, attention, gated activations, add.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/cpu/kernels_avx2.h"

namespace bitnet::cpu::avx2 {

namespace {

double hsum_pd(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// exp(x) for x in [-87.3, 88], within 2 ulp (Cephes' expf: x = n ln2 + r, |r| <= ln2/2, a
// degree-5 polynomial for exp(r), then 2^n through the exponent bits, n in [-126, 127]).
// Inputs are clamped to that range: exp of a large argument stays finite (about 1.7e38) and
// of a very negative one a tiny normal number, where std::exp gives inf or 0.
__m256 exp_ps(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);  // ln2 in two parts
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2n));
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

// A cache element type read as floats, 8 at a time or one: F32 as stored, F16 through F16C
// (exact).
struct F32Cache {
  using T = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float load1(const float* p) { return *p; }
};
struct F16Cache {
  using T = uint16_t;
  static __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float load1(const uint16_t* p) { return _cvtsh_ss(*p); }
};

float hsum(__m256 v) {  // as kernels_avx2_float.cpp's, for dot_f32's order
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// dot_f32 over a cache row: F32 is dot_f32 itself, F16 the same FMAs in the same order on the
// converted elements (so an F16 cache scores exactly as an F32 one holding the rounded values).
template <class C>
float dot_cache(const float* a, const typename C::T* b, int64_t n) {
  if constexpr (std::is_same_v<typename C::T, float>) {
    return dot_f32(a, b, n);
  } else {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      for (int j = 0; j < 4; ++j) acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * j), C::load8(b + i + 8 * j), acc[j]);
    }
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), C::load8(b + i), acc[0]);
    float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; ++i) sum += a[i] * C::load1(b + i);
    return sum;
  }
}

// Scores with the AVX2 dot; the softmax with a vector exp and a double sum; the
// weighted sum of V adds p * v per element in the scalar order, 64 dimensions at a time kept
// in registers.
template <class C>
void attention_head_as_f32(const float* q, const typename C::T* k_cache, const typename C::T* v_cache, int64_t n_pos, const KvRowMap& rows,
                           int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale, float* scores,
                           float* out) {
  float max_score = -INFINITY;
  for (int64_t j = 0; j < n_pos; ++j) {
    scores[j] = dot_cache<C>(q, k_cache + rows.row(j) * n_embd_kv + kv_off, head_dim) * kq_scale;
    max_score = std::max(max_score, scores[j]);
  }
  // exp 8 scores at a time (exp_ps, within 2 ulp of std::exp, as llama.cpp's vector softmax),
  // summed in double.
  const __m256 max_v = _mm256_set1_ps(max_score);
  __m256d sum_v[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t j0 = 0;
  for (; j0 + 8 <= n_pos; j0 += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(scores + j0), max_v));
    _mm256_storeu_ps(scores + j0, e);
    sum_v[0] = _mm256_add_pd(sum_v[0], _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    sum_v[1] = _mm256_add_pd(sum_v[1], _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(sum_v[0], sum_v[1]));
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (int64_t j = j0; j < n_pos; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n_pos; ++j) scores[j] *= inv_sum;
  constexpr int kDims = 64;
  int32_t d0 = 0;
  for (; d0 + kDims <= head_dim; d0 += kDims) {
    __m256 acc[kDims / 8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int64_t j = 0; j < n_pos; ++j) {
      const typename C::T* v = v_cache + rows.row(j) * n_embd_kv + kv_off + d0;
      const __m256 p = _mm256_set1_ps(scores[j]);
      for (int k = 0; k < kDims / 8; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(p, C::load8(v + 8 * k)));
    }
    for (int k = 0; k < kDims / 8; ++k) _mm256_storeu_ps(out + d0 + 8 * k, acc[k]);
  }
  for (int32_t d = d0; d < head_dim; ++d) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n_pos; ++j) acc += scores[j] * C::load1(v_cache + rows.row(j) * n_embd_kv + kv_off + d);
    out[d] = acc;
  }
}

}  // namespace

void attention_head(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos, const KvRowMap& rows,
                    int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale,
                    float* scores, float* out) {
  attention_head_as_f32<F32Cache>(q, k_cache, v_cache, n_pos, rows, n_embd_kv, kv_off, head_dim, kq_scale, scores, out);
}

void attention_head_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos, const KvRowMap& rows,
                        int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale,
                        float* scores, float* out) {
  attention_head_as_f32<F16Cache>(q, k_cache, v_cache, n_pos, rows, n_embd_kv, kv_off, head_dim, kq_scale, scores, out);
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

}  // namespace bitnet::cpu::avx2
