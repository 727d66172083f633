// Q8_0 (GGML type 8): 32-element blocks of 34 bytes, as in ggml-common.h's block_q8_0:
//   uint16_t d;       // fp16 scale = amax / 127
//   int8_t   qs[32];  // w = qs[j] * d
#pragma once

#include <cstdint>

namespace bitnet::quant {

inline constexpr int64_t kQ8_0BlockElems = 32;
inline constexpr int64_t kQ8_0BlockBytes = 34;

// ggml's quantize_row_q8_0_ref for one block: x[32] (finite) -> dst[34].
void q8_0_quantize_block(const float* x, uint8_t* dst);
// src[34] -> y[32], as ggml's dequantize_row_q8_0.
void q8_0_dequantize_block(const uint8_t* src, float* y);

}  // namespace bitnet::quant
