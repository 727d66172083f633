// NEON set, the ops around the matmuls: rms_norm, attention, gated activations, add.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/cpu/kernels_neon.h"
#include "core/fp16.h"

namespace bitnet::cpu::neon {

namespace {

// exp(x) for x in [-87.3, 88], within 2 ulp (Cephes' expf: x = n ln2 + r, |r| <= ln2/2, a
// degree-5 polynomial for exp(r), then 2^n through the exponent bits, n in [-126, 127]).
// Inputs are clamped to that range: exp of a large argument stays finite (about 1.7e38) and
// of a very negative one a tiny normal number, where std::exp gives inf or 0.
float32x4_t exp_ps(float32x4_t x) {
  x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3f)), vdupq_n_f32(88.0f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));  // x - n ln2, ln2 in two parts
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
  const int32x4_t pow2n = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  return vmulq_f32(p, vreinterpretq_f32_s32(pow2n));
}

}  // namespace

// The sum of squares is in double as in the scalar twin, over 8 lanes instead of one: each
// square is exact in double, only the additions' order differs (far below float rounding).
void rms_norm_row(const float* x, const float* g, int64_t n, float eps, float* dst) {
  float64x2_t acc[4] = {vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0)};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int h = 0; h < 2; ++h) {
      const float32x4_t v = vld1q_f32(x + i + 4 * h);
      const float64x2_t lo = vcvt_f64_f32(vget_low_f32(v));
      const float64x2_t hi = vcvt_high_f64_f32(v);
      acc[2 * h] = vfmaq_f64(acc[2 * h], lo, lo);
      acc[2 * h + 1] = vfmaq_f64(acc[2 * h + 1], hi, hi);
    }
  }
  double sum = vaddvq_f64(vaddq_f64(vaddq_f64(acc[0], acc[1]), vaddq_f64(acc[2], acc[3])));
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  // (x * scale) * g as the scalar twin: bit-identical for the same scale.
  const float32x4_t sv = vdupq_n_f32(scale);
  for (i = 0; i + 4 <= n; i += 4) vst1q_f32(dst + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), sv), vld1q_f32(g + i)));
  for (; i < n; ++i) dst[i] = x[i] * scale * g[i];
}

namespace {

// A cache element type read as floats, 4 at a time or one: F32 as stored, F16 through FCVTL
// (exact).
struct F32Cache {
  using T = float;
  static float32x4_t load4(const float* p) { return vld1q_f32(p); }
  static float load1(const float* p) { return *p; }
};
struct F16Cache {
  using T = uint16_t;
  static float32x4_t load4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static float load1(const uint16_t* p) { return fp16_to_fp32(*p); }
};

// dot_f32 over a cache row: F32 is dot_f32 itself, F16 the same FMAs in the same order on the
// converted elements (so an F16 cache scores exactly as an F32 one holding the rounded values).
template <class C>
float dot_cache(const float* a, const typename C::T* b, int64_t n) {
  if constexpr (std::is_same_v<typename C::T, float>) {
    return dot_f32(a, b, n);
  } else {
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      for (int j = 0; j < 4; ++j) acc[j] = vfmaq_f32(acc[j], vld1q_f32(a + i + 4 * j), C::load4(b + i + 4 * j));
    }
    for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], vld1q_f32(a + i), C::load4(b + i));
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; ++i) sum += a[i] * C::load1(b + i);
    return sum;
  }
}

// Scores with the NEON dot; the softmax with a vector exp and a double sum; the
// weighted sum of V adds p * v per element in the scalar order (a multiply, then an add: no
// fusion), 64 dimensions at a time kept in registers.
template <class C>
void attention_head_as_f32(const float* q, const typename C::T* k_cache, const typename C::T* v_cache, int64_t n_pos, const KvRowMap& rows,
                           int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale, float* scores,
                           float* out) {
  float max_score = -INFINITY;
  for (int64_t j = 0; j < n_pos; ++j) {
    scores[j] = dot_cache<C>(q, k_cache + rows.row(j) * row_stride + kv_off, head_dim) * kq_scale;
    max_score = std::max(max_score, scores[j]);
  }
  // exp 4 scores at a time (exp_ps, within 2 ulp of std::exp, as llama.cpp's vector softmax),
  // summed in double.
  const float32x4_t max_v = vdupq_n_f32(max_score);
  float64x2_t sum_v[2] = {vdupq_n_f64(0.0), vdupq_n_f64(0.0)};
  int64_t j0 = 0;
  for (; j0 + 4 <= n_pos; j0 += 4) {
    const float32x4_t e = exp_ps(vsubq_f32(vld1q_f32(scores + j0), max_v));
    vst1q_f32(scores + j0, e);
    sum_v[0] = vaddq_f64(sum_v[0], vcvt_f64_f32(vget_low_f32(e)));
    sum_v[1] = vaddq_f64(sum_v[1], vcvt_high_f64_f32(e));
  }
  double sum = vaddvq_f64(vaddq_f64(sum_v[0], sum_v[1]));
  for (int64_t j = j0; j < n_pos; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n_pos; ++j) scores[j] *= inv_sum;
  constexpr int kDims = 64;
  int32_t d0 = 0;
  for (; d0 + kDims <= head_dim; d0 += kDims) {
    float32x4_t acc[kDims / 4];
    for (auto& a : acc) a = vdupq_n_f32(0.0f);
    for (int64_t j = 0; j < n_pos; ++j) {
      const typename C::T* v = v_cache + rows.row(j) * row_stride + kv_off + d0;
      const float32x4_t p = vdupq_n_f32(scores[j]);
      for (int k = 0; k < kDims / 4; ++k) acc[k] = vaddq_f32(acc[k], vmulq_f32(p, C::load4(v + 4 * k)));
    }
    for (int k = 0; k < kDims / 4; ++k) vst1q_f32(out + d0 + 4 * k, acc[k]);
  }
  for (int32_t d = d0; d < head_dim; ++d) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n_pos; ++j) acc += scores[j] * C::load1(v_cache + rows.row(j) * row_stride + kv_off + d);
    out[d] = acc;
  }
}

}  // namespace

void attention_head(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos, const KvRowMap& rows,
                    int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                    float* scores, float* out) {
  attention_head_as_f32<F32Cache>(q, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale, scores, out);
}

void attention_head_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos, const KvRowMap& rows,
                        int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                        float* scores, float* out) {
  attention_head_as_f32<F16Cache>(q, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale, scores, out);
}

// silu(a) * b with a vector exp: within a few ulp of the scalar twin's std::exp.
void silu_mul(const float* a, const float* b, int64_t n, float* dst) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t av = vld1q_f32(a + i);
    const float32x4_t den = vaddq_f32(one, exp_ps(vnegq_f32(av)));
    vst1q_f32(dst + i, vmulq_f32(vdivq_f32(av, den), vld1q_f32(b + i)));
  }
  for (; i < n; ++i) dst[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
}

// Exact: the same operations as the scalar twin, in the same order (FMAX keeps a NaN as
// std::max(a, 0) does).
void relu2_mul(const float* a, const float* b, int64_t n, float* dst) {
  const float32x4_t zero = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const float32x4_t r = vmaxq_f32(vld1q_f32(a + i), zero);
    vst1q_f32(dst + i, vmulq_f32(vmulq_f32(r, r), vld1q_f32(b + i)));
  }
  for (; i < n; ++i) {
    const float r = std::max(a[i], 0.0f);
    dst[i] = r * r * b[i];
  }
}

void add(const float* a, const float* b, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, vaddq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
  for (; i < n; ++i) dst[i] = a[i] + b[i];
}

// 4 floats to halves by FCVTN in the default rounding (to nearest even), as the scalar twin
// (fp32_to_fp16); a NaN becomes the twin's quiet NaN, sign | 0x7e00, where FCVTN would keep
// its payload.
static uint16x4_t to_fp16x4(float32x4_t v) {
  const uint16x4_t h = vreinterpret_u16_f16(vcvt_f16_f32(v));
  const uint16x4_t nan = vmovn_u32(vmvnq_u32(vceqq_f32(v, v)));
  const uint16x4_t quiet = vorr_u16(vand_u16(h, vdup_n_u16(0x8000)), vdup_n_u16(0x7e00));
  return vbsl_u16(nan, quiet, h);
}

void fp32_to_fp16_row(const float* x, int64_t n, uint16_t* dst) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1_u16(dst + i, to_fp16x4(vld1q_f32(x + i)));
  if (i < n) {  // the last n % 4 through a zero-padded vector
    float in[4] = {};
    uint16_t out[4];
    for (int64_t j = 0; j < n - i; ++j) in[j] = x[i + j];
    vst1_u16(out, to_fp16x4(vld1q_f32(in)));
    for (int64_t j = 0; j < n - i; ++j) dst[i + j] = out[j];
  }
}

}  // namespace bitnet::cpu::neon
