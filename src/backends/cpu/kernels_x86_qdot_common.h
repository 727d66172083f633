// The x86 quantized-activation kernels that the AVX2 and AVX-512 VNNI sets share
// (kernels_avx2_qdot.cpp, kernels_avx512vnni_qdot.cpp): small load and reduction helpers, and
// the K-quant / IQ4_XS prefill tiles, whose one difference between the sets is how a block's
// int16 pair sums meet the sub-block scales (add_scaled_pairs: vpmaddwd + vpaddd, or one
// vpdpwssd where the includer defines BITNET_X86_QDOT_VPDPWSSD; the same int32 lanes, so both
// sets' tiles equal the AVX2 row dots bit for bit).
//
// Internal linkage (anonymous namespace), as kernels_ternary_driver.h: each including file
// compiles its own copy with its own flags (CMakeLists.txt). Include it after <immintrin.h>.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace bitnet::cpu {

namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

__m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
__m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

float fp16(const uint8_t* p) { return _cvtsh_ss(load_u16(p)); }

float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

float hsum128(__m128 s) {
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// 16 bytes of nibbles -> 32 codes: byte j (j < 16) the low nibble of p[j], byte j + 16 the
// high one (ggml's element order of Q4_0..Q5_1). The bytes go to both 128-bit lanes, and the
// high lane's 32-bit words shift right by 4 (vpsrlvd), so every byte's high nibble drops into
// its low nibble there.
__m256i nibbles32(const uint8_t* p) {
  const __m256i x = _mm256_broadcastsi128_si256(load128(p));
  return _mm256_and_si256(_mm256_srlv_epi32(x, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0f));
}

// ggml's kvalues_iq4nl (quant/iq4.h), a vpshufb table in both 128-bit lanes.
__m256i iq4_table() {
  return _mm256_broadcastsi128_si256(
      _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
}

// isum + the int16 pair sums p times the int16 scales, added in pairs.
__m256i add_scaled_pairs(__m256i isum, __m256i p, __m256i scale) {
#ifdef BITNET_X86_QDOT_VPDPWSSD
  return _mm256_dpwssd_epi32(isum, p, scale);
#else
  return _mm256_add_epi32(isum, _mm256_madd_epi16(p, scale));
#endif
}

// ---- 256-element super-blocks against Q8_K (float d, int8 qs[256] at 4, int16 bsums[16] at 260) ----
//
// Each K-quant kernel is a tile: N activation rows (as apart) against one weight row. Per
// block the weight codes (8 vectors of 32 bytes, 32 elements each) and their sub-block scales
// are unpacked once, then every row multiplies them with its activations; the integer sums
// are exact, and every row takes the float steps of N = 1 (the row dot).

// Q4_K / Q5_K's 12 scale bytes -> bytes 0-7 the eight 6-bit scales, bytes 8-15 the mins
// (layout in quant/k_quant_util.h: get_scale_min_k4), four words at a time.
__m128i k4_scales_mins(const uint8_t* p) {
  constexpr uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, p, 12);
  const uint32_t scales_lo = u[0] & k6;
  const uint32_t mins_lo = u[1] & k6;
  const uint32_t scales_hi = (u[2] & k4) | ((u[0] >> 6) & k2) << 4;
  const uint32_t mins_hi = ((u[2] >> 4) & k4) | ((u[1] >> 6) & k2) << 4;
  return _mm_setr_epi32(static_cast<int>(scales_lo), static_cast<int>(scales_hi), static_cast<int>(mins_lo),
                        static_cast<int>(mins_hi));
}

// vpshufb masks that broadcast int16 lane j of a 128-bit lane over all its 8 int16 lanes.
__m256i broadcast16_mask(int j) { return _mm256_set1_epi16(static_cast<short>((2 * j + 1) << 8 | 2 * j)); }

// The min term sum_g bsums[g] * m[g / 2] of a Q4_K / Q5_K block: bsums added in pairs (one per
// sub-block, |sum| <= 32 * 127) and multiplied by the mins, as 4 int32.
__m128i k4_min_terms(__m128i sc_mn, const uint8_t* act) {
  const __m256i bsums = load256(act + 260);
  const __m128i pair_sums = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
  return _mm_madd_epi16(pair_sums, _mm_cvtepu8_epi16(_mm_unpackhi_epi64(sc_mn, sc_mn)));
}

// sum_i (vpmaddubsw(u[i], x[32 i ..]) x scale[i], pairs added) over the 8 groups of a block:
// codes 0..63 (two products of at most 63 * 127 per int16: no saturation).
__m256i k_block_isum(const __m256i (&u)[8], const __m256i (&scale)[8], const uint8_t* q8, __m256i isum) {
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    isum = add_scaled_pairs(isum, _mm256_maddubs_epi16(u[i], load256(q8 + 32 * i)), scale[i]);
  }
  return isum;
}

// One Q4_K row (quant/q4_k_q5_k.h: fp16 d, dmin, 12 scale bytes, qs[128]) against Q8_K. Per
// 64 elements c, one 32-byte load of qs gives sub-block 2c (low nibbles) and 2c+1 (high);
// codes 0..15 x activations in vpmaddubsw, vpmaddwd applies the 6-bit sub-block scale; the
// mins come from the activations' 16-element sums. Q5_K (fp16 d, dmin, 12 scale bytes, qh[32],
// qs[128]): each code's fifth bit (bit 2c / 2c+1 of qh[l]) shifted to bit 4 of its byte.
template <bool kQ5, int N>
void tile_q45_K(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) {
  constexpr int64_t kBlock = kQ5 ? 176 : 144;
  constexpr int64_t kQs = kQ5 ? 48 : 16;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256 acc[N];
  __m128 acc_min[N];
  for (int j = 0; j < N; ++j) {
    acc[j] = _mm256_setzero_ps();
    acc_min[j] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * kBlock;
    const __m128i sc_mn = k4_scales_mins(blk + 4);
    const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc_mn));
    __m256i u[8], scale[8];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(blk + kQs + 32 * c);
      u[2 * c] = _mm256_and_si256(q, low4);
      u[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (kQ5) {
        // Bit 2c of qh to bit 4: shifts within 16-bit lanes keep bit 4 of each byte its own.
        const __m256i qh = load256(blk + 16);
        const __m256i h_lo = 2 * c <= 4 ? _mm256_slli_epi16(qh, 4 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 4);
        const __m256i h_hi = 2 * c + 1 <= 4 ? _mm256_slli_epi16(qh, 3 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 3);
        u[2 * c] = _mm256_or_si256(u[2 * c], _mm256_and_si256(h_lo, bit4));
        u[2 * c + 1] = _mm256_or_si256(u[2 * c + 1], _mm256_and_si256(h_hi, bit4));
      }
      scale[2 * c] = _mm256_shuffle_epi8(scales, broadcast16_mask(2 * c));
      scale[2 * c + 1] = _mm256_shuffle_epi8(scales, broadcast16_mask(2 * c + 1));
    }
    const float d = fp16(blk);
    const float dmin = fp16(blk + 2);
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const uint8_t* act = a + j * as + b * 292;
      const float a_d = load_f32(act);
      acc_min[j] = _mm_fmadd_ps(_mm_set1_ps(dmin * a_d), _mm_cvtepi32_ps(k4_min_terms(sc_mn, act)), acc_min[j]);
      const __m256i isum = k_block_isum(u, scale, act + 4, _mm256_setzero_si256());
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d * a_d), _mm256_cvtepi32_ps(isum), acc[j]);
    }
  }
  for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]) - hsum128(acc_min[j]);
}

// How far ahead the quantized row dots (Q6_K, the 32-element formats) and the Q6_K tiles
// prefetch their blocks: the rows of a call follow one another in memory, and decode (or a
// decode step of a few sequences) streams them from memory, where one core's demand misses
// alone leave it short of the bandwidth. 4 KB ahead was too close on Zen 5: bench_cpu_kernels
// gemv_q6_K 32000x2560 (avx512vnni) 1 thread 39-40 -> 46-48 GB/s at 8 or 16 KB, 2 threads
// 60-63 -> 67-71; the AVX2 set's +3-5% and +6-14%. In 2B-4T decode, the distances alternating
// token by token in one process (a throwaway harness): against 4 KB, 8 KB took 0.92-1.00 of
// the time on 2 threads and 0.97 on one; 16 KB took 0.99-1.04 on 2 threads, 0.93-0.97 on one;
// 8 KB against 16 KB 0.94-1.01.
constexpr int64_t kRowPrefetchBytes = 8192;

// Prefetches, kRowPrefetchBytes past p, a line per 64 of the `bytes` that a row dot is about to
// read from p (the next call's lines cover a span's unaligned tail), into the cache level that
// Locality names as __builtin_prefetch does (3: L1, prefetcht0; 2: L2, prefetcht1). Inlined by
// force: GCC 12 drops calls to a function whose only effects are prefetches.
template <int Locality = 3>
[[gnu::always_inline]] inline void prefetch_row_ahead(const uint8_t* p, int64_t bytes) {
  for (int64_t l = 0; l < bytes; l += 64) __builtin_prefetch(p + kRowPrefetchBytes + l, 0, Locality);
}

// The 4 lines that a 210-byte Q6_K block kRowPrefetchBytes past blk can span.
template <int Locality = 3>
[[gnu::always_inline]] inline void prefetch_q6_K_ahead(const uint8_t* blk) { prefetch_row_ahead<Locality>(blk, 256); }

// The codes 0..63 of Q6_K elements 128h + 32k + l (l < 32) of a block: a nibble of ql (the
// block's bytes 64h + 32(k % 2) ..., low nibbles for k < 2) below bits 2k, 2k+1 of qh (bytes
// 128 + 32h ...), moved to bits 4, 5 (shifts within 16-bit lanes keep them in their byte).
// Shared by the AVX2 row dot and tile.
[[gnu::always_inline]] inline __m256i q6_K_codes(__m256i ql, __m256i qh, int k) {
  const __m256i nibble = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0f));
  const __m256i hshift = k < 2 ? _mm256_slli_epi16(qh, 4 - 2 * k) : _mm256_srli_epi16(qh, 2 * k - 4);
  return _mm256_or_si256(nibble, _mm256_and_si256(hshift, _mm256_set1_epi8(0x30)));
}

// One Q2_K row (scales[16]: low nibble scale, high nibble min of 16-element sub-block s;
// qs[64]: 2-bit codes, element 128h + 32j + r at bits 2j of qs[32h + r]; fp16 d, dmin at 80,
// 82) against Q8_K. One 32-byte load of qs per half h gives four 32-element groups j by shifts;
// a group spans sub-blocks 2p, 2p+1 (p = 4h + j), so the scales are widened once per block
// with the even sub-blocks in the low 128-bit lane and the odd ones in the high lane, and one
// in-lane vpshufb gives a group's pair. The mins meet the activations' 16-element sums.
template <int N>
void tile_q2_K(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) {
  const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  const __m128i low4 = _mm_set1_epi8(0x0f);
  const __m256i low2 = _mm256_set1_epi8(3);
  __m256 acc[N], acc_min[N];
  for (int j = 0; j < N; ++j) acc[j] = acc_min[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 84;
    const __m128i sc_mn = load128(blk);
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc_mn, 4), low4));
    const __m256i scales = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_and_si128(sc_mn, low4), even_odd));
    __m256i u[8], scale[8];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(blk + 16 + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        u[4 * h + k] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), low2);
        scale[4 * h + k] = _mm256_shuffle_epi8(scales, broadcast16_mask(4 * h + k));
      }
    }
    const float d = fp16(blk + 80);
    const float dmin = fp16(blk + 82);
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const uint8_t* act = a + j * as + b * 292;
      const float a_d = load_f32(act);
      const __m256i min_terms = _mm256_madd_epi16(load256(act + 260), mins);
      acc_min[j] = _mm256_fmadd_ps(_mm256_set1_ps(a_d * dmin), _mm256_cvtepi32_ps(min_terms), acc_min[j]);
      const __m256i isum = k_block_isum(u, scale, act + 4, _mm256_setzero_si256());
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(a_d * d), _mm256_cvtepi32_ps(isum), acc[j]);
    }
  }
  for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]) - hsum(acc_min[j]);
}

// Q3_K's 12 scale bytes -> the 16 6-bit scales (layout in quant/q2_k_q3_k.h), minus 32, as
// int8: four words of low nibbles with their top 2 bits put on.
__m128i q3_K_scales(const uint8_t* p) {
  constexpr uint32_t k4 = 0x0f0f0f0f, k2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, p, 12);
  const uint32_t s0 = (u[0] & k4) | (u[2] & k2) << 4;
  const uint32_t s1 = (u[1] & k4) | ((u[2] >> 2) & k2) << 4;
  const uint32_t s2 = ((u[0] >> 4) & k4) | ((u[2] >> 4) & k2) << 4;
  const uint32_t s3 = ((u[1] >> 4) & k4) | ((u[2] >> 6) & k2) << 4;
  const __m128i v = _mm_setr_epi32(static_cast<int>(s0), static_cast<int>(s1), static_cast<int>(s2), static_cast<int>(s3));
  return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

// One Q3_K row (hmask[32], qs[64] as Q2_K's, 12 scale bytes, fp16 d at 108) against Q8_K.
// code = low2 - 4 + 4 * high bit: the unsigned u = low2 + 4 * high (0..7) goes through
// vpmaddubsw as Q2_K's codes, and the "- 4" of every code is taken once per block from the
// activations' 16-element sums (as Q6_K's "- 32"). The high bit of element 128h + 32j + r is
// bit 4h + j of hmask[r].
template <int N>
void tile_q3_K(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) {
  const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  const __m256i low2 = _mm256_set1_epi8(3);
  const __m256i bit2 = _mm256_set1_epi8(4);
  __m256 acc[N];
  for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 110;
    const __m128i sc8 = q3_K_scales(blk + 96);
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    const __m256i scales = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, even_odd));
    const __m256i hm = load256(blk);
    __m256i u[8], scale[8];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(blk + 32 + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        // Bit 4h + k of hmask to bit 2: shifts within 16-bit lanes keep bit 2 of each byte its own.
        const int bit = 4 * h + k;
        const __m256i high = bit <= 2 ? _mm256_slli_epi16(hm, 2 - bit) : _mm256_srli_epi16(hm, bit - 2);
        u[bit] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * k), low2), _mm256_and_si256(high, bit2));
        scale[bit] = _mm256_shuffle_epi8(scales, broadcast16_mask(bit));
      }
    }
    const float wd = fp16(blk + 108);
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const uint8_t* act = a + j * as + b * 292;
      // 4 * sum_s scale_s * bsum_s, subtracted.
      const __m256i isum0 = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(load256(act + 260), sc16), 2));
      const __m256i isum = k_block_isum(u, scale, act + 4, isum0);
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(wd * load_f32(act)), _mm256_cvtepi32_ps(isum), acc[j]);
    }
  }
  for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]);
}

// One IQ4_XS row (fp16 d, scales_h, scales_l[4], qs[128]: eight 32-element sub-blocks laid out
// as IQ4_NL blocks) against Q8_K: table lookup and signed products as IQ4_NL, each sub-block's
// 6-bit scale - 32 applied in integers by vpmaddwd (the twin applies it in float: the integer
// sums agree, the float steps differ only in rounding).
template <int N>
void tile_iq4_xs(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) {
  const __m256i table = iq4_table();
  __m256 acc[N];
  for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 136;
    // Scale s: nibble s % 2 of scales_l[s / 2], bits 2s, 2s+1 of scales_h on top (vpmullw by
    // 2^(14 - 2s) brings them to bits 14, 15).
    const __m128i sl = _mm_cvtsi32_si128(load_i32(blk + 4));
    const __m128i lo = _mm_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_and_si128(sl, _mm_set1_epi8(0x0f)),
                                                           _mm_and_si128(_mm_srli_epi16(sl, 4), _mm_set1_epi8(0x0f))));
    const __m128i hi = _mm_srli_epi16(_mm_mullo_epi16(_mm_set1_epi16(static_cast<short>(load_u16(blk + 2))),
                                                      _mm_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1)),
                                      14);
    const __m128i sc16 = _mm_sub_epi16(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi16(32));
    const __m256i scales = _mm256_broadcastsi128_si256(sc16);
    __m256i u[8], sg[8];  // |w| and w of the table values
    __m256i scale[8];
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      sg[s] = _mm256_shuffle_epi8(table, nibbles32(blk + 8 + 16 * s));
      u[s] = _mm256_sign_epi8(sg[s], sg[s]);
      scale[s] = _mm256_shuffle_epi8(scales, broadcast16_mask(s));
    }
    const float wd = fp16(blk);
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const uint8_t* act = a + j * as + b * 292;
      const uint8_t* q8 = act + 4;
      __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        isum = add_scaled_pairs(isum, _mm256_maddubs_epi16(u[s], _mm256_sign_epi8(load256(q8 + 32 * s), sg[s])), scale[s]);
      }
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(wd * load_f32(act)), _mm256_cvtepi32_ps(isum), acc[j]);
    }
  }
  for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]);
}


// K<m>::run for the m (1 .. M) given at run time.
template <template <int> class K, int M>
[[gnu::always_inline]] inline void run_k(int m, int64_t n, const uint8_t* row, const uint8_t* a, int64_t as, float* out) {
  if constexpr (M > 1) {
    if (m < M) return run_k<K, M - 1>(m, n, row, a, as, out);
  }
  K<M>::run(n, row, a, as, out);
}

// The QuantTileFn of a one-row tile kernel of up to kChunk tokens: row after row, n_act in runs
// of kChunk (4 in the AVX2 set's 16 registers, 8 for its own Q6_K tile, which unpacks a block
// group by group; the AVX-512 set, with 32, takes 8 where a kernel's registers allow), each
// dispatched to its N.
template <template <int> class K, int kChunk = 4>
void tile_k(int64_t n, const uint8_t* w, int64_t w_row_bytes, int64_t n_rows, const uint8_t* act, int64_t act_row_bytes,
            int n_act, float* y, int64_t y_stride) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = w + r * w_row_bytes;
    for (int j = 0; j < n_act; j += kChunk) {
      float out[kChunk];
      const int m = n_act - j < kChunk ? n_act - j : kChunk;
      run_k<K, kChunk>(m, n, row, act + j * act_row_bytes, act_row_bytes, out);
      for (int i = 0; i < m; ++i) y[(j + i) * y_stride + r] = out[i];
    }
  }
}

// Each tile kernel as tile_k takes it.
template <int N>
struct Q4_KTile {
  static void run(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) { tile_q45_K<false, N>(n, w, a, as, out); }
};
template <int N>
struct Q5_KTile {
  static void run(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) { tile_q45_K<true, N>(n, w, a, as, out); }
};
template <int N>
struct Q2_KTile {
  static void run(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) { tile_q2_K<N>(n, w, a, as, out); }
};
template <int N>
struct Q3_KTile {
  static void run(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) { tile_q3_K<N>(n, w, a, as, out); }
};
template <int N>
struct IQ4_XSTile {
  static void run(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) { tile_iq4_xs<N>(n, w, a, as, out); }
};

}  // namespace

}  // namespace bitnet::cpu
