// Q6_K (GGML type 14): 256-element super-blocks of 210 bytes, 16 sub-blocks of 16 with an int8
// scale each, as ggml-common.h's block_q6_K. Arithmetic of ggml-quants.c (quantize_row_q6_K_ref,
// dequantize_row_q6_K) and of the generic ggml_vec_dot_q6_K_q8_K in ggml-cpu-quants.c at
// llama.cpp c392e5094deaf2d1a7c18683214f007fad3fe42b.
//
//   uint8_t  ql[128];     // low 4 bits of 256 codes q in [0, 63]
//   uint8_t  qh[64];      // high 2 bits
//   int8_t   scales[16];  // sub-block scales: w = d * scales[e / 16] * (q - 32)
//   uint16_t d;           // fp16 super-block scale
// Element e = 128h + 32k + l (half h, quarter k, l < 32) lives in
//   ql[64h + l]      low nibble (k = 0) / high nibble (k = 2),
//   ql[64h + 32 + l] low nibble (k = 1) / high nibble (k = 3),
//   qh[32h + l]      bits 2k..2k+1.
#pragma once

#include <cstdint>

namespace bitnet::quant {

inline constexpr int64_t kQ6_KBlockBytes = 210;

// quantize_row_q6_K_ref for one block: x[256] (finite) -> dst[210].
void q6_K_quantize_block(const float* x, uint8_t* dst);
// dequantize_row_q6_K: src[210] -> y[256], y = (d * scale) * (q - 32).
void q6_K_dequantize_block(const uint8_t* src, float* y);

// The 6-bit code (0..63) of element e of a block.
int q6_K_code(const uint8_t* block, int e);
// All 256 codes of a block in element order, and back into its ql and qh (scales and d untouched).
void q6_K_codes(const uint8_t* block, uint8_t codes[256]);
void q6_K_set_codes(const uint8_t codes[256], uint8_t* block);

// Scalar twin of ggml_vec_dot_q6_K_q8_K over n elements (a multiple of 256): w holds n/256
// Q6_K blocks, a n/256 Q8_K blocks (q8_k.h). Per block, eight int32 lanes (lane = e % 8) sum
// scale * (q - 32) * q8 exactly; then lane sums[l] += (d_w * d_a) * lane, and the result is
// sums[0] + ... + sums[7] added in order at the end.
float vec_dot_q6_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a);

}  // namespace bitnet::quant
