// Horizontal sums shared by the AVX-512 VNNI set's ternary and quantized kernels. Include after
// <immintrin.h> (the sets' sources wrap it in a GCC 12 warning guard).
#pragma once

namespace bitnet::cpu::avx512vnni {

// The 16 int32 lanes of each of v[0..7] summed: lane i of the result is v[i]'s sum.
[[gnu::always_inline]] inline __m256i lane_sums8(const __m512i v[8]) {
  __m512i a[4], b[2];
  for (int i = 0; i < 4; ++i) {
    a[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  }
  for (int i = 0; i < 2; ++i) {
    b[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_epi64(a[2 * i], a[2 * i + 1]));
  }
  // 128-bit chunk q of b[i]: the chunk-q sums of v[4i .. 4i+3].
  const __m512i c = _mm512_add_epi32(_mm512_shuffle_i32x4(b[0], b[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_i32x4(b[0], b[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i d = _mm512_shuffle_i32x4(c, c, _MM_SHUFFLE(3, 1, 2, 0));
  return _mm256_add_epi32(_mm512_castsi512_si256(d), _mm512_extracti64x4_epi64(d, 1));
}

}  // namespace bitnet::cpu::avx512vnni
