// I2_S (GGML type 36, bitnet.cpp; the layout of its x86 build and of the official
// microsoft/bitnet-b1.58-2B-4T-gguf file). A tensor of n elements (n a multiple of 128) is:
//   uint8_t codes[n/4];  // 128-element groups of 32 bytes: element j of group i in byte
//                        // 32i + j%32, bits 7-2(j/32) .. 6-2(j/32): byte p of a group holds
//                        // elements p, p+32, p+64, p+96 in bits 7-6, 5-4, 3-2, 1-0 (high first)
//   float   scale;       // one per tensor: w = (code - 1) * scale
//   uint8_t pad[28];     // alignment only. We write zeros; bitnet.cpp's quantizer never writes
//                        // them, so its files carry leftover heap bytes here: never check them.
// bitnet.cpp declares block size 1 / type size 1 for this type: sizes are special-cased.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bitnet/status.h"

namespace bitnet::quant {

inline constexpr int64_t kI2sGroupElems = 128;
inline constexpr int64_t kI2sGroupBytes = 32;
inline constexpr int64_t kI2sTrailerBytes = 32;  // f32 scale + 28 pad bytes

// codes[128] in {0,1,2} -> dst[32].
void i2s_pack_group(const uint8_t* codes, uint8_t* dst);
// src[32] -> codes[128] in 0..3.
void i2s_unpack_group(const uint8_t* src, uint8_t* codes);

// bitnet.cpp's quantize_i2_s over the whole tensor x[n] (finite, n % 128 == 0) -> dst[n/4 + 32]:
// scale = max|x| (0 for an all-zero tensor: no floor); code = 1 where |x| < 1e-6 (absolute,
// not relative to the scale), else 2 for x > 0 and 0 for x < 0. The codes are signs, not a
// rounding: inputs are expected to be ternary x scale already (the HF->GGUF converter applies
// BitNet's absmean weight_quant first); any other value snaps to +-scale.
void i2s_quantize(const float* x, int64_t n, uint8_t* dst);

// Lossless conversions between the two 2-bit layouts of the same n elements: a TQ2_0 block is
// two I2_S groups with each byte's bit pairs reversed, and the scale moves between the trailer
// and each block's d. i2s_to_tq2_0 writes d = 0 for an all-zero block and fp16(scale) otherwise
// (what quantize_row_tq2_0_ref makes of the decoded tensor; kUnsupported when the scale is not
// exact in fp16). tq2_0_to_i2s needs one common d over the blocks that hold a nonzero weight
// (kUnsupported otherwise) and writes what quantize_i2_s makes of the decoded tensor.
Result<std::vector<uint8_t>> i2s_to_tq2_0(std::span<const uint8_t> src, int64_t n);
Result<std::vector<uint8_t>> tq2_0_to_i2s(std::span<const uint8_t> src, int64_t n);

// Swaps the four 2-bit fields of a byte end for end (bits 7-6 <-> 1-0, 5-4 <-> 3-2).
inline uint8_t reverse_bit_pairs(uint8_t b) {
  return static_cast<uint8_t>(((b & 0x03) << 6) | ((b & 0x0c) << 2) | ((b & 0x30) >> 2) |
                              ((b & 0xc0) >> 6));
}

}  // namespace bitnet::quant
