// TQ2_0 (GGML type 35, upstream llama.cpp): 256-element blocks of 66 bytes (block_tq2_0):
//   uint8_t  qs[64];  // 256 codes, 2 bits each: element 128h+m+32n in qs[32h+m], bits 2n..2n+1
//                     // (low bits first: the I2_S grouping with each byte's bit pairs reversed)
//   uint16_t d;       // fp16 scale: w = (code - 1) * d
#pragma once

#include <cstdint>

namespace bitnet::quant {

inline constexpr int64_t kTq2_0BlockBytes = 66;

// codes[256] in {0,1,2} and fp16 bits d -> dst[66].
void tq2_0_pack_block(const uint8_t* codes, uint16_t d, uint8_t* dst);
// src[66] -> codes[256] (0..3; 3 is invalid, the caller rejects it); returns the fp16 bits of d.
uint16_t tq2_0_unpack_block(const uint8_t* src, uint8_t* codes);

}  // namespace bitnet::quant
