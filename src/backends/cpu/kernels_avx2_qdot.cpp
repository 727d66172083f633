// AVX2 set, quantized-activation row dots (KernelSet::quant_dot): the llama.cpp weight types
// against 8-bit activation blocks (quant::vec_dot_type), the block sums in integers exactly as
// the scalar twins (quant::vec_dot_fn) compute them, the float accumulation in another order.
// Types without a dot here get the twin.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/kernels_avx2.h"

namespace bitnet::cpu::avx2 {

namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// One Q6_K row (quant/q6_k.h: ql[128] low nibbles, qh[64] high bit pairs, int8 scales[16], fp16
// d) against Q8_K activations (quant/q8_k.h), in integers as ggml_vec_dot_q6_K_q8_K: per 32
// elements the codes q in [0, 63] meet the int8 activations in vpmaddubsw (two products of at
// most 63 * 127 per int16: no saturation), vpmaddwd applies the sub-block scales, and the
// "- 32" of every code is taken once per block from the activations' 16-element sums.
float dot_q6_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  // Shuffles that spread scale bytes 2p and 2p+1 over 8 bytes each (sub-blocks 2p, 2p+1 are
  // the 32 elements of pair p = 4h + k).
  static const __m128i kPairMask[8] = {
      _mm_set_epi8(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
      _mm_set_epi8(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2),
      _mm_set_epi8(5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 4),
      _mm_set_epi8(7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 6),
      _mm_set_epi8(9, 9, 9, 9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8, 8),
      _mm_set_epi8(11, 11, 11, 11, 11, 11, 11, 11, 10, 10, 10, 10, 10, 10, 10, 10),
      _mm_set_epi8(13, 13, 13, 13, 13, 13, 13, 13, 12, 12, 12, 12, 12, 12, 12, 12),
      _mm_set_epi8(15, 15, 15, 15, 15, 15, 15, 15, 14, 14, 14, 14, 14, 14, 14, 14)};
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i low2 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 210;
    const uint8_t* act = a + b * 292;
    float a_d;
    std::memcpy(&a_d, act, 4);
    const float d = _cvtsh_ss(load_u16(blk + 208)) * a_d;  // as ggml: fp16 d times the Q8_K d
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + 260));
    // 32 * sum_j scale_j * bsum_j, in 8 int32 lanes.
    __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(),
                                    _mm256_slli_epi32(_mm256_madd_epi16(bsums, _mm256_cvtepi8_epi16(sc8)), 5));
    const int8_t* q8 = reinterpret_cast<const int8_t*>(act + 4);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i ql[2] = {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h)),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32))};
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        // Elements 128h + 32k + l: a nibble of ql[k % 2] (low for k < 2) below bits 2k, 2k+1 of qh.
        const __m256i nibble = _mm256_and_si256(k < 2 ? ql[k % 2] : _mm256_srli_epi16(ql[k % 2], 4), low4);
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), low2);
        const __m256i q = _mm256_or_si256(nibble, _mm256_slli_epi16(high, 4));
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 128 * h + 32 * k));
        const __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, kPairMask[4 * h + k]));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), scale));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc);
}

}  // namespace

QuantDotFn quant_dot(GgmlType type) {
  switch (type) {
    case GgmlType::kQ6_K: return dot_q6_K_q8_K;
    default: return quant::vec_dot_fn(type);
  }
}

}  // namespace bitnet::cpu::avx2
