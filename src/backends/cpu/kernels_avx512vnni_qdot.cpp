// AVX-512 VNNI set, quantized-activation row dots (KernelSet::quant_dot) and prefill tiles
// (KernelSet::quant_tile): the 32-element formats on 256-bit vpdpbusd (below), the K-quants and
// IQ4_XS with the tiles shared with the AVX2 set (kernels_x86_qdot_common.h) on vpdpwssd, 8
// tokens per pass over a row's blocks where the AVX2 set takes 4 (32 registers hold the
// unpacked block and 8 accumulators: Q3_K..Q5_K and IQ4_XS tiles 19-55% faster on Zen 4); the
// row dots of those types are the AVX2 set's (kernels_avx2_qdot.cpp), which the tiles here
// equal bit for bit. Q6_K has a row dot and tile of this set's own, on 512-bit vpdpbusd with one
// float step per block (below). (An earlier 512-bit Q6_K row dot, with vpmulld by the sub-block
// scales and the AVX2 dot's 8 float lanes, ran 10% slower than the AVX2 one on Zen 4, whose
// 512-bit instructions are two 256-bit halves.)
//
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 headers (bug 105593)
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels_avx2.h"
#include "backends/cpu/kernels_avx512vnni.h"
#define BITNET_X86_QDOT_VPDPWSSD 1  // the shared K-quant tiles on vpdpwssd
#include "backends/cpu/kernels_x86_qdot_common.h"
#include "backends/cpu/kernels_avx512_reduce.h"

namespace bitnet::cpu::avx512vnni {

namespace {

// ---- 32-element blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) against Q8_0 / Q8_1 ----
//
// Row dot and tile share their float steps, so they agree bit for bit: the blocks go in groups
// of 8 (the last may be short), each group's 8 exact integer block sums in the 8 lanes of one
// vector (0 past the row's end), converted and multiplied by d_w * d_a in one FMA per group; a
// min (Q4_1, Q5_1) adds m_w * s_a per group into a second vector; the lanes are summed at the end
// (hsum). Only how the integer sums are made differs:
// - row dot (decode): one 256-bit vpdpbusd per block, unsigned codes (Q4_1, Q5_1) against the
//   int8 activations, signed weights (Q8_0, the IQ4 table values, Q4_0 / Q5_0 codes made signed,
//   q - 8 / q - 16) as |w| against x carrying w's sign (vpsignb; |x| <= 127 as ggml's
//   quantizers write it), the 8 blocks' lanes then reduced with horizontal adds (reduce8);
// - tile (prefill, rows x up to 16 tokens): the tokens' activations are laid out once per call
//   (lay_out_acts: per group, the 8 blocks' int8 transposed by 32-bit words, so that vector i
//   lane k holds elements 4i..4i+3 of block k), and each weight row's group of codes is
//   transposed alike once for all tokens; 8 vpdpbusd then leave block k's sum in lane k with no
//   horizontal reduction. The codes are unsigned (c = w + 2^kShift: Q4_0 / Q5_0 codes as
//   stored, Q8_0 and IQ4_NL values + 128), so the dot with the signed activations is taken once
//   and 2^kShift times the activation block sum, laid out with the activations, is subtracted.
//   All integer sums are exact in int32 (at most 32 * 255 * 128 per block).

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The little-endian uint32 of fifth bits at p -> 32 bytes, byte j = 0x10 where bit j is set.
__m256i fifth_bits32(const uint8_t* p) { return _mm256_maskz_mov_epi8(load_u32(p), _mm256_set1_epi8(0x10)); }

// A weight block unpacked once: u the bytes that meet the activations in vpdpbusd (unsigned), s
// the signs they carry over to the activations (signed formats).
struct W32 {
  __m256i u, s;
};
W32 signed_w(__m256i w) { return {_mm256_abs_epi8(w), w}; }

// kW, kA: block bytes; kMin: a min term (Q8_1's s times the weight's m); kSigned: the row dot's
// sign trick. unpack: the row dot's form. codes: the tile's, unsigned bytes c with the weight =
// c - 2^kShift (kShift < 0: the weight = c), so that a block's dot is the dot of c with the
// activations minus 2^kShift times their sum.
struct Q4_0 {
  static constexpr int64_t kW = 18, kA = 34;
  static constexpr bool kMin = false, kSigned = true;
  static constexpr int kShift = 3;
  static W32 unpack(const uint8_t* w) { return signed_w(_mm256_sub_epi8(codes(w), _mm256_set1_epi8(8))); }
  static __m256i codes(const uint8_t* w) { return nibbles32(w + 2); }
};
struct Q5_0 {
  static constexpr int64_t kW = 22, kA = 34;
  static constexpr bool kMin = false, kSigned = true;
  static constexpr int kShift = 4;
  // q - 16 = the nibble where the fifth bit is set, the nibble with bits 4-7 set (nibble - 16
  // as int8) where it is clear: one masked move.
  static W32 unpack(const uint8_t* w) {
    const __m256i x = _mm256_srlv_epi32(_mm256_broadcastsi128_si256(load128(w + 6)), _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    const __m256i nib = _mm256_and_si256(x, _mm256_set1_epi8(0x0f));
    const __m256i neg = _mm256_or_si256(x, _mm256_set1_epi8(static_cast<char>(0xf0)));
    return signed_w(_mm256_mask_mov_epi8(neg, load_u32(w + 2), nib));
  }
  static __m256i codes(const uint8_t* w) { return _mm256_or_si256(nibbles32(w + 6), fifth_bits32(w + 2)); }
};
struct Q8_0 {
  static constexpr int64_t kW = 34, kA = 34;
  static constexpr bool kMin = false, kSigned = true;
  static constexpr int kShift = 7;
  static W32 unpack(const uint8_t* w) { return signed_w(load256(w + 2)); }
  static __m256i codes(const uint8_t* w) { return _mm256_xor_si256(load256(w + 2), _mm256_set1_epi8(static_cast<char>(0x80))); }
};
struct IQ4_NL {
  static constexpr int64_t kW = 18, kA = 34;
  static constexpr bool kMin = false, kSigned = true;
  static constexpr int kShift = 7;
  static W32 unpack(const uint8_t* w) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
    return signed_w(_mm256_shuffle_epi8(table, nibbles32(w + 2)));
  }
  // kvalues_iq4nl + 128.
  static __m256i codes(const uint8_t* w) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, static_cast<char>(129),
                                                                     static_cast<char>(141), static_cast<char>(153),
                                                                     static_cast<char>(166), static_cast<char>(181),
                                                                     static_cast<char>(197), static_cast<char>(217),
                                                                     static_cast<char>(241)));
    return _mm256_shuffle_epi8(table, nibbles32(w + 2));
  }
};
struct Q4_1 {
  static constexpr int64_t kW = 20, kA = 36;
  static constexpr bool kMin = true, kSigned = false;
  static constexpr int kShift = -1;
  static W32 unpack(const uint8_t* w) { return {codes(w), _mm256_setzero_si256()}; }
  static __m256i codes(const uint8_t* w) { return nibbles32(w + 4); }
};
struct Q5_1 {
  static constexpr int64_t kW = 24, kA = 36;
  static constexpr bool kMin = true, kSigned = false;
  static constexpr int kShift = -1;
  static W32 unpack(const uint8_t* w) { return {codes(w), _mm256_setzero_si256()}; }
  static __m256i codes(const uint8_t* w) { return _mm256_or_si256(nibbles32(w + 8), fifth_bits32(w + 4)); }
};

template <class T>
constexpr int64_t kActQs = T::kMin ? 4 : 2;  // the activation's 32 int8 in its block (Q8_1, Q8_0)

template <class T>
__m256i block_dot(const W32& w, const uint8_t* ab) {
  const __m256i x = load256(ab + kActQs<T>);
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w.u, T::kSigned ? _mm256_sign_epi8(x, w.s) : x);
}

// Eight blocks' int32 lanes (v[k]: block k's) -> block k's sum in lane k.
__m256i reduce8(const __m256i (&v)[8]) {
  const __m256i q0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i q1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  // q0: blocks 0-3's sums of lanes 0-3 in the low half, of lanes 4-7 in the high half; q1: 4-7.
  return _mm256_add_epi32(_mm256_blend_epi32(q0, q1, 0xf0), _mm256_permute2x128_si256(q0, q1, 0x21));
}

// 8 x 8 int32 transposed in place: v[i] lane k <- v[k] lane i.
[[gnu::always_inline]] inline void transpose8(__m256i (&v)[8]) {
  __m256i t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_epi32(v[k], v[k + 1]);
    t[k + 1] = _mm256_unpackhi_epi32(v[k], v[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = _mm256_unpacklo_epi64(t[k], t[k + 2]);
    u[k + 1] = _mm256_unpackhi_epi64(t[k], t[k + 2]);
    u[k + 2] = _mm256_unpacklo_epi64(t[k + 1], t[k + 3]);
    u[k + 3] = _mm256_unpackhi_epi64(t[k + 1], t[k + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
    v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
  }
}

// The 32-bit words at p + k * stride for k < count (kFull: count = 8), 0 beyond count. A block's
// first word: its fp16 d, and Q8_1's s or a min's m (or the first codes) above it.
template <bool kFull>
__m256i gather8_u32(const uint8_t* p, int64_t stride, int count) {
  if constexpr (kFull) {
    // vmovd + vpinsrd from memory (built in general registers, the vector went through the
    // stack; vpgatherdd ran 20% slower in the row dots).
    const __m128i lo = _mm_insert_epi32(_mm_insert_epi32(_mm_insert_epi32(_mm_cvtsi32_si128(load_i32(p)), load_i32(p + stride), 1),
                                                         load_i32(p + 2 * stride), 2),
                                        load_i32(p + 3 * stride), 3);
    const uint8_t* q = p + 4 * stride;
    const __m128i hi = _mm_insert_epi32(_mm_insert_epi32(_mm_insert_epi32(_mm_cvtsi32_si128(load_i32(q)), load_i32(q + stride), 1),
                                                         load_i32(q + 2 * stride), 2),
                                        load_i32(q + 3 * stride), 3);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  } else {
    // Lane by lane into zeros (an array on the stack read back as a vector stalls the load).
    __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
    switch (count) {
      case 7: hi = _mm_insert_epi32(hi, load_i32(p + 6 * stride), 2); [[fallthrough]];
      case 6: hi = _mm_insert_epi32(hi, load_i32(p + 5 * stride), 1); [[fallthrough]];
      case 5: hi = _mm_insert_epi32(hi, load_i32(p + 4 * stride), 0); [[fallthrough]];
      case 4: lo = _mm_insert_epi32(lo, load_i32(p + 3 * stride), 3); [[fallthrough]];
      case 3: lo = _mm_insert_epi32(lo, load_i32(p + 2 * stride), 2); [[fallthrough]];
      case 2: lo = _mm_insert_epi32(lo, load_i32(p + stride), 1); [[fallthrough]];
      default: lo = _mm_insert_epi32(lo, load_i32(p), 0); break;
    }
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  }
}
__m256 fp16_lo(__m256i v) { return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(v)); }
__m256 fp16_hi(__m256i v) { return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(v, 16))); }

// The float steps that the row dot and the tile share, per group of (up to) 8 blocks: the
// blocks' exact integer sums (lane k: block k; 0 past the row's last block) converted together
// and multiplied by d_w d_a in one FMA; formats with a min add m_w s_a likewise. The result:
// the sum of acc's lanes, plus acc_m's.
struct GroupScales {
  __m256 d, m;  // the weights' d and m (formats with a min)
};
template <class T>
void group_step(__m256i isum, const GroupScales& w, __m256 a_d, __m256 a_s, __m256& acc, __m256& acc_m) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(w.d, a_d), acc);
  if constexpr (T::kMin) acc_m = _mm256_fmadd_ps(w.m, a_s, acc_m);
}
template <class T, bool kFull>
GroupScales weight_scales(const uint8_t* wb, int kb) {
  const __m256i v = gather8_u32<kFull>(wb, T::kW, kb);
  return {fp16_lo(v), T::kMin ? fp16_hi(v) : _mm256_setzero_ps()};
}
template <class T>
float finish(__m256 acc, __m256 acc_m) {
  return T::kMin ? hsum(acc) + hsum(acc_m) : hsum(acc);
}

// The row dot (decode): per group the blocks unpacked and dotted one by one (the sign trick
// for signed weights), reduced with horizontal adds.
template <class T, bool kFull>
void dot_group(const uint8_t* wb, const uint8_t* ab, int kb, __m256& acc, __m256& acc_m) {
  __m256i v[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) v[k] = kFull || k < kb ? block_dot<T>(T::unpack(wb + k * T::kW), ab + k * T::kA) : _mm256_setzero_si256();
  const __m256i a = gather8_u32<kFull>(ab, T::kA, kb);
  group_step<T>(reduce8(v), weight_scales<T, kFull>(wb, kb), fp16_lo(a), fp16_hi(a), acc, acc_m);
}

template <class T>
float dot_blocks32(int64_t n, const uint8_t* w, const uint8_t* a) {
  const int64_t nb = n / 32;
  __m256 acc = _mm256_setzero_ps(), acc_m = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    prefetch_row_ahead(w + b * T::kW, 8 * T::kW);  // decode streams the rows (a Q8_0 head, a model's weights)
    dot_group<T, true>(w + b * T::kW, a + b * T::kA, 8, acc, acc_m);
  }
  if (b < nb) dot_group<T, false>(w + b * T::kW, a + b * T::kA, static_cast<int>(nb - b), acc, acc_m);
  return finish<T>(acc, acc_m);
}

// The tile's activations, laid out once per call for all its rows: per token and group of 8
// blocks, the 8 blocks' int8 transposed by 32-bit words (vector i, lane k: elements 4i..4i+3 of
// block k; zeros past the last block), so that 8 vpdpbusd against the weights transposed alike
// leave block k's dot in lane k with no horizontal reduction; the blocks' sums times 2^kShift
// (signed-weight formats), and their d (and Q8_1's s) as floats.
struct alignas(32) Lanes8 {
  uint32_t v[8];
};
struct TileActs {
  std::vector<Lanes8> x;     // [n_act][n_groups][8]
  std::vector<Lanes8> corr;  // [n_act][n_groups]
  std::vector<Lanes8> d, s;  // [n_act][n_groups] floats
};
__m256i load_lanes(const Lanes8& l) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(l.v)); }
void store_lanes(Lanes8& l, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(l.v), v); }

template <class T>
void lay_out_acts(int64_t nb, const uint8_t* act, int64_t as, int n_act, TileActs& t) {
  const int64_t n_groups = (nb + 7) / 8;
  const auto size = static_cast<size_t>(n_act * n_groups);
  if (t.d.size() < size) {
    t.x.resize(8 * size);
    t.corr.resize(size);
    t.d.resize(size);
    t.s.resize(size);
  }
  const __m256i ones = _mm256_set1_epi8(1);
  for (int j = 0; j < n_act; ++j) {
    for (int64_t g = 0; g < n_groups; ++g) {
      const int kb = static_cast<int>(std::min<int64_t>(8, nb - 8 * g));
      const uint8_t* ab = act + j * as + 8 * g * T::kA;
      const size_t i = static_cast<size_t>(j * n_groups + g);
      __m256i v[8];
      for (int k = 0; k < 8; ++k) v[k] = k < kb ? load256(ab + k * T::kA + kActQs<T>) : _mm256_setzero_si256();
      transpose8(v);
      __m256i sum = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        store_lanes(t.x[8 * i + static_cast<size_t>(k)], v[k]);
        if constexpr (T::kShift >= 0) sum = _mm256_dpbusd_epi32(sum, ones, v[k]);
      }
      if constexpr (T::kShift >= 0) store_lanes(t.corr[i], _mm256_slli_epi32(sum, T::kShift));
      const __m256i ds = kb == 8 ? gather8_u32<true>(ab, T::kA, 8) : gather8_u32<false>(ab, T::kA, kb);
      store_lanes(t.d[i], _mm256_castps_si256(fp16_lo(ds)));
      if constexpr (T::kMin) store_lanes(t.s[i], _mm256_castps_si256(fp16_hi(ds)));
    }
  }
}

// One group of the tile: the weight row's codes transposed once, then per token 8 vpdpbusd (two
// chains) from its laid-out activations, and the d step of group_step (the min step follows in
// tile_rows).
template <class T, int N, bool kFull>
void tile_group(const uint8_t* wb, int kb, const TileActs& t, size_t i0, size_t n_groups, __m256 (&acc)[N]) {
  __m256i c[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) c[k] = kFull || k < kb ? T::codes(wb + k * T::kW) : _mm256_setzero_si256();
  transpose8(c);
  const __m256 wd = weight_scales<T, kFull>(wb, kb).d;
#pragma GCC unroll 16
  for (int j = 0; j < N; ++j) {
    const size_t i = static_cast<size_t>(j) * n_groups + i0;
    const Lanes8* x = t.x.data() + 8 * i;
    __m256i s0 = T::kShift >= 0 ? _mm256_sub_epi32(_mm256_setzero_si256(), load_lanes(t.corr[i])) : _mm256_setzero_si256();
    __m256i s1 = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < 8; k += 2) {
      s0 = _mm256_dpbusd_epi32(s0, c[k], load_lanes(x[k]));
      s1 = _mm256_dpbusd_epi32(s1, c[k + 1], load_lanes(x[k + 1]));
    }
    const __m256 a_d = _mm256_castsi256_ps(load_lanes(t.d[i]));
    acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), _mm256_mul_ps(wd, a_d), acc[j]);
  }
}

// Rows against N tokens. Formats with a min take the m_w s_a steps in a second pass over the
// groups, after the d sums are reduced (fewer live registers; each accumulator sees the same
// steps in the same order as in the row dot, so the sums are the same).
template <class T, int N>
void tile_rows(int64_t n, const uint8_t* w, int64_t w_row_bytes, int64_t n_rows, const uint8_t* act, int64_t as, float* y,
               int64_t ys) {
  const int64_t nb = n / 32;
  const auto n_groups = static_cast<size_t>((nb + 7) / 8);
  const auto n_full = static_cast<size_t>(nb / 8);
  thread_local TileActs t;
  lay_out_acts<T>(nb, act, as, N, t);
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = w + r * w_row_bytes;
    const int kb_last = static_cast<int>(nb - 8 * static_cast<int64_t>(n_full));
    __m256 acc[N];
    for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
    for (size_t g = 0; g < n_full; ++g) tile_group<T, N, true>(row + 8 * g * T::kW, 8, t, g, n_groups, acc);
    if (n_full < n_groups) tile_group<T, N, false>(row + 8 * n_full * T::kW, kb_last, t, n_full, n_groups, acc);
    float sum_d[N];
    for (int j = 0; j < N; ++j) sum_d[j] = hsum(acc[j]);
    if constexpr (T::kMin) {
      for (int j = 0; j < N; ++j) acc[j] = _mm256_setzero_ps();
      for (size_t g = 0; g < n_groups; ++g) {
        const uint8_t* wb = row + 8 * g * T::kW;
        const __m256 wm = g < n_full ? weight_scales<T, true>(wb, 8).m : weight_scales<T, false>(wb, kb_last).m;
        for (int j = 0; j < N; ++j) {
          acc[j] = _mm256_fmadd_ps(wm, _mm256_castsi256_ps(load_lanes(t.s[static_cast<size_t>(j) * n_groups + g])), acc[j]);
        }
      }
      for (int j = 0; j < N; ++j) y[j * ys + r] = sum_d[j] + hsum(acc[j]);
    } else {
      for (int j = 0; j < N; ++j) y[j * ys + r] = sum_d[j];
    }
  }
}

template <class T>
void tile_of(int64_t n, const uint8_t* w, int64_t w_row_bytes, int64_t n_rows, const uint8_t* act, int64_t as, int n_act,
             float* y, int64_t ys) {
  switch (n_act) {
    case 1: tile_rows<T, 1>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 2: tile_rows<T, 2>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 3: tile_rows<T, 3>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 4: tile_rows<T, 4>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 5: tile_rows<T, 5>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 6: tile_rows<T, 6>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 7: tile_rows<T, 7>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 8: tile_rows<T, 8>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 9: tile_rows<T, 9>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 10: tile_rows<T, 10>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 11: tile_rows<T, 11>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 12: tile_rows<T, 12>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 13: tile_rows<T, 13>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 14: tile_rows<T, 14>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    case 15: tile_rows<T, 15>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
    default: tile_rows<T, 16>(n, w, w_row_bytes, n_rows, act, as, y, ys); break;
  }
}

// ---- Q6_K on 512-bit vpdpbusd: row dot and tile ----
//
// Both take each block's sum exactly in int32 and make one float step per block and token,
// acc += float(isum) * (d_w * d_a), in block order: the tile keeps 8 tokens' accumulators in the
// lanes of one vector, the row dot one in a scalar, so they agree bit for bit (the 8-client =
// 1-client serve test rests on that). The row dot, per block: the codes u_i of elements 64i ..
// 64i+63 (natural order) meet 64 activations in one vpdpbusd, lane p holding elements 64i + 4p
// .. +3 (|sum| <= 4 * 63 * 128, an int16); vpackssdw packs the sums of u_{2h} and u_{2h+1}
// into words, exactly (128-bit chunk c: lanes 4c .. 4c+3 of u_{2h}, of sub-block 8h + c, then
// those of u_{2h+1}, sub-block 8h + 4 + c), and one vpdpwssd multiplies the pairs of words by
// their sub-block's scale; one more adds -32 sc_g bsum_g for the 16 sub-blocks (codes are q +
// 32). (A vpdpwssd per vector, each sum against its scale and 0, was 5-12% slower in cache on
// Zen 4: two more VNNI instructions and two more permutes per block.) The
// tile arranges the block otherwise (below), then sums the 8 tokens' vectors (of two rows)
// in one transpose-and-add (fold_pair, finish_sums: lane_sums8's steps) and converts,
// multiplies and adds them in one instruction each, where folding and converting each
// token's vector by itself cost 6 instructions per token and block.
//
// Decode: ql[64h .. 64h+63] holds the low nibbles of elements 128h .. +63 and the high nibbles
// of 128h + 64 .. +127, both in order; the high bit pairs of element 128h + 32k + l are bits
// 2k, 2k+1 of qh[32h + l]. So with qh's 32 bytes in both 256-bit halves, shifting the 16-bit
// words by 4 | 2 (left) gives u_{2h}'s pairs at bits 4-5, by 0 | 2 (right) u_{2h+1}'s.

// One weight block ready for vpdpbusd.
struct Q6_KBlock {
  __m512i u[4];      // codes 0..63 of elements 64i .. 64i+63
  __m512i scale[2];  // chunk c: 4 words of the scale of sub-block 8h + c, 4 of 8h + 4 + c
  __m512i neg32_sc;  // words 0..15: -32 times the 16 scales; words 16..31: 0
  float d;
};

class Q6_KUnpacker {
 public:
  Q6_KUnpacker() {
    for (int h = 0; h < 2; ++h) {
      alignas(64) int16_t idx[32] = {};
      for (int c = 0; c < 4; ++c) {
        for (int k = 0; k < 8; ++k) idx[8 * c + k] = static_cast<int16_t>(8 * h + (k < 4 ? 0 : 4) + c);
      }
      scale_index_[h] = _mm512_load_si512(idx);
    }
  }
  [[gnu::always_inline]] Q6_KBlock operator()(const uint8_t* blk) const {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    const __m512i shift_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shift_hi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    Q6_KBlock b;
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(load256(blk + 128 + 32 * h));
      b.u[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_sllv_epi16(qh, shift_lo), bits45));
      b.u[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                       _mm512_and_si512(_mm512_srlv_epi16(qh, shift_hi), bits45));
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(blk + 192));
    for (int h = 0; h < 2; ++h) b.scale[h] = _mm512_permutexvar_epi16(scale_index_[h], _mm512_zextsi256_si512(sc16));
    b.neg32_sc = _mm512_zextsi256_si512(_mm256_mullo_epi16(sc16, _mm256_set1_epi16(-32)));
    b.d = fp16(blk + 208);
    return b;
  }

 private:
  __m512i scale_index_[2];
};

// A lane-order block's 4 code vectors (positions 64i .. 64i+63) from its three planes
// (q6_K_lanes.h): vectors 0-2 are the planes' low 6 bits; vector 3 takes its bit pairs from
// bits 6-7 of planes 0, 1, 2, moved down by 16-bit shifts of 6, 4 and 2 and selected into bits
// 0-1, 2-3 and 4-5 (plane 2 masked first, so its shift leaves bits 6-7 clear; the other
// shifts' carries from the word's high byte land in bits the selects drop).
[[gnu::always_inline]] inline void q6_K_lanes_codes(const uint8_t* blk, __m512i u[4]) {
  const __m512i low6 = _mm512_set1_epi8(0x3f);
  const __m512i z0 = _mm512_loadu_si512(blk), z1 = _mm512_loadu_si512(blk + 64), z2 = _mm512_loadu_si512(blk + 128);
  u[0] = _mm512_and_si512(z0, low6);
  u[1] = _mm512_and_si512(z1, low6);
  u[2] = _mm512_and_si512(z2, low6);
  const __m512i bits01 = _mm512_srli_epi16(z0, 6);
  const __m512i bits23 = _mm512_srli_epi16(z1, 4);
  const __m512i bits45 = _mm512_srli_epi16(_mm512_andnot_si512(low6, z2), 2);
  constexpr int kSelect = 0xca;  // a ? b : c, bit by bit
  const __m512i bits03 = _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x03), bits01, bits23, kSelect);
  u[3] = _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x0f), bits03, bits45, kSelect);
}

// The exact int32 sum of block w against one token's Q8_K block act, spread over 16 lanes.
[[gnu::always_inline]] inline __m512i q6_K_isum(const Q6_KBlock& w, const uint8_t* act) {
  __m512i isum = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(load256(act + 260)), w.neg32_sc);
  __m512i dot[4];
  for (int i = 0; i < 4; ++i) dot[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.u[i], _mm512_loadu_si512(act + 4 + 64 * i));
  for (int h = 0; h < 2; ++h) isum = _mm512_dpwssd_epi32(isum, _mm512_packs_epi32(dot[2 * h], dot[2 * h + 1]), w.scale[h]);
  return isum;
}


// ---- The Q6_K tile: the 16 sub-blocks of a block in the 16 lanes ----
//
// The row dot's scheme costs 9 VNNI instructions per block and token (4 vpdpbusd, 4 vpdpwssd by
// the scales, 1 for the -32 terms). The tile runs 5: it first transposes the 4 code vectors of a
// block as 4 x 4 dwords within each 128-bit chunk (8 unpacks, shared by the tokens), so that
// lane p of every vector holds 4 codes of one sub-block, s(p) = 4 (p % 4) + p / 4 (natural
// vector k's chunk c is sub-block 4k + c; after the transpose vector j's lane 4c + k is vector
// k's dword j of chunk c). The 4 vpdpbusd of a token then add into one accumulator, lane p
// the sum over sub-block s(p) of u * a (|sum| <= 16 * 63 * 128, past int16), which starts at
// -32 bsum_s(p) and is multiplied by the scales in one vpmulld. The activations take the same
// transpose, once per call for all its rows (Q6_KTileAct, q6_K_tile_acts). The block's int32 sum is the row
// dot's exactly; the float step per block is the same, so the tile and the row dot agree bit
// for bit as before. bench_cpu_kernels gemm_q6_K/avx512vnni (Zen 5): 2048x2560, 8 tokens, one
// thread (in cache) 162 -> 221 GMAC/s; 32000x2560, 8 tokens, two threads (streamed) 315 -> 373.

// 4 vectors transposed as 4 x 4 dwords within each 128-bit chunk: out[j] chunk c dword k =
// v[k] chunk c dword j.
[[gnu::always_inline]] inline void transpose_dwords4(const __m512i v[4], __m512i out[4]) {
  const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Lane p: sub-block s(p).
inline __m512i q6_K_lane_sub_blocks() { return _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0); }

// One token's Q8_K block as the tile reads it: the quants transposed as the codes, and the
// accumulator's start, lane p = -32 bsum_s(p).
struct alignas(64) Q6_KTileAct {
  __m512i start;
  __m512i q[4];
};

// -32 bsum_p in lane p of one Q8_K block (lane p: sub-block p).
[[gnu::always_inline]] inline __m512i q6_K_lanes_start(const uint8_t* act) {
  return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_cvtepi16_epi32(load256(act + 260)), 5));
}

// n_act tokens' activation rows (as apart) in Q6_KTileAct blocks, token-major, in the calling
// thread's scratch (grown once, then no allocation per call). kLanes: rows already in lane
// order (q6_K_lanes.h), taken as they are; else transposed as the tile transposes the codes.
template <bool kLanes>
const Q6_KTileAct* q6_K_tile_acts(const uint8_t* act, int64_t as, int n_act, int64_t n_blocks) {
  thread_local std::vector<Q6_KTileAct> scratch;
  if (scratch.size() < static_cast<size_t>(n_act * n_blocks)) scratch.resize(static_cast<size_t>(n_act * n_blocks));
  const __m512i lanes = q6_K_lane_sub_blocks();
  for (int j = 0; j < n_act; ++j) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* blk = act + j * as + b * 292;
      Q6_KTileAct& t = scratch[static_cast<size_t>(j * n_blocks + b)];
      if constexpr (kLanes) {
        t.start = q6_K_lanes_start(blk);
        for (int i = 0; i < 4; ++i) t.q[i] = _mm512_loadu_si512(blk + 4 + 64 * i);
        continue;
      }
      __m512i v[4];
      for (int i = 0; i < 4; ++i) v[i] = _mm512_loadu_si512(blk + 4 + 64 * i);
      transpose_dwords4(v, t.q);
      const __m512i bsum = _mm512_permutexvar_epi32(lanes, _mm512_cvtepi16_epi32(load256(blk + 260)));
      t.start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(bsum, 5));
    }
  }
  return scratch.data();
}

// One block of R (1 or 2) rows unpacked for the tile: codes and scales with sub-block p in lane p.
template <int R, bool kLanes>
struct Q6_KTileRows {
  __m512i u[R][4];
  __m512i scale[R];
  float d[R];
  [[gnu::always_inline]] Q6_KTileRows(const Q6_KUnpacker& unpack, const uint8_t* const blk[R]) {
    for (int r = 0; r < R; ++r) {
      scale[r] = _mm512_cvtepi8_epi32(load128(blk[r] + 192));
      d[r] = fp16(blk[r] + 208);
      if constexpr (kLanes) {
        q6_K_lanes_codes(blk[r], u[r]);
      } else {
        transpose_dwords4(unpack(blk[r]).u, u[r]);
        scale[r] = _mm512_permutexvar_epi32(q6_K_lane_sub_blocks(), scale[r]);
      }
    }
  }
};

// lo in the low 256 bits, hi in the high.
[[gnu::always_inline]] inline __m512 halves(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

// lane_sums8's steps after fold_pair (a[r][k]: row r, tokens 2k and 2k + 1), for R rows:
// lanes 8r + j of the result hold row r's sum for token j (R = 1: lanes 0..7, the rest 0).
template <int R>
[[gnu::always_inline]] inline __m512i finish_sums(const __m512i a[R][4]) {
  __m512i c[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int r = 0; r < R; ++r) c[r] = fold_chunks(fold_pairs(a[r][0], a[r][1]), fold_pairs(a[r][2], a[r][3]));
  return fold_chunks(c[0], c[1]);
}

// N (1 .. 8) tokens against R (1 or 2) weight rows (w[r]); acts[j * n_blocks + b]: token j's
// block b; act_d[8b + j]: token j's Q8_K d of block b (0 past N). kLanes: the rows in lane
// order, whose unpacked vectors and scales already have sub-block p in lane p (no transpose,
// no permute). out[8r + j]: row r, token j. Two rows share each activation load,
// and a token's 4 vpdpbusd per row run as two chains of 2. Zen 4, bench_cpu_kernels
// gemm_q6_K_lanes, 8 tokens, builds alternating: 2048x2560 on one thread 117.5-119.0 ->
// 122.3-123.1 GMAC/s, the head's 128256x2560 on two 221-224 -> 230-233; either change alone
// was no faster (one chain of 4, two rows: 113; two chains, one row: 113-115).
template <int N, int R, int Locality, bool kLanes>
void tile_q6_K(int64_t n, const uint8_t* const w[R], const Q6_KTileAct* acts, const float* act_d, float* out) {
  const Q6_KUnpacker unpack;
  const int64_t n_blocks = n / 256;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* blk[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = w[r] + b * 210;
      prefetch_q6_K_ahead<Locality>(blk[r]);  // a batched decode step streams the head from memory
    }
    const Q6_KTileRows<R, kLanes> rows(unpack, blk);
    __m512i folded[R][4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      __m512i isum[R][2];
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * k + h;
        if (j < N) {
          const Q6_KTileAct& a = acts[j * n_blocks + b];
          __m512i s[R], t[R];
          for (int r = 0; r < R; ++r) s[r] = a.start, t[r] = _mm512_setzero_si512();
          for (int i = 0; i < 4; ++i) {
            __m512i q = a.q[i];
            asm("" : "+v"(q));  // one load for both rows, not one per vpdpbusd (kernels_avx512vnni.cpp's load_once)
            for (int r = 0; r < R; ++r) {
              if (i < 2) s[r] = _mm512_dpbusd_epi32(s[r], rows.u[r][i], q);
              else t[r] = _mm512_dpbusd_epi32(t[r], rows.u[r][i], q);
            }
          }
          for (int r = 0; r < R; ++r) isum[r][h] = _mm512_mullo_epi32(_mm512_add_epi32(s[r], t[r]), rows.scale[r]);
        } else {
          for (int r = 0; r < R; ++r) isum[r][h] = _mm512_setzero_si512();
        }
      }
      for (int r = 0; r < R; ++r) folded[r][k] = fold_pair(isum[r][0], isum[r][1]);
    }
    const __m512 da = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(act_d + 8 * b))));
    const __m512 dw = R == 1 ? _mm512_set1_ps(rows.d[0]) : halves(_mm256_set1_ps(rows.d[0]), _mm256_set1_ps(rows.d[R - 1]));
    const __m512 d = _mm512_mul_ps(dw, da);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(finish_sums<R>(folded)), d, acc);
  }
  alignas(64) float lanes_out[16];
  _mm512_store_ps(lanes_out, acc);
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < N; ++j) out[8 * r + j] = lanes_out[8 * r + j];
  }
}

// tile_q6_K of R rows by token count (1 .. 8; 0: none).
template <int R, int Locality, bool kLanes>
struct Q6_KTiles {
  using Fn = void (*)(int64_t, const uint8_t* const[R], const Q6_KTileAct*, const float*, float*);
  static constexpr Fn kFor[9] = {nullptr,
                                 tile_q6_K<1, R, Locality, kLanes>,
                                 tile_q6_K<2, R, Locality, kLanes>,
                                 tile_q6_K<3, R, Locality, kLanes>,
                                 tile_q6_K<4, R, Locality, kLanes>,
                                 tile_q6_K<5, R, Locality, kLanes>,
                                 tile_q6_K<6, R, Locality, kLanes>,
                                 tile_q6_K<7, R, Locality, kLanes>,
                                 tile_q6_K<8, R, Locality, kLanes>};
};

// The QuantTileFn (kLanes: of lane-order Q6_K, q6_K_lanes.h): the tokens' blocks laid out and
// their Q8_K d gathered once per call, then rows two at a time, the tokens in runs of 8.
template <int Locality, bool kLanes>
void tile_rows_q6_K(int64_t n, const uint8_t* w, int64_t w_row_bytes, int64_t n_rows, const uint8_t* act,
                    int64_t act_row_bytes, int n_act, float* y, int64_t y_stride) {
  const int64_t n_blocks = n / 256;
  const int n_runs = (n_act + 7) / 8;
  thread_local std::vector<float> act_d;  // grows to the largest call, then stays: no allocation per call
  act_d.resize(std::max(act_d.size(), static_cast<size_t>(n_runs * n_blocks * 8)));
  for (int c = 0; c < n_runs; ++c) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      for (int j = 0; j < 8; ++j) {
        const int t = 8 * c + j;
        act_d[static_cast<size_t>((c * n_blocks + b) * 8 + j)] = t < n_act ? load_f32(act + t * act_row_bytes + b * 292) : 0.0f;
      }
    }
  }
  const Q6_KTileAct* acts = q6_K_tile_acts<kLanes>(act, act_row_bytes, n_act, n_blocks);
  for (int64_t r = 0; r < n_rows; r += 2) {
    const int n_r = r + 1 < n_rows ? 2 : 1;
    const uint8_t* rows[2] = {w + r * w_row_bytes, w + (r + n_r - 1) * w_row_bytes};
    for (int c = 0; c < n_runs; ++c) {
      const int m = std::min(8, n_act - 8 * c);
      float out[16];
      if (n_r == 2) {
        Q6_KTiles<2, Locality, kLanes>::kFor[m](n, rows, acts + 8 * c * n_blocks, act_d.data() + c * n_blocks * 8, out);
      } else {
        Q6_KTiles<1, Locality, kLanes>::kFor[m](n, rows, acts + 8 * c * n_blocks, act_d.data() + c * n_blocks * 8, out);
      }
      for (int i = 0; i < n_r; ++i) {
        for (int j = 0; j < m; ++j) y[(8 * c + j) * y_stride + r + i] = out[8 * i + j];
      }
    }
  }
}

// ---- Q6_K row dot, in the file's order or in lane order (q6_K_lanes.h) ----
//
// In lane order (weights and activations): lane p of each of a block's 4 unpacked code vectors
// and of the activations against them holds 4 elements of sub-block p. Per block and token 4
// vpdpbusd into one accumulator that starts at -32 bsum_p (lane p), one vpmulld by the 16
// scales: the block's exact int32 sum, as dot_q6_K's, and the same float step per block, so
// the two row dots agree bit for bit. No scale permutes (the file's scale bytes are already
// in lane order), no transposes in the tile (tile_q6_K<..., true>). One Zen 4 core, in L2:
// 29.5-30.4 -> 32.1-32.6 GB/s against the file order's row dot (docs/performance.md). The
// codes unpacked from three planes (q6_K_lanes_codes, 9 instructions a block where ggml's
// nibbles and bit pairs take 20): 32.4-33.1 -> 33.3-35.4 GB/s in L2, 26.9-29.6 -> 27.5-31.2
// streamed; the 8-token tile no faster (it is not bound by its unpacking).

// The row dot; kLanes: of a row and activations in lane order (above).
template <int Locality, bool kLanes>
float dot_q6_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  const Q6_KUnpacker unpack;
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = w + b * 210;
    prefetch_q6_K_ahead<Locality>(blk);  // decode streams the head from memory
    const uint8_t* act = a + b * 292;
    int32_t isum;
    if constexpr (kLanes) {
      __m512i u[4];
      q6_K_lanes_codes(blk, u);
      __m512i s = q6_K_lanes_start(act);
      for (int i = 0; i < 4; ++i) s = _mm512_dpbusd_epi32(s, u[i], _mm512_loadu_si512(act + 4 + 64 * i));
      isum = _mm512_reduce_add_epi32(_mm512_mullo_epi32(s, _mm512_cvtepi8_epi32(load128(blk + 192))));
    } else {
      isum = _mm512_reduce_add_epi32(q6_K_isum(unpack(blk), act));
    }
    acc = _mm_fmadd_ss(_mm_cvtsi32_ss(_mm_setzero_ps(), isum), _mm_set_ss(fp16(blk + 208) * load_f32(act)), acc);
  }
  return _mm_cvtss_f32(acc);
}

}  // namespace

QuantDotFn q6_K_lanes_dot() { return row_prefetch() == RowPrefetch::kL2 ? dot_q6_K<2, true> : dot_q6_K<3, true>; }

QuantTileFn q6_K_lanes_tile() {
  return row_prefetch() == RowPrefetch::kL2 ? tile_rows_q6_K<2, true> : tile_rows_q6_K<3, true>;
}

QuantDotFn quant_dot(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return dot_blocks32<Q4_0>;
    case GgmlType::kQ4_1: return dot_blocks32<Q4_1>;
    case GgmlType::kQ5_0: return dot_blocks32<Q5_0>;
    case GgmlType::kQ5_1: return dot_blocks32<Q5_1>;
    case GgmlType::kQ8_0: return dot_blocks32<Q8_0>;
    case GgmlType::kIQ4_NL: return dot_blocks32<IQ4_NL>;
    case GgmlType::kQ6_K: return row_prefetch() == RowPrefetch::kL2 ? dot_q6_K<2, false> : dot_q6_K<3, false>;
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
    case GgmlType::kQ2_K: return tile_k<Q2_KTile, 8>;
    case GgmlType::kQ3_K: return tile_k<Q3_KTile, 8>;
    case GgmlType::kQ4_K: return tile_k<Q4_KTile, 8>;
    case GgmlType::kQ5_K: return tile_k<Q5_KTile, 8>;
    case GgmlType::kIQ4_XS: return tile_k<IQ4_XSTile, 8>;
    case GgmlType::kQ6_K: return row_prefetch() == RowPrefetch::kL2 ? tile_rows_q6_K<2, false> : tile_rows_q6_K<3, false>;
    default: return avx2::quant_tile(type);
  }
}

}  // namespace bitnet::cpu::avx512vnni
