// q6_K_blocks_to_lanes with AVX-512 (F, BW): built with those flags only and called only where
// the CPU has them (q6_K_lanes.cpp). The load-time copy of a Q6_K head into lane order spent
// 12% of a one-token run in the scalar conversion (docs/performance.md).
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/q6_K_lanes.h"
#include "quant/q6_k.h"

namespace bitnet::cpu {
namespace {

constexpr int64_t kBlockBytes = quant::kQ6_KBlockBytes;

// Bits s, s+1 of every byte of v as the byte's value, s per 16-bit lane from `shift` (16-bit
// shifts pull the next byte's bits into the top of each byte; the mask drops them).
__m512i pairs(__m512i v, __m512i shift) { return _mm512_and_si512(_mm512_srlv_epi16(v, shift), _mm512_set1_epi8(3)); }

}  // namespace

// The 64 codes of elements 64v ... 64v + 63 (v < 4) come straight from ggml's bytes: the low
// (v even) or high (v odd) nibbles of ql[64 (v / 2) ...], and bits 4 (v % 2), +1 (the first 32
// elements) or 4 (v % 2) + 2, +3 (the second 32) of qh[32 (v / 2) ...]. Position 64j + 4p + k of the
// lane order is element 16p + 4j + k, i.e. dword j of 128-bit lane p' = p % 4 of element vector
// v = p / 4: a 4 x 4 dword transpose across the four vectors (unpacks) and one within each
// result (vpermd) give the four position vectors; the fourth's bit pairs then go into bits 6-7
// of the other three (q6_K_lanes.h).
void q6_K_blocks_to_lanes_avx512(const uint8_t* src, uint8_t* dst, int64_t n_blocks) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  // dword 4c + p' of a position vector is dword 4p' + c of the transposed element vectors
  const __m512i to_positions = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  // 16-bit shift counts: the low 256 bits (elements 0-31 of a vector) by s, the high by s + 2
  const auto counts = [](long long lo, long long hi) { return _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo); };
  const __m512i lo_shift = counts(0, 0x0002000200020002LL);
  const __m512i hi_shift = counts(0x0004000400040004LL, 0x0006000600060006LL);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* s = src + b * kBlockBytes;
    uint8_t* d = dst + b * kBlockBytes;
    __m512i e[4];
    for (int n = 0; n < 2; ++n) {
      const __m512i ql = _mm512_loadu_si512(s + 64 * n);
      const __m256i qh256 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 128 + 32 * n));
      const __m512i qh = _mm512_broadcast_i64x4(qh256);  // both halves
      e[2 * n] = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_slli_epi16(pairs(qh, lo_shift), 4));
      e[2 * n + 1] =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), _mm512_slli_epi16(pairs(qh, hi_shift), 4));
    }
    const __m512i t0 = _mm512_unpacklo_epi32(e[0], e[1]), t1 = _mm512_unpackhi_epi32(e[0], e[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(e[2], e[3]), t3 = _mm512_unpackhi_epi32(e[2], e[3]);
    const __m512i f[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                          _mm512_unpackhi_epi64(t1, t3)};
    const __m512i fourth = _mm512_permutexvar_epi32(to_positions, f[3]);
    // plane j: positions 64j ..., with bit pair j of the fourth vector's codes in bits 6-7
    const auto plane = [&](__m512i codes, __m512i pair_j) {
      const __m512i pair = _mm512_and_si512(pair_j, _mm512_set1_epi8(3));
      return _mm512_or_si512(_mm512_permutexvar_epi32(to_positions, codes), _mm512_slli_epi16(pair, 6));
    };
    _mm512_storeu_si512(d, plane(f[0], fourth));
    _mm512_storeu_si512(d + 64, plane(f[1], _mm512_srli_epi16(fourth, 2)));
    _mm512_storeu_si512(d + 128, plane(f[2], _mm512_srli_epi16(fourth, 4)));
    std::memcpy(d + 192, s + 192, kBlockBytes - 192);  // scales, d
  }
}

}  // namespace bitnet::cpu
