// IEEE half and bfloat16 <-> float conversions, bit-exact with ggml's reference
// (round to nearest even; NaN stays NaN).
#pragma once

#include <bit>
#include <cstdint>

#include "core/fp16_bits.h"

namespace bitnet {

inline float fp16_to_fp32(uint16_t h) { return std::bit_cast<float>(fp16_to_fp32_bits(h)); }

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // nan
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: add the magic that aligns the mantissa, round to even.
    const float magic = std::bit_cast<float>(0x3f000000u);  // 0.5
    const float r = std::bit_cast<float>(abs) + magic;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(r) - 0x3f000000u));
  }
  const uint32_t mant_odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xc8000fffu + mant_odd;  // rebias 127 -> 15, round to even
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

inline float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64u);  // quiet nan
  return static_cast<uint16_t>((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

}  // namespace bitnet
