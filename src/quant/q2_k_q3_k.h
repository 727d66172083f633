// Q2_K (GGML type 10) and Q3_K (type 11): 256-element super-blocks, 16 sub-blocks of 16, as
// ggml-common.h's block_q2_K / block_q3_K, with the arithmetic of ggml-quants.c's
// quantize_row_q{2,3}_K_ref and dequantize_row_q{2,3}_K and of the generic
// ggml_vec_dot_q{2,3}_K_q8_K of ggml-cpu-quants.c at llama.cpp
// c392e5094deaf2d1a7c18683214f007fad3fe42b.
//
// Both pack 2-bit codes the same way: element e = 128h + 32j + r (h < 2, j < 4, r < 32) in
// qs[32h + r], bits 2j..2j+1; sub-block s = e / 16.
//
// Q2_K, 84 bytes:
//   uint8_t  scales[16];  // sub-block s: low nibble scale sc, high nibble min m
//   uint8_t  qs[64];      // 2-bit codes q in [0, 3]
//   uint16_t d;           // fp16 scale of the sub-block scales
//   uint16_t dmin;        // fp16 scale of the sub-block mins
//   w = (d * sc) * q - dmin * m
// Q3_K, 110 bytes:
//   uint8_t  hmask[32];   // high bit of element e in hmask[e % 32], bit e / 32
//   uint8_t  qs[64];      // low 2 bits of the codes
//   uint8_t  scales[12];  // 16 6-bit scales: low 4 bits of scale s in scales[s % 8], low nibble
//                         // for s < 8, high nibble for s >= 8; top 2 bits in scales[8 + s % 4],
//                         // bits 2(s/4)..2(s/4)+1
//   uint16_t d;           // fp16 super-block scale
//   w = (d * (scale - 32)) * (low2 - (high bit ? 0 : 4))
#pragma once

#include <cstdint>

namespace bitnet::quant {

inline constexpr int64_t kQ2_KBlockBytes = 84;
inline constexpr int64_t kQ3_KBlockBytes = 110;

// quantize_row_q{2,3}_K_ref for one block: x[256] (finite) -> dst[84] / dst[110].
//   Q2_K: per sub-block make_qkx2_quants(16, 3, weights |x|, rmin -0.5, rdelta 0.1, 15 steps,
//         absolute error); scales and mins to 4 bits against the largest of each; the codes
//         recomputed from the rounded scales (a sub-block whose scale rounds to 0 keeps the
//         search's codes).
//   Q3_K: per sub-block make_q3_quants(16, 4); the scales to 6 bits against the one of
//         largest magnitude (d = 1 / iscale); codes recomputed as Q2_K's.
void q2_K_quantize_block(const float* x, uint8_t* dst);
void q3_K_quantize_block(const float* x, uint8_t* dst);

// dequantize_row_q{2,3}_K: src -> y[256].
void q2_K_dequantize_block(const uint8_t* src, float* y);
void q3_K_dequantize_block(const uint8_t* src, float* y);

// The 6-bit scale (0..63, before the -32) of Q3_K sub-block s.
int q3_K_scale(const uint8_t* scales, int s);

// Scalar twins of ggml's generic ggml_vec_dot_q2_K_q8_K / ggml_vec_dot_q3_K_q8_K over n
// elements (a multiple of 256): w holds n/256 weight blocks, a n/256 Q8_K blocks (q8_k.h).
// Integer sums are exact; the float steps are ggml's, per super-block:
//   q2_K: isum = sum over elements of sc * q * q8, summs = sum over sub-blocks of m * bsum;
//         sum += (d_a * d_w) * isum - (d_a * dmin_w) * summs
//   q3_K: eight int32 lanes (element e in lane e % 8) of (scale - 32) * int16(code * q8);
//         lane sums[l] += (d_w * d_a) * lane[l] over the super-blocks, then
//         0 + sums[0] + ... + sums[7]
float vec_dot_q2_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a);
float vec_dot_q3_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a);

}  // namespace bitnet::quant
