// The bits of IEEE half -> float (bit-exact with ggml's reference), in C++17 and callable from
// CUDA/HIP device code: core/fp16.h (host) and the CUDA kernels' host/device twins
// (backends/cuda/w2a8_math.h) both convert through it.
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define BITNET_FP16_HD __host__ __device__
#else
#define BITNET_FP16_HD
#endif

namespace bitnet {

BITNET_FP16_HD inline constexpr uint32_t fp16_to_fp32_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return sign | 0x7f800000u | (mant << 13);          // inf / nan
  if (exp != 0) return sign | ((exp + 112u) << 23) | (mant << 13);    // normal: rebias 15 -> 127
  if (mant == 0) return sign;                                         // zero
  // Subnormal half: normalise into a float.
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return sign | (e << 23) | ((mant & 0x3ffu) << 13);
}

}  // namespace bitnet
