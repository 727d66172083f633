// AVX-512 VNNI set, quantized-activation row dots (KernelSet::quant_dot) and prefill tiles
// (KernelSet::quant_tile): the 32-element formats on 256-bit vpdpbusd and the other K-quants and
// IQ4_XS with vpdpwssd (both below); every other type (Q6_K) is the AVX2 set's
// (kernels_avx2_qdot.cpp), as are the K-quant / IQ4_XS row dots, which the tiles here equal bit
// for bit. (A 512-bit vpdpbusd Q6_K dot, with vpmulld by the sub-block scales, ran 10% slower
// than the AVX2 one on Zen 4, whose 512-bit instructions are two 256-bit halves.)
//
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 headers (bug 105593)
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>

#include "backends/cpu/kernels_avx2.h"

namespace bitnet::cpu::avx512vnni {

namespace {

// ---- 32-element blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) against Q8_0 / Q8_1 ----
//
// One weight block meets one activation block in a single 256-bit vpdpbusd (EVEX, AVX512VL):
// unsigned codes (Q4_1, Q5_1) directly against the int8 activations; signed weights (Q8_0, the
// IQ4 table values, and Q4_0 / Q5_0 codes made signed once, q - 8 / q - 16) as |w| against x
// carrying w's sign (vpsignb). |x| <= 127, so 4 products per int32 lane cannot overflow. Each
// block's 8 int32 lanes are converted and multiplied lane by lane by the block's d_w * d_a (no
// horizontal integer reduction), into 2 accumulators per token (even and odd blocks), which are
// added and reduced at the end (four tokens' reductions together, each by the same association).
// The weights are unpacked once per block for all tokens of a tile, and the row dot is the tile
// for one token, so both agree bit for bit. The d products: per 4 (or 2) blocks the activations'
// fp16 d's are read with scalar loads, converted together, multiplied by the weights' d's and
// broadcast per block with vpermps; an odd last block takes a scalar product.

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

__m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
__m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 16 bytes of nibbles -> 32 codes: byte j (j < 16) the low nibble of p[j], byte j + 16 the high
// one (ggml's element order of Q4_0..Q5_1).
__m256i nibbles32(const uint8_t* p) {
  const __m256i x = _mm256_broadcastsi128_si256(load128(p));
  return _mm256_and_si256(_mm256_srlv_epi32(x, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0f));
}

// The little-endian uint32 of fifth bits at p -> 32 bytes, byte j = 0x10 where bit j is set.
__m256i fifth_bits32(const uint8_t* p) { return _mm256_maskz_mov_epi8(load_u32(p), _mm256_set1_epi8(0x10)); }

// The 16-bit words at p + k * stride (k < 4) as the low 64 bits of a vector.
__m128i gather4_u16(const uint8_t* p, int64_t stride) {
  const uint64_t v = uint64_t{load_u16(p)} | uint64_t{load_u16(p + stride)} << 16 |
                     uint64_t{load_u16(p + 2 * stride)} << 32 | uint64_t{load_u16(p + 3 * stride)} << 48;
  return _mm_cvtsi64_si128(static_cast<long long>(v));
}

// A weight block unpacked once: u the bytes that meet the activations in vpdpbusd (unsigned), s
// the signs they carry over to the activations (signed formats).
struct W32 {
  __m256i u, s;
};
W32 signed_w(__m256i w) { return {_mm256_abs_epi8(w), w}; }

// kW, kA: block bytes; kQs: offset of the activation's 32 int8 in its block; kMin: a min term
// (Q8_1's s times the weight's m); kSigned: the sign trick.
struct Q4_0 {
  static constexpr int64_t kW = 18, kA = 34;
  static constexpr bool kMin = false, kSigned = true;
  static W32 unpack(const uint8_t* w) { return signed_w(_mm256_sub_epi8(nibbles32(w + 2), _mm256_set1_epi8(8))); }
};
struct Q5_0 {
  static constexpr int64_t kW = 22, kA = 34;
  static constexpr bool kMin = false, kSigned = true;
  // q - 16 = the nibble where the fifth bit is set, the nibble with bits 4-7 set (nibble - 16
  // as int8) where it is clear: one masked move.
  static W32 unpack(const uint8_t* w) {
    const __m256i x = _mm256_srlv_epi32(_mm256_broadcastsi128_si256(load128(w + 6)), _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    const __m256i nib = _mm256_and_si256(x, _mm256_set1_epi8(0x0f));
    const __m256i neg = _mm256_or_si256(x, _mm256_set1_epi8(static_cast<char>(0xf0)));
    return signed_w(_mm256_mask_mov_epi8(neg, load_u32(w + 2), nib));
  }
};
struct Q8_0 {
  static constexpr int64_t kW = 34, kA = 34;
  static constexpr bool kMin = false, kSigned = true;
  static W32 unpack(const uint8_t* w) { return signed_w(load256(w + 2)); }
};
struct IQ4_NL {
  static constexpr int64_t kW = 18, kA = 34;
  static constexpr bool kMin = false, kSigned = true;
  static W32 unpack(const uint8_t* w) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
    return signed_w(_mm256_shuffle_epi8(table, nibbles32(w + 2)));
  }
};
struct Q4_1 {
  static constexpr int64_t kW = 20, kA = 36;
  static constexpr bool kMin = true, kSigned = false;
  static W32 unpack(const uint8_t* w) { return {nibbles32(w + 4), _mm256_setzero_si256()}; }
};
struct Q5_1 {
  static constexpr int64_t kW = 24, kA = 36;
  static constexpr bool kMin = true, kSigned = false;
  static W32 unpack(const uint8_t* w) { return {_mm256_or_si256(nibbles32(w + 8), fifth_bits32(w + 4)), _mm256_setzero_si256()}; }
};

template <class T>
__m256i block_dot(const W32& w, const uint8_t* ab) {
  constexpr int64_t kQs = T::kMin ? 4 : 2;
  const __m256i x = load256(ab + kQs);
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w.u, T::kSigned ? _mm256_sign_epi8(x, w.s) : x);
}

// The sums of four vectors' 8 lanes, v[j]'s in lane j, each by the same association of its own
// lanes whatever the other vectors hold (so a token's sum does not depend on its neighbours).
__m128 hsum4(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// The 16-bit words at p + k * stride (k < K, K = 4 or 2) as the low 16 K bits of a vector.
template <int K>
__m128i gather_u16(const uint8_t* p, int64_t stride) {
  if constexpr (K == 4) return gather4_u16(p, stride);
  return _mm_cvtsi32_si128(static_cast<int>(uint32_t{load_u16(p)} | uint32_t{load_u16(p + stride)} << 16));
}

// K blocks (4 or 2) from block b of the weight row against N activation rows.
template <class T, int N, int K>
void step_blocks32(const uint8_t* w, const uint8_t* a, int64_t as, int64_t b, __m256 (&acc)[N][2], __m128 (&ms4)[N]) {
  const uint8_t* wb = w + b * T::kW;
  W32 q[K];
  for (int k = 0; k < K; ++k) q[k] = T::unpack(wb + k * T::kW);
  const __m128 wd = _mm_cvtph_ps(gather_u16<K>(wb, T::kW));
  __m128 wm = _mm_setzero_ps();
  if constexpr (T::kMin) wm = _mm_cvtph_ps(gather_u16<K>(wb + 2, T::kW));
#pragma GCC unroll 4
  for (int j = 0; j < N; ++j) {
    const uint8_t* ab = a + j * as + b * T::kA;
    const __m256 d = _mm256_castps128_ps256(_mm_mul_ps(wd, _mm_cvtph_ps(gather_u16<K>(ab, T::kA))));
    if constexpr (T::kMin) ms4[j] = _mm_add_ps(ms4[j], _mm_mul_ps(wm, _mm_cvtph_ps(gather_u16<K>(ab + 2, T::kA))));
#pragma GCC unroll 4
    for (int k = 0; k < K; ++k) {
      const __m256 dk = _mm256_permutexvar_ps(_mm256_set1_epi32(k), d);
      acc[j][k & 1] = _mm256_fmadd_ps(dk, _mm256_cvtepi32_ps(block_dot<T>(q[k], ab + k * T::kA)), acc[j][k & 1]);
    }
  }
}

template <class T, int N>
void tile_blocks32(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) {
  const int64_t nb = n / 32;
  __m256 acc[N][2];
  __m128 ms4[N];  // formats with a min: m_w * s_a (lanes beyond K of a 2-block step hold 0 * 0)
  float ms[N];
  for (int j = 0; j < N; ++j) {
    acc[j][0] = acc[j][1] = _mm256_setzero_ps();
    ms4[j] = _mm_setzero_ps();
    ms[j] = 0.0f;
  }
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) step_blocks32<T, N, 4>(w, a, as, b, acc, ms4);
  if (b + 2 <= nb) {
    step_blocks32<T, N, 2>(w, a, as, b, acc, ms4);
    b += 2;
  }
  if (b < nb) {
    const uint8_t* wb = w + b * T::kW;
    const W32 q = T::unpack(wb);
    const float wd = _cvtsh_ss(load_u16(wb));
    for (int j = 0; j < N; ++j) {
      const uint8_t* ab = a + j * as + b * T::kA;
      const __m256 d = _mm256_set1_ps(wd * _cvtsh_ss(load_u16(ab)));
      acc[j][0] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(block_dot<T>(q, ab)), acc[j][0]);
      if constexpr (T::kMin) ms[j] += _cvtsh_ss(load_u16(wb + 2)) * _cvtsh_ss(load_u16(ab + 2));
    }
  }
  __m256 v[4];
  for (int j = 0; j < 4; ++j) v[j] = j < N ? _mm256_add_ps(acc[j][0], acc[j][1]) : v[0];
  float sums[4];
  _mm_storeu_ps(sums, hsum4(v[0], v[1], v[2], v[3]));
  for (int j = 0; j < N; ++j) {
    float sum = sums[j];
    if constexpr (T::kMin) {
      const __m128 s = ms4[j];
      const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
      sum += _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2))) + ms[j];
    }
    out[j] = sum;
  }
}

template <class T>
float dot_blocks32(int64_t n, const uint8_t* w, const uint8_t* a) {
  float out;
  tile_blocks32<T, 1>(n, w, a, 0, &out);
  return out;
}

template <class T>
void tile_of(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, int n_act, float* out) {
  switch (n_act) {
    case 1: tile_blocks32<T, 1>(n, w, a, as, out); break;
    case 2: tile_blocks32<T, 2>(n, w, a, as, out); break;
    case 3: tile_blocks32<T, 3>(n, w, a, as, out); break;
    default: tile_blocks32<T, 4>(n, w, a, as, out); break;
  }
}

// ---- 256-element super-blocks against Q8_K (float d, int8 qs[256] at 4, int16 bsums[16] at 260) ----
//
// The AVX2 set's tiles (kernels_avx2_qdot.cpp) with each sub-block's scale applied and added by
// one vpdpwssd: per block the weight codes and scales are unpacked once for all tokens. Their
// int32 lanes and float steps are those of the AVX2 row dots, which stay this set's quant_dot
// for these types (decode: unpacking as they go suits one token better).

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

// ggml's kvalues_iq4nl (quant/iq4.h), a vpshufb table in both 128-bit lanes.
__m256i iq4_table() {
  return _mm256_broadcastsi128_si256(
      _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
}

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

// sum_i vpdpwssd(vpmaddubsw(u[i], x[32 i ..]), scale[i]) over the 8 groups of a block: codes
// 0..63 (two products of at most 63 * 127 per int16: no saturation). The int32 lanes are those
// of the AVX2 set's vpmaddwd + vpaddd, so these dots equal the AVX2 ones bit for bit.
__m256i k_block_isum(const __m256i (&u)[8], const __m256i (&scale)[8], const uint8_t* q8, __m256i isum) {
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    isum = _mm256_dpwssd_epi32(isum, _mm256_maddubs_epi16(u[i], load256(q8 + 32 * i)), scale[i]);
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
    W32 v[8];
    __m256i scale[8];
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      v[s] = signed_w(_mm256_shuffle_epi8(table, nibbles32(blk + 8 + 16 * s)));
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
        isum = _mm256_dpwssd_epi32(isum, _mm256_maddubs_epi16(v[s].u, _mm256_sign_epi8(load256(q8 + 32 * s), v[s].s)), scale[s]);
      }
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(wd * load_f32(act)), _mm256_cvtepi32_ps(isum), acc[j]);
    }
  }
  for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]);
}

// The QuantTileFn of a tile kernel: n_act dispatched to its N.
template <template <int> class K>
void tile_k(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, int n_act, float* out) {
  switch (n_act) {
    case 1: K<1>::run(n, w, a, as, out); break;
    case 2: K<2>::run(n, w, a, as, out); break;
    case 3: K<3>::run(n, w, a, as, out); break;
    default: K<4>::run(n, w, a, as, out); break;
  }
}

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

QuantDotFn quant_dot(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return dot_blocks32<Q4_0>;
    case GgmlType::kQ4_1: return dot_blocks32<Q4_1>;
    case GgmlType::kQ5_0: return dot_blocks32<Q5_0>;
    case GgmlType::kQ5_1: return dot_blocks32<Q5_1>;
    case GgmlType::kQ8_0: return dot_blocks32<Q8_0>;
    case GgmlType::kIQ4_NL: return dot_blocks32<IQ4_NL>;
    default: return avx2::quant_dot(type);
  }
}

QuantTileFn quant_tile(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return tile_of<Q4_0>;
    case GgmlType::kQ4_1: return tile_of<Q4_1>;
    case GgmlType::kQ5_0: return tile_of<Q5_0>;
    case GgmlType::kQ5_1: return tile_of<Q5_1>;
    case GgmlType::kQ8_0: return tile_of<Q8_0>;
    case GgmlType::kIQ4_NL: return tile_of<IQ4_NL>;
    case GgmlType::kQ2_K: return tile_k<Q2_KTile>;
    case GgmlType::kQ3_K: return tile_k<Q3_KTile>;
    case GgmlType::kQ4_K: return tile_k<Q4_KTile>;
    case GgmlType::kQ5_K: return tile_k<Q5_KTile>;
    case GgmlType::kIQ4_XS: return tile_k<IQ4_XSTile>;
    default: return avx2::quant_tile(type);
  }
}

}  // namespace bitnet::cpu::avx512vnni
