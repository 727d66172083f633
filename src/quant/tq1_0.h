// TQ1_0 (GGML type 34, upstream llama.cpp): 256-element blocks of 54 bytes (block_tq1_0):
//   uint8_t  qs[48];  // 5 trits per byte: element m+32n in qs[m] (m < 32, n = 0..4: elements
//                     // 0-159), element 160+m+16n in qs[32+m] (m < 16, n = 0..4: 160-239)
//   uint8_t  qh[4];   // 4 trits per byte: element 240+m+4n in qh[m] (n = 0..3)
//   uint16_t d;       // fp16 scale: w = (trit - 1) * d
// A byte holds t = sum_n t_n 3^(4-n) (qh: its 4 trits shifted up by one, the fifth 0) stored as
// ceil(t * 256 / 243), so trit n reads back as ((uint8_t)(q * 3^n) * 3) >> 8: the byte is a
// fixed-point fraction t/243 and multiplying by 3^n moves trit n to the top.
#pragma once

#include <cstdint>

namespace bitnet::quant {

inline constexpr int64_t kTq1_0BlockBytes = 54;

// codes[256] in {0,1,2} and fp16 bits d -> dst[54].
void tq1_0_pack_block(const uint8_t* codes, uint16_t d, uint8_t* dst);
// src[54] -> codes[256] (always 0..2); returns the fp16 bits of d.
uint16_t tq1_0_unpack_block(const uint8_t* src, uint8_t* codes);

}  // namespace bitnet::quant
