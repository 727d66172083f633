// Q8_K (GGML type 15): the activation format of K-quant dot products, 256-element blocks of
// 292 bytes, as ggml-common.h's block_q8_K. Arithmetic of ggml-quants.c
// (quantize_row_q8_K_ref, dequantize_row_q8_K) at llama.cpp
// c392e5094deaf2d1a7c18683214f007fad3fe42b.
//   float   d;          // bytes 0-3: scale = max / -127 (max the element of largest magnitude)
//   int8_t  qs[256];    // bytes 4-259: x ~ qs[j] * d, qs in [-127, 127]
//   int16_t bsums[16];  // bytes 260-291: bsums[g] = sum of qs[16g .. 16g+15] (the K dot
//                       // products take the min terms from these)
#pragma once

#include <cstdint>

namespace bitnet::quant {

inline constexpr int64_t kQ8_KBlockBytes = 292;

// quantize_row_q8_K_ref for one block: x[256] (finite) -> dst[292]. An all-zero block is all
// zero bytes (ggml leaves its bsums unwritten; their true value is 0).
void q8_K_quantize_block(const float* x, uint8_t* dst);
// dequantize_row_q8_K: y[j] = d * qs[j].
void q8_K_dequantize_block(const uint8_t* src, float* y);

// Readers of a block's fields.
float q8_K_d(const uint8_t* block);
inline const int8_t* q8_K_qs(const uint8_t* block) {
  return reinterpret_cast<const int8_t*>(block + 4);
}
int16_t q8_K_bsum(const uint8_t* block, int g);

}  // namespace bitnet::quant
