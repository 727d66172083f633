// The x86 attention that the AVX2 and AVX-512 VNNI sets share (kernels_avx2_ops.cpp,
// kernels_avx512vnni_ops.cpp): exp_ps, the cache element loaders, the softmax, the 8-row sum
// (store_lane_sums8) and the driver over one kv head's query heads (attend_positions).
// Each set brings its own two row kernels (Rows::score8, the scaled q . k of 8 cache rows;
// Rows::add_weighted, o += p * v in position order), for up to Rows::kHeads query heads at once:
// 8 lanes wide and two heads in the AVX2 set (16 ymm registers), 16 lanes and 4 heads in the
// AVX-512 one.
//
// Internal linkage (anonymous namespace), as kernels_x86_qdot_common.h: each including file
// compiles its own copy with its own flags (CMakeLists.txt). Include it after <immintrin.h>.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "backends/cpu/kernel_set.h"

namespace bitnet::cpu {

namespace {

// exp(x) for x in [-87.3, 88], within 2 ulp (Cephes' expf: x = n ln2 + r, |r| <= ln2/2, a
// degree-5 polynomial for exp(r), then 2^n through the exponent bits, n in [-126, 127]).
// Inputs are clamped to that range: exp of a large argument stays finite (about 1.7e38) and
// of a very negative one a tiny normal number, where std::exp gives inf or 0.
inline __m256 exp_ps(__m256 x) {
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

// A cache element type read as floats, 8 or 16 at a time or one: F32 as stored, F16 through
// F16C (exact). load16_masked reads only the lanes in m (0 elsewhere): a row's last elements
// without reading past them.
struct F32Cache {
  using T = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float load1(const float* p) { return *p; }
#ifdef __AVX512F__
  static __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load16_masked(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
#endif
};
struct F16Cache {
  using T = uint16_t;
  static __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float load1(const uint16_t* p) { return _cvtsh_ss(*p); }
#ifdef __AVX512F__
  static __m512 load16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load16_masked(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
#endif
};

#ifdef __AVX512F__
// exp_ps 16 lanes wide: the same steps lane by lane, so each lane's value is exp_ps's.
inline __m512 exp_ps(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i pow2n = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(pow2n));
}

// The lanes of the first n elements of 16 (all of them for n >= 16): a row's or a run's last
// elements, read and written without going past them.
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// One head's scores [n_pos] into exp(s - max) in place, 16 at a time, the last n_pos % 16 with
// masked loads and stores (exp_ps, within 2 ulp of std::exp, as llama.cpp's vector softmax);
// returns their sum, in double.
double exp_scores(float* scores, int64_t n_pos, float m) {
  const __m512 max_v = _mm512_set1_ps(m);
  __m512d sum_v[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};
  for (int64_t j0 = 0; j0 < n_pos; j0 += 16) {
    const __mmask16 k = first_lanes(n_pos - j0);
    const __m512 e = _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, scores + j0), max_v)));
    _mm512_mask_storeu_ps(scores + j0, k, e);
    sum_v[0] = _mm512_add_pd(sum_v[0], _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    sum_v[1] = _mm512_add_pd(sum_v[1], _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(sum_v[0], sum_v[1]));
}

// The largest of n_pos scores (-inf for none), 16 at a time: the order of a float maximum does
// not change it. A NaN score is passed over, as a running `s > m ? s : m` does.
float max_score(const float* scores, int64_t n_pos) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  for (int64_t j0 = 0; j0 < n_pos; j0 += 16) {
    const __mmask16 k = first_lanes(n_pos - j0);
    m = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, scores + j0), m);
  }
  return _mm512_reduce_max_ps(m);
}
#else
// One head's scores [n_pos] into exp(s - max) in place, 8 at a time (exp_ps, within 2 ulp of
// std::exp, as llama.cpp's vector softmax); returns their sum, in double.
double exp_scores(float* scores, int64_t n_pos, float m) {
  const __m256 max_v = _mm256_set1_ps(m);
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
    scores[j] = std::exp(scores[j] - m);
    sum += scores[j];
  }
  return sum;
}

// The largest of n_pos scores (-inf for none), 8 at a time: the order of a float maximum does
// not change it. A NaN score is passed over, as a running `s > m ? s : m` does.
float max_score(const float* scores, int64_t n_pos) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  int64_t j0 = 0;
  for (; j0 + 8 <= n_pos; j0 += 8) m = _mm256_max_ps(_mm256_loadu_ps(scores + j0), m);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float best = -INFINITY;
  for (float v : lanes) best = v > best ? v : best;
  for (; j0 < n_pos; ++j0) best = scores[j0] > best ? scores[j0] : best;
  return best;
}
#endif

// One head's scores [n_pos] into probabilities in place: exp_scores, times 1 / sum.
void softmax_scores(float* scores, int64_t n_pos, float m) {
  const float inv_sum = static_cast<float>(1.0 / exp_scores(scores, n_pos, m));
  for (int64_t j = 0; j < n_pos; ++j) scores[j] *= inv_sum;
}

// The 8 lanes of each of v[0..7] summed, by an hadd tree: out[i] = v[i]'s sum. The row
// kernels' last step for 8 cache rows' dot products.
inline void store_lane_sums8(const __m256 v[8], float out[8]) {
  const __m256 s01 = _mm256_hadd_ps(v[0], v[1]), s23 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 s45 = _mm256_hadd_ps(v[4], v[5]), s67 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 lo = _mm256_hadd_ps(s01, s23), hi = _mm256_hadd_ps(s45, s67);
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31)));
}

// Positions per block of the weighted sum of V: their rows of the kv head (16 KB of F16 at
// head_dim 128) stay in L1 while every query head of the group adds them in.
constexpr int64_t kPosBlock = 64;

// How far ahead of the 8 rows being scored their K rows are prefetched (and V rows a block
// ahead), where KvRowMap::prefetch asks for it: a paged cache's blocks need not follow one
// another, and a decode step's cache comes from memory. One decode token over a layer of
// 2B-4T's F16 cache at 4096 positions on 2 Zen 5 threads: 21-23 GB/s without, 32-38 with
// (bench_cpu_kernels attention_streamed_f16). A prompt's tokens find the rows in cache, where
// the prefetch instructions (one per 64 bytes) cost a fifth of the kernel's time
// (attention_heads_f16 .../prompt): 2B-4T's pp512 @ d4096 117 -> 135 tok/s without.
constexpr int64_t kPrefetchRows = 32;

template <class T>
[[gnu::always_inline]] inline void prefetch_row(const T* p, int32_t n) {
  const char* b = reinterpret_cast<const char*>(p);
  for (int64_t o = 0; o < int64_t{n} * static_cast<int64_t>(sizeof(T)); o += 64) _mm_prefetch(b + o, _MM_HINT_T0);
}

// Calls f.template operator()<N>() for n in [1, Max], N = n: the row kernels' head count is a
// template parameter (their accumulators are arrays sized by it).
template <int Max, class F>
[[gnu::always_inline]] inline void with_heads(int32_t n, F&& f) {
  if constexpr (Max > 1) {
    if (n < Max) return with_heads<Max - 1>(n, f);
  }
  f.template operator()<Max>();
}

// Attention of n_q query heads (q: n_q rows of head_dim) that share one kv head, over cached
// positions [j_begin, j_end): the scores 8 positions at a time (Rows::score8), each head's
// maximum (max_score), exp_scores, the weighted sum of V adding p * v per element in position
// order (Rows::add_weighted) per block of kPosBlock positions, each head's partial sums stored
// and reloaded between blocks (which leaves every value as it was). The row kernels take up to Rows::kHeads heads per pass, each
// cache element loaded (and converted from F16) once for them; each head's products and sums
// are the same steps whatever heads share its pass, so each head's output equals the group of
// one's, bit for bit. Each K and V row is read from memory once for the group.
// max_out null: p is the softmax (the whole attention); else p = exp(s - m) as it is, and
// max_out / sum_out get each head's m and sum of p (a part of a split attention).
template <class Rows, class C>
void attend_positions(const float* q, int32_t n_q, const typename C::T* k_cache, const typename C::T* v_cache,
                      int64_t j_begin, int64_t j_end, const KvRowMap& rows, int64_t row_stride, int64_t kv_off,
                      int32_t head_dim, float kq_scale, float* scores, float* out, float* max_out, double* sum_out) {
  const int64_t n = j_end - j_begin;
  const auto row = [&](const typename C::T* cache, int64_t j) { return cache + rows.row(j_begin + j) * row_stride + kv_off; };
  for (int64_t j0 = 0; j0 < n; j0 += 8) {
    // 8 rows at a time; past the last position the last row again (its lanes are not kept), so
    // every score takes the same steps whatever n is.
    const typename C::T* k[8];
    for (int i = 0; i < 8; ++i) k[i] = row(k_cache, j0 + i < n ? j0 + i : n - 1);
    if (rows.prefetch && j0 + kPrefetchRows + 8 <= n) {
      for (int i = 0; i < 8; ++i) prefetch_row(row(k_cache, j0 + kPrefetchRows + i), head_dim);
    }
    const int64_t nb = n - j0 < 8 ? n - j0 : 8;
    for (int32_t h0 = 0; h0 < n_q; h0 += Rows::kHeads) {
      with_heads<Rows::kHeads>(n_q - h0, [&]<int NQ>() {
        Rows::template score8<C, NQ>(q + int64_t{h0} * head_dim, head_dim, k, kq_scale, nb, scores + h0 * n + j0, n);
      });
    }
  }
  for (int32_t h = 0; h < n_q; ++h) {
    const float m = max_score(scores + h * n, n);
    if (max_out == nullptr) {
      softmax_scores(scores + h * n, n, m);
    } else {
      max_out[h] = m;
      sum_out[h] = exp_scores(scores + h * n, n, m);
    }
  }
  for (int64_t i = 0; i < int64_t{n_q} * head_dim; ++i) out[i] = 0.0f;
  const typename C::T* v_rows[kPosBlock];
  for (int64_t j0 = 0; j0 < n; j0 += kPosBlock) {
    const int64_t nb = n - j0 < kPosBlock ? n - j0 : kPosBlock;
    for (int64_t i = 0; i < nb; ++i) v_rows[i] = row(v_cache, j0 + i);
    // The next block's rows, while this one is summed.
    if (rows.prefetch) {
      for (int64_t i = j0 + kPosBlock; i < n && i < j0 + 2 * kPosBlock; ++i) prefetch_row(row(v_cache, i), head_dim);
    }
    for (int32_t h0 = 0; h0 < n_q; h0 += Rows::kHeads) {
      with_heads<Rows::kHeads>(n_q - h0, [&]<int NQ>() {
        Rows::template add_weighted<C, NQ>(v_rows, nb, scores + h0 * n + j0, n, head_dim, out + int64_t{h0} * head_dim);
      });
    }
  }
}

// The whole attention of the n_q heads over positions [0, n_pos).
template <class Rows, class C>
void attention_heads_as_f32(const float* q, int32_t n_q, const typename C::T* k_cache, const typename C::T* v_cache,
                            int64_t n_pos, const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim,
                            float kq_scale, float* scores, float* out) {
  attend_positions<Rows, C>(q, n_q, k_cache, v_cache, 0, n_pos, rows, row_stride, kv_off, head_dim, kq_scale, scores, out,
                            nullptr, nullptr);
}

}  // namespace

}  // namespace bitnet::cpu
