// Helpers shared by ggml's super-block ("K") quantizers, with the arithmetic of ggml-quants.c at
// llama.cpp c392e5094deaf2d1a7c18683214f007fad3fe42b (nearest_int, make_qx_quants,
// make_qkx2_quants, get_scale_min_k4). Every float operation happens in ggml's order: the
// quantizers' choices (and so their bytes) depend on the last bit of these sums. The library is
// built with -ffp-contract=off so that no a*b+c is fused behind our back.
//
// That is the arithmetic the C source spells out. ggml's own output depends on how it was
// built: compiled with FMA contraction (x86-64 -march=native on an FMA machine, GCC on Arm64),
// 0.1-1.6 % of Q4_K / Q5_K / Q6_K blocks come out different (measured on 4M values); the
// 32-element formats, Q8_K and every dequantizer are the same either way.
#pragma once

#include <bit>
#include <cstdint>

namespace bitnet::quant {

inline constexpr int64_t kQK_K = 256;  // elements of every K super-block

// Round to nearest, ties to even, for |f| <= 4194303 (ggml asserts this): adding 1.5 * 2^23
// leaves the integer in the low mantissa bits. Larger inputs wrap exactly as ggml's do.
inline int nearest_int(float f) {
  const float v = f + 12582912.f;
  return static_cast<int>(std::bit_cast<uint32_t>(v) & 0x007fffffu) - 0x00400000;
}

// The first element of x[n] of largest magnitude, with its sign (ggml's max in make_qx_quants,
// quantize_row_q8_K_ref, ...); *amax is its magnitude (0 for an all-zero group).
float max_by_magnitude(const float* x, int64_t n, float* amax);

// ggml's make_qx_quants(n, nmax, x, L, rmse_type = 1, qw = NULL), the call of the reference
// Q6_K quantizer: symmetric levels L[i] = l + nmax, l in [-nmax, nmax-1], for the group x[n];
// returns the scale (x ~ scale * l). Element i weighs x[i]^2; 18 scales near -nmax / max are
// tried and the best weighted fit kept. An all-zero group (amax < 1e-15) gives 0 and L = 0.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L);

// ggml's make_q3_quants(n, nmax, x, L, do_rmse = true), the call of the reference Q3_K
// quantizer: levels l in [-nmax, nmax-1] starting from max -> -nmax, then up to 5 passes that
// move single elements to a level that improves the fit of x ~ scale * l weighted by x^2.
// Returns the scale sumlx / suml2 and L[i] = l + nmax. An all-zero group gives 0 and L = 0.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L);

// ggml's make_qkx2_quants: asymmetric levels L[i] in [0, nmax] for x[n] with weights[n], such
// that x ~ scale * L - the_min; tries nstep + 1 scales (rmin + rdelta * is + nmax) / range and
// keeps the least weighted squared (use_mad: absolute) error. Returns the scale; *the_min >= 0.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad);

// The 12-byte scales of Q4_K / Q5_K: 8 sub-block scales and 8 mins of 6 bits each.
//   j < 4:  scale = q[j] & 63,                             min = q[j + 4] & 63
//   j >= 4: scale = (q[j + 4] & 15) | (q[j - 4] >> 6) << 4, min = (q[j + 4] >> 4) | (q[j] >> 6) << 4
// i.e. bytes 0-3 hold scales 0-3 and the top 2 bits of scales 4-7, bytes 4-7 mins 0-3 and the
// top bits of mins 4-7, bytes 8-11 the low nibbles of scales 4-7 (low) and mins 4-7 (high).
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The inverse, as ggml's quantize_row_q4_K_ref writes it: ls[8], lm[8] in [0, 63] -> q[12].
void pack_scale_min_k4(const uint8_t* ls, const uint8_t* lm, uint8_t* q);

}  // namespace bitnet::quant
