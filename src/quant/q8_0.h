// Q8_0 (GGML type 8) and Q8_1 (type 9): 32-element int8 blocks, as ggml-common.h declares them.
// Q8_0 is a weight format and the activation format of Q4_0/Q5_0/Q8_0 dot products; Q8_1 is
// only an activation format (of Q4_1/Q5_1), which ggml never dequantizes. Arithmetic of
// ggml-quants.c and ggml-cpu-quants.c at llama.cpp c392e5094deaf2d1a7c18683214f007fad3fe42b.
//
// Q8_0, 34 bytes:
//   uint16_t d;       // fp16 scale = amax / 127
//   int8_t   qs[32];  // w = qs[j] * d
// Q8_1, 36 bytes:
//   uint16_t d;       // fp16 scale = amax / 127
//   uint16_t s;       // fp16 of d * sum(qs) (the float d before rounding to fp16)
//   int8_t   qs[32];  // x ~ qs[j] * d
#pragma once

#include <cstdint>

namespace bitnet::quant {

inline constexpr int64_t kQ8_0BlockElems = 32;
inline constexpr int64_t kQ8_0BlockBytes = 34;
inline constexpr int64_t kQ8_1BlockBytes = 36;

// ggml's quantize_row_q8_0_ref for one block: x[32] (finite) -> dst[34].
void q8_0_quantize_block(const float* x, uint8_t* dst);
// src[34] -> y[32], as ggml's dequantize_row_q8_0.
void q8_0_dequantize_block(const uint8_t* src, float* y);

// ggml's quantize_row_q8_1_ref for one block: x[32] (finite) -> dst[36].
void q8_1_quantize_block(const float* x, uint8_t* dst);
// src[36] -> y[32] = qs[j] * d (ggml has no Q8_1 dequantizer; this is the value the dot
// products use, for tests and for checking the other kernels).
void q8_1_dequantize_block(const uint8_t* src, float* y);

// Scalar twin of ggml_vec_dot_q8_0_q8_0 over n elements (a multiple of 32): per block the exact
// integer sum of qs products, then sum += sumi * (d_w * d_a).
float vec_dot_q8_0_q8_0(int64_t n, const uint8_t* w, const uint8_t* a);

}  // namespace bitnet::quant
