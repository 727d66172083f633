// AVX-512 VNNI set, quantized-activation row dots (KernelSet::quant_dot): Q6_K on 512-bit
// vpdpbusd; every other type is the AVX2 set's (kernels_avx2_qdot.cpp).
//
// Q6_K against Q8_K (quant/q6_k.h, quant/q8_k.h), per 256-element block: a 512-bit vector holds
// 64 codes q in [0, 63] (elements 128h + 64p .. +63): the low (p = 0) or high (p = 1) nibbles of
// the 64 ql bytes of half h, below bit pairs 4p and 4p + 2 of the 32 qh bytes (one pair per
// 256-bit half, shifted by vpsrlvw). vpdpbusd multiplies them with the int8 activations and
// adds 4 products per int32 lane, so lane i holds 4 elements of sub-block i / 4; vpmulld by the
// sub-block scales (each repeated over its 4 lanes) and the block's "- 32" (taken once from the
// Q8_K 16-element sums, as the AVX2 dot does) give the same integer block sum as the twin.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 headers (bug 105593)
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>

#include "backends/cpu/kernels_avx2.h"

namespace bitnet::cpu::avx512vnni {

namespace {

float dot_q6_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  // Bytes of the 16 scales for sub-blocks 4v .. 4v+3, each 4 times (one per int32 lane).
  static const __m128i kScaleSpread[4] = {
      _mm_set_epi8(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
      _mm_set_epi8(7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4),
      _mm_set_epi8(11, 11, 11, 11, 10, 10, 10, 10, 9, 9, 9, 9, 8, 8, 8, 8),
      _mm_set_epi8(15, 15, 15, 15, 14, 14, 14, 14, 13, 13, 13, 13, 12, 12, 12, 12)};
  // vpsrlvw counts: bit pair 2k of qh for the 256-bit half holding k (k = 2p, 2p + 1).
  const __m512i shift_p0 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  const __m512i shift_p1 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i low2 = _mm512_set1_epi8(3);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 210;
    const uint8_t* act = a + b * 292;
    float a_d;
    std::memcpy(&a_d, act, 4);
    uint16_t d16;
    std::memcpy(&d16, blk + 208, 2);
    const float d = _cvtsh_ss(d16) * a_d;  // as ggml: fp16 d times the Q8_K d
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act + 260));
    // -32 * sum_j scale_j * bsum_j, in 8 int32 lanes.
    __m512i isum = _mm512_zextsi256_si512(_mm256_sub_epi32(
        _mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(bsums, _mm256_cvtepi8_epi16(sc8)), 5)));
    const int8_t* q8 = reinterpret_cast<const int8_t*>(act + 4);
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h)));
      for (int p = 0; p < 2; ++p) {
        const __m512i nibble = _mm512_and_si512(p == 0 ? ql : _mm512_srli_epi16(ql, 4), low4);
        const __m512i high = _mm512_and_si512(_mm512_srlv_epi16(qh, p == 0 ? shift_p0 : shift_p1), low2);
        const __m512i q = _mm512_or_si512(nibble, _mm512_slli_epi16(high, 4));
        const __m512i x = _mm512_loadu_si512(q8 + 128 * h + 64 * p);
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, x);
        const __m512i scale = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(sc8, kScaleSpread[2 * h + p]));
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dot, scale));
      }
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(isum), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

}  // namespace

QuantDotFn quant_dot(GgmlType type) {
  switch (type) {
    case GgmlType::kQ6_K: return dot_q6_K_q8_K;
    default: return avx2::quant_dot(type);
  }
}

QuantTileFn quant_tile(GgmlType type) {
  switch (type) {
    case GgmlType::kQ6_K: return nullptr;
    default: return avx2::quant_tile(type);
  }
}

}  // namespace bitnet::cpu::avx512vnni
