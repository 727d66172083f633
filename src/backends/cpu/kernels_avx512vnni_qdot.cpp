// AVX-512 VNNI set, quantized-activation row dots (KernelSet::quant_dot) and prefill tiles
// (KernelSet::quant_tile): the 32-element formats on 256-bit vpdpbusd (below), the other
// K-quants and IQ4_XS with the tiles shared with the AVX2 set (kernels_x86_qdot_common.h) on
// vpdpwssd; every other type (Q6_K) is the AVX2 set's (kernels_avx2_qdot.cpp), as are the
// K-quant / IQ4_XS row dots, which the tiles here equal bit for bit. (A 512-bit vpdpbusd Q6_K dot, with vpmulld by the sub-block scales, ran 10% slower
// than the AVX2 one on Zen 4, whose 512-bit instructions are two 256-bit halves.)
//
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 headers (bug 105593)
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>

#include "backends/cpu/kernels_avx2.h"
#define BITNET_X86_QDOT_VPDPWSSD 1  // the shared K-quant tiles on vpdpwssd
#include "backends/cpu/kernels_x86_qdot_common.h"

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

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
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
