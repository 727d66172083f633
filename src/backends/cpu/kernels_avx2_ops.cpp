// AVX2 set, the ops around the matmuls: rms_norm, attention, gated activations, add.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

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

// q . k for 8 cache rows k[0..7] at once, as 8 lanes: one accumulator per row over head_dim in
// steps of 8 (each q vector loaded once for the 8 rows, 8 independent FMA chains, the rows'
// misses in flight together), reduced by an hadd tree; the last head_dim % 8 products are
// added per row in order. F32 and F16 caches take the same steps, so an F16 cache scores exactly
// as an F32 one holding the rounded values.
template <class C>
void dot8_rows(const float* q, const typename C::T* const k[8], int32_t head_dim, float out[8]) {
  __m256 acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
  int32_t d = 0;
  for (; d + 8 <= head_dim; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(qv, C::load8(k[i] + d), acc[i]);
  }
  const __m256 s01 = _mm256_hadd_ps(acc[0], acc[1]), s23 = _mm256_hadd_ps(acc[2], acc[3]);
  const __m256 s45 = _mm256_hadd_ps(acc[4], acc[5]), s67 = _mm256_hadd_ps(acc[6], acc[7]);
  const __m256 lo = _mm256_hadd_ps(s01, s23), hi = _mm256_hadd_ps(s45, s67);
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31)));
  for (int i = 0; i < 8; ++i) {
    for (int32_t t = d; t < head_dim; ++t) out[i] += q[t] * C::load1(k[i] + t);
  }
}

// One head's scores [n_pos] into probabilities in place: exp(s - max) 8 at a time (exp_ps,
// within 2 ulp of std::exp, as llama.cpp's vector softmax), summed in double, times 1 / sum.
void softmax_scores(float* scores, int64_t n_pos, float max_score) {
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
}

// Positions per block of the weighted sum of V: their rows of the kv head (16 KB of F16 at
// head_dim 128) stay in L1 while every query head of the group adds them in.
constexpr int64_t kPosBlock = 64;

// o[d] += p[i] * v_rows[i][d] for the nb rows in order, 64 dimensions at a time in registers.
template <class C>
void add_weighted_rows(const typename C::T* const* v_rows, int64_t nb, const float* p, int32_t head_dim, float* o) {
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

// Attention of n_q query heads (q: n_q rows of head_dim) that share one kv head: the scores 8
// positions at a time (dot8_rows), the softmax above, the weighted sum of V adding p * v per
// element in position order (add_weighted_rows) per block of kPosBlock positions, each head's
// partial sums stored and reloaded between blocks (which leaves every value as it was). Each K
// and V row is read from memory once for the group instead of once per head (the other heads
// find it in L1), and each head's output equals the group of one's, bit for bit. (Converting a
// group's F16 rows to floats once for its heads measured slower than converting per head.)
template <class C>
void attention_heads_as_f32(const float* q, int32_t n_q, const typename C::T* k_cache, const typename C::T* v_cache,
                            int64_t n_pos, const KvRowMap& rows, int64_t n_embd_kv, int64_t kv_off, int32_t head_dim,
                            float kq_scale, float* scores, float* out) {
  float max_score[kMaxGroupHeads];
  for (int32_t h = 0; h < n_q; ++h) max_score[h] = -INFINITY;
  for (int64_t j0 = 0; j0 < n_pos; j0 += 8) {
    // 8 rows at a time; past the last position the last row again (its lanes are not kept), so
    // every score takes the same steps whatever n_pos is.
    const typename C::T* k[8];
    for (int i = 0; i < 8; ++i) k[i] = k_cache + rows.row(j0 + i < n_pos ? j0 + i : n_pos - 1) * n_embd_kv + kv_off;
    const int64_t nb = n_pos - j0 < 8 ? n_pos - j0 : 8;
    for (int32_t h = 0; h < n_q; ++h) {
      float dots[8];
      dot8_rows<C>(q + int64_t{h} * head_dim, k, head_dim, dots);
      for (int64_t i = 0; i < nb; ++i) {
        const float s = dots[i] * kq_scale;
        scores[h * n_pos + j0 + i] = s;
        max_score[h] = s > max_score[h] ? s : max_score[h];  // as std::max (no std template in an ISA file)
      }
    }
  }
  for (int32_t h = 0; h < n_q; ++h) softmax_scores(scores + h * n_pos, n_pos, max_score[h]);
  for (int64_t i = 0; i < int64_t{n_q} * head_dim; ++i) out[i] = 0.0f;
  const typename C::T* v_rows[kPosBlock];
  for (int64_t j0 = 0; j0 < n_pos; j0 += kPosBlock) {
    const int64_t nb = n_pos - j0 < kPosBlock ? n_pos - j0 : kPosBlock;
    for (int64_t i = 0; i < nb; ++i) v_rows[i] = v_cache + rows.row(j0 + i) * n_embd_kv + kv_off;
    for (int32_t h = 0; h < n_q; ++h) {
      add_weighted_rows<C>(v_rows, nb, scores + h * n_pos + j0, head_dim, out + int64_t{h} * head_dim);
    }
  }
}

}  // namespace

void attention_head(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos, const KvRowMap& rows,
                    int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale,
                    float* scores, float* out) {
  attention_heads_as_f32<F32Cache>(q, 1, k_cache, v_cache, n_pos, rows, n_embd_kv, kv_off, head_dim, kq_scale, scores, out);
}

void attention_head_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos, const KvRowMap& rows,
                        int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale,
                        float* scores, float* out) {
  attention_heads_as_f32<F16Cache>(q, 1, k_cache, v_cache, n_pos, rows, n_embd_kv, kv_off, head_dim, kq_scale, scores, out);
}

void attention_heads(const float* q, int32_t n_q, const float* k_cache, const float* v_cache, int64_t n_pos,
                     const KvRowMap& rows, int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale,
                     float* scores, float* out) {
  attention_heads_as_f32<F32Cache>(q, n_q, k_cache, v_cache, n_pos, rows, n_embd_kv, kv_off, head_dim, kq_scale, scores, out);
}

void attention_heads_f16(const float* q, int32_t n_q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos,
                         const KvRowMap& rows, int64_t n_embd_kv, int64_t kv_off, int32_t head_dim, float kq_scale,
                         float* scores, float* out) {
  attention_heads_as_f32<F16Cache>(q, n_q, k_cache, v_cache, n_pos, rows, n_embd_kv, kv_off, head_dim, kq_scale, scores, out);
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
