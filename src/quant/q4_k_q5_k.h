// Q4_K (GGML type 12) and Q5_K (type 13): 256-element super-blocks, 8 sub-blocks of 32 with a
// 6-bit scale and a 6-bit min each, as ggml-common.h's block_q4_K / block_q5_K. Arithmetic of
// ggml-quants.c (quantize_row_q{4,5}_K_ref, dequantize_row_q{4,5}_K) and of the generic
// ggml_vec_dot_q{4,5}_K_q8_K in ggml-cpu-quants.c at llama.cpp
// c392e5094deaf2d1a7c18683214f007fad3fe42b.
//
// Q4_K, 144 bytes:
//   uint16_t d;           // fp16 scale of the sub-block scales
//   uint16_t dmin;        // fp16 scale of the sub-block mins
//   uint8_t  scales[12];  // 8 scales sc and 8 mins m, 6 bits each (get_scale_min_k4 in
//                         // k_quant_util.h has the bit layout)
//   uint8_t  qs[128];     // 256 codes q in [0, 15]: element e = 64c + 32k + l (l < 32) in
//                         // qs[32c + l], low nibble for k = 0, high nibble for k = 1
//   w = (d * sc[e / 32]) * q - dmin * m[e / 32]
// Q5_K, 176 bytes:
//   uint16_t d, dmin;     // as Q4_K
//   uint8_t  scales[12];  // as Q4_K
//   uint8_t  qh[32];      // fifth bit of element e in qh[e % 32], bit e / 32
//   uint8_t  qs[128];     // low 4 bits, as Q4_K's qs; codes q in [0, 31]
//   w = (d * sc[e / 32]) * q - dmin * m[e / 32]
#pragma once

#include <cstdint>

namespace bitnet::quant {

inline constexpr int64_t kQ4_KBlockBytes = 144;
inline constexpr int64_t kQ5_KBlockBytes = 176;

// quantize_row_q{4,5}_K_ref for one block: x[256] (finite) -> dst[144 / 176].
void q4_K_quantize_block(const float* x, uint8_t* dst);
void q5_K_quantize_block(const float* x, uint8_t* dst);

// dequantize_row_q{4,5}_K: src -> y[256].
void q4_K_dequantize_block(const uint8_t* src, float* y);
void q5_K_dequantize_block(const uint8_t* src, float* y);

// Scalar twins of ggml_vec_dot_q{4,5}_K_q8_K over n elements (a multiple of 256): w holds n/256
// weight blocks, a n/256 Q8_K blocks (q8_k.h). Per block, eight int32 lanes (lane = e % 8) sum
// sc * q * q8 exactly and mins = sum_g bsums[g] * m[g / 2]; then
//   lane sums[l] += (d * d_a) * lane,  sum -= (dmin * d_a) * mins,
// and the eight lane sums are added to sum, in order, at the end.
float vec_dot_q4_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a);
float vec_dot_q5_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a);

}  // namespace bitnet::quant
