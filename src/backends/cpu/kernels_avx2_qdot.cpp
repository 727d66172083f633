// AVX2 set, quantized-activation row dots (KernelSet::quant_dot): the llama.cpp weight types
// against 8-bit activation blocks (quant::vec_dot_type), the block sums in integers exactly as
// the scalar twins (quant::vec_dot_fn) compute them, the float accumulation in another order.
// Types without a dot here get the twin. Each type with a dot here also has a prefill tile
// (KernelSet::quant_tile): the weight blocks unpacked once for up to 4 tokens (Q6_K: each
// 32-element group for up to 8), every token then taking the dot's integer lanes and float
// steps, so tile and dot agree bit for bit.
//
// Every dot multiplies bytes with vpmaddubsw (unsigned x signed bytes, two products per int16).
// Codes stay unsigned (0..63) and a code offset ("- 8", "- 32") is taken from the activations
// separately (a second vpmaddubsw, or the Q8_K 16-element sums); signed weights (Q8_0, the IQ4
// table values) go as |w| against x with w's sign (vpsignb). Activations are in [-127, 127]
// (the Q8 quantizers round amax to 127), so no int16 pair can saturate; each kernel notes its
// bound. Every load stays inside its block (the smallest, 18 bytes, holds a 16-byte load).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/kernels_avx2.h"
#include "backends/cpu/kernels_x86_qdot_common.h"
#include "quant/q8_0.h"
#include "quant/q8_k.h"

namespace bitnet::cpu::avx2 {

namespace {

int32_t hsum_i32(__m256i v) {
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i s2 = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1)));
}

// ---- 32-element blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) ----

// The little-endian uint32 of fifth bits at p -> 32 bytes, byte j = 0x10 where bit j is set.
__m256i fifth_bits32(const uint8_t* p) {
  // Byte j takes byte j / 8 of the word (the word is in both 128-bit lanes), then tests bit j % 8.
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(load_i32(p)), spread), bit);
  return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(0x10));
}

// The 32-bit words at p, p + stride, p + 2 stride, p + 3 stride.
__m128i gather4_u32(const uint8_t* p, int64_t stride) {
  const __m128i w01 = _mm_unpacklo_epi32(load128(p), load128(p + stride));
  const __m128i w23 = _mm_unpacklo_epi32(load128(p + 2 * stride), load128(p + 3 * stride));
  return _mm_unpacklo_epi64(w01, w23);
}

// The d products of four blocks of fp16 d first: the weights' four d's (wd: cvtph of
// gather4_u32 of the weight blocks, read once per weight row step) times the activations' d's,
// spread so that block i's lies in lanes i and i + 4 (the d's are read as 32-bit words, the
// other half of each converts to an unused float, and one vpermps brings them together).
__m256 act_d_products(__m256 wd, const uint8_t* a, int64_t as) {
  return _mm256_mul_ps(wd, _mm256_cvtph_ps(gather4_u32(a, as)));
}

// acc + (d_w * d_a) * isum for four blocks, block i's isum in lanes i and i + 4.
__m256 scaled_d(__m256 wd, const uint8_t* a, int64_t as, __m256 isum, __m256 acc) {
  const __m256 p = act_d_products(wd, a, as);
  const __m256 d = _mm256_permutevar8x32_ps(p, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
  return _mm256_fmadd_ps(d, isum, acc);
}

// As scaled_d for blocks of fp16 (d, m) against Q8_1's (d, s): one product gives
// [d_w d_a, m_w s_a] per block; the d products are spread as isum wants them, and the whole
// product goes to acc_ms, whose odd lanes (the m s terms) are all the caller keeps of it.
__m256 scaled_dm(__m256 wd, const uint8_t* a, int64_t as, __m256 isum, __m256 acc, __m256* acc_ms) {
  const __m256 p = act_d_products(wd, a, as);
  *acc_ms = _mm256_add_ps(*acc_ms, p);  // [D0 MS0 D1 MS1 | D2 MS2 D3 MS3]
  const __m256 d = _mm256_permutevar8x32_ps(p, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
  return _mm256_fmadd_ps(d, isum, acc);
}

// A 32-element weight block unpacked once for any number of activation rows: u the 32
// unsigned bytes that meet the activations in vpmaddubsw, s (signed formats) the signs they
// carry over to the activations (vpsignb).
struct Unpacked32 {
  __m256i u, s;
};

// The signed products of 32 int8 weights v with 32 activations: |v| meets x carrying v's sign
// (vpsignb), pairs up to 2 * 127 * 127.
Unpacked32 signed_weights(__m256i v) { return {_mm256_sign_epi8(v, v), v}; }
__m256i signed_pairs(const Unpacked32& v, __m256i x) { return _mm256_maddubs_epi16(v.u, _mm256_sign_epi8(x, v.s)); }

// Per-type pieces of a 32-element block dot. unpack(): the weight block's bytes; pairs(): the
// block's 32 products with one activation block as 16 int16 pair sums; kHaddInt16: four of
// those added stay within int16, so four blocks reduce with vphaddw; kMin: the format has a
// min (m_w * s_a goes to acc_ms, scaled_dm); tail(): one block in scalars.
struct Q4_0 {
  static constexpr int64_t kW = 18, kA = 34;
  static constexpr bool kHaddInt16 = true;  // |(q - 8) * x| pairs <= 2032
  static constexpr bool kMin = false;
  static Unpacked32 unpack(const uint8_t* w) { return {nibbles32(w + 2), _mm256_setzero_si256()}; }
  static __m256i pairs(const Unpacked32& q, const uint8_t* a) {
    const __m256i x = load256(a + 2);
    // (q - 8) * x = q * x - 8 * x, both halves as vpmaddubsw pairs (q <= 15: no saturation).
    return _mm256_sub_epi16(_mm256_maddubs_epi16(q.u, x), _mm256_maddubs_epi16(_mm256_set1_epi8(8), x));
  }
  static float tail(const uint8_t* w, const uint8_t* a, int32_t sumi) {
    return static_cast<float>(sumi) * fp16(w) * fp16(a);
  }
};

struct Q8_0 {
  static constexpr int64_t kW = 34, kA = 34;
  static constexpr bool kHaddInt16 = false;  // pairs up to 2 * 127 * 127
  static constexpr bool kMin = false;
  // Signed x signed: |w| meets x carrying w's sign (vpsignb), the usual vpmaddubsw trick.
  static Unpacked32 unpack(const uint8_t* w) { return signed_weights(load256(w + 2)); }
  static __m256i pairs(const Unpacked32& q, const uint8_t* a) { return signed_pairs(q, load256(a + 2)); }
  static float tail(const uint8_t* w, const uint8_t* a, int32_t sumi) {
    return static_cast<float>(sumi) * (fp16(w) * fp16(a));
  }
};

struct Q5_0 {
  static constexpr int64_t kW = 22, kA = 34;
  static constexpr bool kHaddInt16 = true;  // |(q - 16) * x| pairs <= 4064
  static constexpr bool kMin = false;
  static Unpacked32 unpack(const uint8_t* w) { return {_mm256_or_si256(nibbles32(w + 6), fifth_bits32(w + 2)), _mm256_setzero_si256()}; }
  static __m256i pairs(const Unpacked32& q, const uint8_t* a) {
    const __m256i x = load256(a + 2);
    return _mm256_sub_epi16(_mm256_maddubs_epi16(q.u, x), _mm256_maddubs_epi16(_mm256_set1_epi8(16), x));
  }
  static float tail(const uint8_t* w, const uint8_t* a, int32_t sumi) {
    return static_cast<float>(sumi) * (fp16(w) * fp16(a));
  }
};

struct Q4_1 {
  static constexpr int64_t kW = 20, kA = 36;
  static constexpr bool kHaddInt16 = true;  // q * x pairs <= 3810
  static constexpr bool kMin = true;
  static Unpacked32 unpack(const uint8_t* w) { return {nibbles32(w + 4), _mm256_setzero_si256()}; }
  static __m256i pairs(const Unpacked32& q, const uint8_t* a) { return _mm256_maddubs_epi16(q.u, load256(a + 4)); }
  static float tail(const uint8_t* w, const uint8_t* a, int32_t sumi) {
    return fp16(w) * fp16(a) * static_cast<float>(sumi) + fp16(w + 2) * fp16(a + 2);
  }
};

struct Q5_1 {
  static constexpr int64_t kW = 24, kA = 36;
  static constexpr bool kHaddInt16 = true;  // q * x pairs <= 7874
  static constexpr bool kMin = true;
  static Unpacked32 unpack(const uint8_t* w) { return {_mm256_or_si256(nibbles32(w + 8), fifth_bits32(w + 4)), _mm256_setzero_si256()}; }
  static __m256i pairs(const Unpacked32& q, const uint8_t* a) { return _mm256_maddubs_epi16(q.u, load256(a + 4)); }
  static float tail(const uint8_t* w, const uint8_t* a, int32_t sumi) {
    return fp16(w) * fp16(a) * static_cast<float>(sumi) + fp16(w + 2) * fp16(a + 2);
  }
};

struct IQ4_NL {
  static constexpr int64_t kW = 18, kA = 34;
  static constexpr bool kHaddInt16 = false;  // pairs up to 2 * 127 * 127
  static constexpr bool kMin = false;
  // The codes index the table (one vpshufb), then signed x signed as Q8_0.
  static Unpacked32 unpack(const uint8_t* w) { return signed_weights(_mm256_shuffle_epi8(iq4_table(), nibbles32(w + 2))); }
  static __m256i pairs(const Unpacked32& q, const uint8_t* a) { return signed_pairs(q, load256(a + 2)); }
  static float tail(const uint8_t* w, const uint8_t* a, int32_t sumi) {
    return fp16(a) * fp16(w) * static_cast<float>(sumi);
  }
};

// N activation rows (as apart) against one weight row, four blocks per step: the weight
// blocks unpacked once, then per row each block's int16 pairs, reduced with horizontal adds so
// that block i's exact integer sum lies in int32 lanes i and i + 4, one convert and one FMA
// against the four blocks' scales. Leftover blocks (n / 32 not a multiple of 4) go one at a
// time. Every row takes exactly the float steps of N = 1 (the row dot).
template <class T, int N>
void tile_blocks32(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) {
  const int64_t nb = n / 32;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[N];
  __m256 acc_ms[N];  // formats with a min: the m_w s_a terms in odd lanes
  for (int j = 0; j < N; ++j) acc[j] = acc_ms[j] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const uint8_t* wb = w + b * T::kW;
    if constexpr (N == 1) prefetch_row_ahead(wb, 4 * T::kW);  // the row dot: decode streams the rows from memory
    const Unpacked32 q0 = T::unpack(wb);
    const Unpacked32 q1 = T::unpack(wb + T::kW);
    const Unpacked32 q2 = T::unpack(wb + 2 * T::kW);
    const Unpacked32 q3 = T::unpack(wb + 3 * T::kW);
    const __m256 wd = _mm256_cvtph_ps(gather4_u32(wb, T::kW));
#pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const uint8_t* ab = a + j * as + b * T::kA;
      const __m256i p0 = T::pairs(q0, ab);
      const __m256i p1 = T::pairs(q1, ab + T::kA);
      const __m256i p2 = T::pairs(q2, ab + 2 * T::kA);
      const __m256i p3 = T::pairs(q3, ab + 3 * T::kA);
      __m256i isum;
      if constexpr (T::kHaddInt16) {
        isum = _mm256_madd_epi16(_mm256_hadd_epi16(_mm256_hadd_epi16(p0, p1), _mm256_hadd_epi16(p2, p3)), ones);
      } else {
        isum = _mm256_hadd_epi32(_mm256_hadd_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones)),
                                 _mm256_hadd_epi32(_mm256_madd_epi16(p2, ones), _mm256_madd_epi16(p3, ones)));
      }
      if constexpr (T::kMin) {
        acc[j] = scaled_dm(wd, ab, T::kA, _mm256_cvtepi32_ps(isum), acc[j], &acc_ms[j]);
      } else {
        acc[j] = scaled_d(wd, ab, T::kA, _mm256_cvtepi32_ps(isum), acc[j]);
      }
    }
  }
  for (int j = 0; j < N; ++j) {
    float sum = hsum(_mm256_add_ps(acc[j], _mm256_blend_ps(_mm256_setzero_ps(), acc_ms[j], 0xaa)));
    for (int64_t t = b; t < nb; ++t) {
      const uint8_t* wb = w + t * T::kW;
      const uint8_t* ab = a + j * as + t * T::kA;
      sum += T::tail(wb, ab, hsum_i32(_mm256_madd_epi16(T::pairs(T::unpack(wb), ab), ones)));
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

// The row dots of the K-quants and IQ4_XS (decode): the tiles' float steps for one token, with
// the codes unpacked as they are used (fewer live registers than the tiles' once-per-block
// unpacking, which matters on 16 ymm registers); their integer lanes are the tiles', so each
// tile gives every token its dot bit for bit.
float dot_q4_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_min = _mm_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 144;
    const uint8_t* act = a + b * 292;
    const float a_d = load_f32(act);
    const __m128i sc_mn = k4_scales_mins(blk + 4);
    acc_min = _mm_fmadd_ps(_mm_set1_ps(fp16(blk + 2) * a_d), _mm_cvtepi32_ps(k4_min_terms(sc_mn, act)), acc_min);
    const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc_mn));
    const uint8_t* q8 = act + 4;
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(blk + 16 + 32 * c);
      const __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(q, low4), load256(q8 + 64 * c));
      const __m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), load256(q8 + 64 * c + 32));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(lo, _mm256_shuffle_epi8(scales, broadcast16_mask(2 * c))));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(hi, _mm256_shuffle_epi8(scales, broadcast16_mask(2 * c + 1))));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(blk) * a_d), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc) - hsum128(acc_min);
}

float dot_q5_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_min = _mm_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 176;
    const uint8_t* act = a + b * 292;
    const float a_d = load_f32(act);
    const __m128i sc_mn = k4_scales_mins(blk + 4);
    acc_min = _mm_fmadd_ps(_mm_set1_ps(fp16(blk + 2) * a_d), _mm_cvtepi32_ps(k4_min_terms(sc_mn, act)), acc_min);
    const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc_mn));
    const __m256i qh = load256(blk + 16);
    const uint8_t* q8 = act + 4;
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(blk + 48 + 32 * c);
      // Bit 2c of qh to bit 4: shifts within 16-bit lanes keep bit 4 of each byte its own.
      const __m256i h_lo = 2 * c <= 4 ? _mm256_slli_epi16(qh, 4 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 4);
      const __m256i h_hi = 2 * c + 1 <= 4 ? _mm256_slli_epi16(qh, 3 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 3);
      const __m256i q_lo = _mm256_or_si256(_mm256_and_si256(q, low4), _mm256_and_si256(h_lo, bit4));
      const __m256i q_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), _mm256_and_si256(h_hi, bit4));
      const __m256i lo = _mm256_maddubs_epi16(q_lo, load256(q8 + 64 * c));
      const __m256i hi = _mm256_maddubs_epi16(q_hi, load256(q8 + 64 * c + 32));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(lo, _mm256_shuffle_epi8(scales, broadcast16_mask(2 * c))));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(hi, _mm256_shuffle_epi8(scales, broadcast16_mask(2 * c + 1))));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(blk) * a_d), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc) - hsum128(acc_min);
}

float dot_q6_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 210;
    prefetch_q6_K_ahead(blk);  // past this row's end into the next rows
    const uint8_t* act = a + b * 292;
    const float d = fp16(blk + 208) * load_f32(act);  // as ggml: fp16 d times the Q8_K d
    const __m128i sc8 = load128(blk + 192);
    // 32 * sum_j scale_j * bsum_j, in 8 int32 lanes.
    __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(),
                                    _mm256_slli_epi32(_mm256_madd_epi16(load256(act + 260), _mm256_cvtepi8_epi16(sc8)), 5));
    const __m256i scales = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, even_odd));
    const uint8_t* q8 = act + 4;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i ql[2] = {load256(blk + 64 * h), load256(blk + 64 * h + 32)};
      const __m256i qh = load256(blk + 128 + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i q = q6_K_codes(ql[k % 2], qh, k);
        const __m256i x = load256(q8 + 128 * h + 32 * k);
        const __m256i scale = _mm256_shuffle_epi8(scales, broadcast16_mask(4 * h + k));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), scale));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc);
}

// An empty asm that the compiler must assume changes v. GCC's reassociation otherwise adds each
// token's 8 group products of a block as a tree, all 64 products live at once (spilled).
void pin(__m256i& v) { __asm__("" : "+x"(v)); }

// This set's Q6_K prefill tile (the AVX-512 set has its own on 512-bit vpdpbusd,
// kernels_avx512vnni_qdot.cpp): unpacking a whole block at once would take 8 code and 8 scale
// vectors, all 16 ymm registers, so here each 32-element group is unpacked as the row dot does
// it, just before use, and met at once by all N tokens, whose int32 sums stay in registers (N
// sums, the codes, the scale pair, a product, the scales: up to 8 tokens in one pass over the
// row, where a whole-block tile of 4 tokens spilled and read each row twice for 8 tokens). Each token's
// integer sums are the row dot's (exact; added in another order) and it takes the dot's float
// steps, so tile and dot agree bit for bit.
template <int N>
void tile_q6_K_by_group(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) {
  const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  __m256 acc[N];
  for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 210;
    prefetch_q6_K_ahead(blk);  // a decode step of several sequences streams the head, as decode does
    const uint8_t* act = a + b * 292;
    const __m128i sc8 = load128(blk + 192);
    // -32 * sum_j scale_j * bsum_j, the row dot's integers (32 * scale fits int16, a pair of
    // products 2 * 4096 * 16 * 127 int32), in one vpmaddwd per token.
    const __m256i sc16_m32 = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(_mm256_cvtepi8_epi16(sc8), 5));
    __m256i isum[N];
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) isum[j] = _mm256_madd_epi16(load256(act + j * as + 260), sc16_m32);
    const __m256i scales = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, even_odd));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        // The codes of elements 128h + 32k + l and their scale pair.
        const __m256i q = q6_K_codes(load256(blk + 64 * h + 32 * (k % 2)), load256(blk + 128 + 32 * h), k);
        const __m256i scale = _mm256_shuffle_epi8(scales, broadcast16_mask(4 * h + k));
        const uint8_t* q8 = act + 4 + 128 * h + 32 * k;
#pragma GCC unroll 8
        for (int j = 0; j < N; ++j) {
          isum[j] = _mm256_add_epi32(isum[j], _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(q8 + j * as)), scale));
          pin(isum[j]);
        }
      }
    }
    const float wd = fp16(blk + 208);
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      const float d = wd * load_f32(act + j * as);  // as ggml: fp16 d times the Q8_K d
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum[j]), acc[j]);
    }
  }
  for (int j = 0; j < N; ++j) out[j] = hsum(acc[j]);
}

float dot_q2_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  const __m128i low4 = _mm_set1_epi8(0x0f);
  const __m256i low2 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 84;
    const uint8_t* act = a + b * 292;
    const float a_d = load_f32(act);
    const __m128i sc_mn = load128(blk);
    const __m128i mins = _mm_and_si128(_mm_srli_epi16(sc_mn, 4), low4);
    const __m256i min_terms = _mm256_madd_epi16(load256(act + 260), _mm256_cvtepu8_epi16(mins));
    acc_min = _mm256_fmadd_ps(_mm256_set1_ps(a_d * fp16(blk + 82)), _mm256_cvtepi32_ps(min_terms), acc_min);
    const __m256i scales = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_and_si128(sc_mn, low4), even_odd));
    const uint8_t* q8 = act + 4;
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(blk + 16 + 32 * h);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i codes = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), low2);
        const __m256i p = _mm256_maddubs_epi16(codes, load256(q8 + 128 * h + 32 * j));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(scales, broadcast16_mask(4 * h + j))));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(a_d * fp16(blk + 80)), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc) - hsum(acc_min);
}

float dot_q3_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  const __m256i low2 = _mm256_set1_epi8(3);
  const __m256i bit2 = _mm256_set1_epi8(4);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 110;
    const uint8_t* act = a + b * 292;
    const __m128i sc8 = q3_K_scales(blk + 96);
    // 4 * sum_s scale_s * bsum_s, subtracted.
    __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(),
                                    _mm256_slli_epi32(_mm256_madd_epi16(load256(act + 260), _mm256_cvtepi8_epi16(sc8)), 2));
    const __m256i scales = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, even_odd));
    const __m256i hm = load256(blk);
    const uint8_t* q8 = act + 4;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(blk + 32 + 32 * h);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        // Bit 4h + j of hmask to bit 2: shifts within 16-bit lanes keep bit 2 of each byte its own.
        const int bit = 4 * h + j;
        const __m256i high = bit <= 2 ? _mm256_slli_epi16(hm, 2 - bit) : _mm256_srli_epi16(hm, bit - 2);
        const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * j), low2), _mm256_and_si256(high, bit2));
        const __m256i p = _mm256_maddubs_epi16(u, load256(q8 + 128 * h + 32 * j));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(scales, broadcast16_mask(bit))));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(blk + 108) * load_f32(act)), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc);
}

float dot_iq4_xs_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  const __m256i table = iq4_table();
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 136;
    const uint8_t* act = a + b * 292;
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
    const uint8_t* q8 = act + 4;
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const Unpacked32 v = signed_weights(_mm256_shuffle_epi8(table, nibbles32(blk + 8 + 16 * s)));
      const __m256i p = signed_pairs(v, load256(q8 + 32 * s));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(scales, broadcast16_mask(s))));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(blk) * load_f32(act)), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc);
}

// A 32-element format's tile as tile_k (kernels_x86_qdot_common.h) takes it.
template <class T>
struct Blocks32 {
  template <int N>
  struct K {
    static void run(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) { tile_blocks32<T, N>(n, w, a, as, out); }
  };
};

template <int N>
struct Q6_KGroupTile {
  static void run(int64_t n, const uint8_t* w, const uint8_t* a, int64_t as, float* out) { tile_q6_K_by_group<N>(n, w, a, as, out); }
};

}  // namespace

namespace {

// One block of 32 activations as ggml's reference Q8_0/Q8_1 quantizer, bit for bit: amax (a max
// of finite floats, so in any order), d = amax / 127, id = 1 / d, q = round(x * id) with halves
// away from zero (trunc(v + copysign(0.49999997, v)) equals roundf for |v| < 2^23; here |v| <=
// 127). Blocks holding inf or NaN, or whose 1 / d overflows, go to the reference.
bool quantize_q8_block(const float* x, uint8_t* q, float* d_out, int* sum_out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 inf = _mm256_set1_ps(INFINITY);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  int finite = 0xff;
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    const __m256 a = _mm256_andnot_ps(sign, v[i]);
    finite &= _mm256_movemask_ps(_mm256_cmp_ps(a, inf, _CMP_LT_OQ));
    amax = _mm256_max_ps(amax, a);
  }
  if (finite != 0xff) return false;
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float d = _mm_cvtss_f32(m) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  if (!(id < INFINITY)) return false;
  const __m256 idv = _mm256_set1_ps(id);
  const __m256 half = _mm256_set1_ps(0.49999997f);
  __m256i r[4];
  __m256i sum = _mm256_setzero_si256();
  for (int i = 0; i < 4; ++i) {
    const __m256 p = _mm256_mul_ps(v[i], idv);
    const __m256 rounded = _mm256_round_ps(_mm256_add_ps(p, _mm256_or_ps(half, _mm256_and_ps(sign, p))),
                                           _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    r[i] = _mm256_cvttps_epi32(rounded);
    sum = _mm256_add_epi32(sum, r[i]);
  }
  // int32 -> int8 with saturation (never reached: |q| <= 127), then undo the lane interleave.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  const __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  *sum_out = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1)));
  *d_out = d;
  return true;
}

// One 256-element Q8_K block as ggml's quantize_row_q8_K_ref, bit for bit: max is the first
// element of largest magnitude (with its sign), iscale = -127 / max, q = min(127, round(iscale
// * x)) with halves to even (ggml's nearest_int), the 16-element sums, d = 1 / iscale. Blocks
// holding inf or NaN, or whose iscale overflows, go to the reference.
bool quantize_q8_K_block(const float* x, uint8_t* dst) {
  constexpr int kVecs = 32;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 inf = _mm256_set1_ps(INFINITY);
  __m256 amax_v = _mm256_setzero_ps();
  int finite = 0xff;
  for (int i = 0; i < kVecs; ++i) {
    const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i));
    finite &= _mm256_movemask_ps(_mm256_cmp_ps(a, inf, _CMP_LT_OQ));
    amax_v = _mm256_max_ps(amax_v, a);
  }
  if (finite != 0xff) return false;
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax_v), _mm256_extractf128_ps(amax_v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float amax = _mm_cvtss_f32(m);
  if (amax == 0.0f) {
    std::memset(dst, 0, 292);
    return true;
  }
  float max = 0.0f;
  const __m256 amax_all = _mm256_set1_ps(amax);
  for (int i = 0; i < kVecs; ++i) {
    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)), amax_all, _CMP_EQ_OQ));
    if (hit != 0) {
      max = x[8 * i + __builtin_ctz(static_cast<unsigned>(hit))];
      break;
    }
  }
  const float iscale = -127.0f / max;
  if (!(iscale > -INFINITY && iscale < INFINITY)) return false;  // a subnormal max
  const __m256 is = _mm256_set1_ps(iscale);
  const __m256i top = _mm256_set1_epi32(127);
  auto* qs = reinterpret_cast<int8_t*>(dst + 4);
  for (int g = 0; g < 8; ++g) {  // 32 elements: 4 vectors
    __m256i r[4];
    for (int i = 0; i < 4; ++i) {
      const __m256 p = _mm256_mul_ps(is, _mm256_loadu_ps(x + 32 * g + 8 * i));
      r[i] = _mm256_min_epi32(top, _mm256_cvtps_epi32(_mm256_round_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    }
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * g),
                        _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    for (int h = 0; h < 2; ++h) {  // the two 16-element sums
      const __m256i s8 = _mm256_add_epi32(r[2 * h], r[2 * h + 1]);
      const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
      const __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
      const auto sum = static_cast<int16_t>(_mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1))));
      std::memcpy(dst + 260 + 2 * (2 * g + h), &sum, 2);
    }
  }
  const float d = 1.0f / iscale;
  std::memcpy(dst, &d, 4);
  return true;
}

void store_fp16(uint8_t* dst, float v) {
  // As core/fp16.h's fp32_to_fp16 (vcvtps2ph; clang's _cvtss_sh is a C compound literal).
  const auto h = static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT), 0));
  std::memcpy(dst, &h, 2);
}

}  // namespace

bool quantize_act_row(GgmlType act_type, const float* x, int64_t n, uint8_t* dst) {
  if (act_type == GgmlType::kQ8_K) {
    for (int64_t b = 0; b < n / 256; ++b) {
      if (!quantize_q8_K_block(x + 256 * b, dst + 292 * b)) quant::q8_K_quantize_block(x + 256 * b, dst + 292 * b);
    }
    return true;
  }
  if (act_type != GgmlType::kQ8_0 && act_type != GgmlType::kQ8_1) return false;
  const bool q8_1 = act_type == GgmlType::kQ8_1;
  const int64_t block_bytes = q8_1 ? 36 : 34;
  for (int64_t b = 0; b < n / 32; ++b) {
    uint8_t* out = dst + b * block_bytes;
    float d = 0.0f;
    int sum = 0;
    if (!quantize_q8_block(x + 32 * b, out + (q8_1 ? 4 : 2), &d, &sum)) {
      (q8_1 ? quant::q8_1_quantize_block : quant::q8_0_quantize_block)(x + 32 * b, out);
      continue;
    }
    store_fp16(out, d);
    if (q8_1) store_fp16(out + 2, static_cast<float>(sum) * d);
  }
  return true;
}

QuantDotFn quant_dot(GgmlType type) {
  if (quant::vec_dot_fn(type) == nullptr) return nullptr;  // no twin, no dot
  switch (type) {
    case GgmlType::kQ4_0: return dot_blocks32<Q4_0>;
    case GgmlType::kQ4_1: return dot_blocks32<Q4_1>;
    case GgmlType::kQ5_0: return dot_blocks32<Q5_0>;
    case GgmlType::kQ5_1: return dot_blocks32<Q5_1>;
    case GgmlType::kQ8_0: return dot_blocks32<Q8_0>;
    case GgmlType::kIQ4_NL: return dot_blocks32<IQ4_NL>;
    case GgmlType::kQ2_K: return dot_q2_K_q8_K;
    case GgmlType::kQ3_K: return dot_q3_K_q8_K;
    case GgmlType::kQ4_K: return dot_q4_K_q8_K;
    case GgmlType::kQ5_K: return dot_q5_K_q8_K;
    case GgmlType::kQ6_K: return dot_q6_K_q8_K;
    case GgmlType::kIQ4_XS: return dot_iq4_xs_q8_K;
    default: return quant::vec_dot_fn(type);
  }
}

QuantTileFn quant_tile(GgmlType type) {
  if (quant::vec_dot_fn(type) == nullptr) return nullptr;
  switch (type) {
    case GgmlType::kQ4_0: return tile_k<Blocks32<Q4_0>::K>;
    case GgmlType::kQ4_1: return tile_k<Blocks32<Q4_1>::K>;
    case GgmlType::kQ5_0: return tile_k<Blocks32<Q5_0>::K>;
    case GgmlType::kQ5_1: return tile_k<Blocks32<Q5_1>::K>;
    case GgmlType::kQ8_0: return tile_k<Blocks32<Q8_0>::K>;
    case GgmlType::kIQ4_NL: return tile_k<Blocks32<IQ4_NL>::K>;
    case GgmlType::kQ2_K: return tile_k<Q2_KTile>;
    case GgmlType::kQ3_K: return tile_k<Q3_KTile>;
    case GgmlType::kQ4_K: return tile_k<Q4_KTile>;
    case GgmlType::kQ5_K: return tile_k<Q5_KTile>;
    case GgmlType::kQ6_K: return tile_k<Q6_KGroupTile, 8>;
    case GgmlType::kIQ4_XS: return tile_k<IQ4_XSTile>;
    default: return nullptr;
  }
}

}  // namespace bitnet::cpu::avx2
