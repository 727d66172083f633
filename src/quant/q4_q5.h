// ggml's 32-element legacy formats, as ggml-common.h declares their blocks (all scalars
// little-endian, fp16 as IEEE half bits). Arithmetic of ggml-quants.c (quantize_row_*_ref,
// dequantize_row_*) and ggml-cpu-quants.c (the scalar tail of ggml_vec_dot_*) at llama.cpp
// c392e5094deaf2d1a7c18683214f007fad3fe42b.
//
// Q4_0 (type 2), 18 bytes:
//   uint16_t d;       // fp16 scale = max / -8, max the element of largest magnitude
//   uint8_t  qs[16];  // element j in the low nibble of qs[j], element j + 16 in the high nibble
//                     // w = (q - 8) * d
// Q4_1 (type 3), 20 bytes:
//   uint16_t d;       // fp16 scale = (max - min) / 15
//   uint16_t m;       // fp16 min
//   uint8_t  qs[16];  // as Q4_0; w = q * d + m
// Q5_0 (type 6), 22 bytes:
//   uint16_t d;       // fp16 scale = max / -16
//   uint8_t  qh[4];   // little-endian uint32: bit j is bit 4 (the fifth bit) of element j
//   uint8_t  qs[16];  // low 4 bits, as Q4_0; w = (q - 16) * d
// Q5_1 (type 7), 24 bytes:
//   uint16_t d;       // fp16 scale = (max - min) / 31
//   uint16_t m;       // fp16 min
//   uint8_t  qh[4];   // as Q5_0
//   uint8_t  qs[16];  // as Q4_0; w = q * d + m
#pragma once

#include <cstdint>

namespace bitnet::quant {

inline constexpr int64_t kQ4_5BlockElems = 32;  // QK4_0 = QK4_1 = QK5_0 = QK5_1
inline constexpr int64_t kQ4_0BlockBytes = 18;
inline constexpr int64_t kQ4_1BlockBytes = 20;
inline constexpr int64_t kQ5_0BlockBytes = 22;
inline constexpr int64_t kQ5_1BlockBytes = 24;

// quantize_row_q*_ref for one block: x[32] (finite) -> dst[block bytes].
void q4_0_quantize_block(const float* x, uint8_t* dst);
void q4_1_quantize_block(const float* x, uint8_t* dst);
void q5_0_quantize_block(const float* x, uint8_t* dst);
void q5_1_quantize_block(const float* x, uint8_t* dst);

// dequantize_row_q*: src[block bytes] -> y[32].
void q4_0_dequantize_block(const uint8_t* src, float* y);
void q4_1_dequantize_block(const uint8_t* src, float* y);
void q5_0_dequantize_block(const uint8_t* src, float* y);
void q5_1_dequantize_block(const uint8_t* src, float* y);

// Scalar twins of ggml_vec_dot_q4_0_q8_0 / ggml_vec_dot_q4_1_q8_1 over n elements (a multiple
// of 32): w holds n/32 weight blocks, a n/32 activation blocks (q8_0.h). Per block the integer
// sum of products is exact; the float accumulation is ggml's:
//   q4_0: sum += sumi * d_w * d_a                 (left to right)
//   q4_1: sum += (d_w * d_a) * sumi + m_w * s_a   (s_a = d_a * sum(q_a), stored in the Q8_1 block)
float vec_dot_q4_0_q8_0(int64_t n, const uint8_t* w, const uint8_t* a);
float vec_dot_q4_1_q8_1(int64_t n, const uint8_t* w, const uint8_t* a);

// Scalar twins of ggml_vec_dot_q5_0_q8_0 / ggml_vec_dot_q5_1_q8_1, as above with 5-bit codes
// (q5_0: q - 16 in [-16, 15]; q5_1: q in [0, 31]). Note the product order differs from q4_0's:
//   q5_0: sum += (d_w * d_a) * sumi
//   q5_1: sum += (d_w * d_a) * sumi + m_w * s_a
float vec_dot_q5_0_q8_0(int64_t n, const uint8_t* w, const uint8_t* a);
float vec_dot_q5_1_q8_1(int64_t n, const uint8_t* w, const uint8_t* a);

}  // namespace bitnet::quant
