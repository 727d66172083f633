// Horizontal sums shared by the AVX-512 VNNI set's ternary and quantized kernels. Include after
// <immintrin.h> (the sets' sources wrap it in a GCC 12 warning guard).
#pragma once

namespace bitnet::cpu::avx512vnni {

// The steps of a transpose-and-add of int32 vectors (lane_sums8, and the Q6_K tile's sums of
// two rows). fold_pair: two vectors into one, lanes 4c and 4c + 2 holding partial sums of v0's
// 128-bit chunk c, lanes 4c + 1 and 4c + 3 of v1's.
[[gnu::always_inline]] inline __m512i fold_pair(__m512i v0, __m512i v1) {
  return _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
}

// Two fold_pair results (of v0, v1 and of v2, v3) into one: lane 4c + i holds a partial sum of
// v_i's chunk c.
[[gnu::always_inline]] inline __m512i fold_pairs(__m512i a01, __m512i a23) {
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a01, a23), _mm512_unpackhi_epi64(a01, a23));
}

// Chunks 0 + 1 and 2 + 3 of b0 in chunks 0 and 1, those of b1 in chunks 2 and 3.
[[gnu::always_inline]] inline __m512i fold_chunks(__m512i b0, __m512i b1) {
  return _mm512_add_epi32(_mm512_shuffle_i32x4(b0, b1, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_i32x4(b0, b1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// The 16 int32 lanes of each of v[0..7] summed: lane i of the result is v[i]'s sum.
[[gnu::always_inline]] inline __m256i lane_sums8(const __m512i v[8]) {
  __m512i a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = fold_pair(v[2 * i], v[2 * i + 1]);
  for (int i = 0; i < 2; ++i) b[i] = fold_pairs(a[2 * i], a[2 * i + 1]);
  // 128-bit chunk q of b[i]: the chunk-q sums of v[4i .. 4i+3].
  const __m512i c = fold_chunks(b[0], b[1]);
  const __m512i d = _mm512_shuffle_i32x4(c, c, _MM_SHUFFLE(3, 1, 2, 0));
  return _mm256_add_epi32(_mm512_castsi512_si256(d), _mm512_extracti64x4_epi64(d, 1));
}

}  // namespace bitnet::cpu::avx512vnni
