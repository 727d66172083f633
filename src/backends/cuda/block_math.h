// llama.cpp's block formats as the CUDA (and HIP) float kernels read them in place: element e of
// one block, computed exactly as src/quant's dequantizers compute it (the same float operations
// in the same order; the kernels are built with --fmad=false), as __host__ __device__ functions
// so that the host tests check the very code the kernels run (block_math_test.cpp), except two
// device-only branches: block_u16's read-only cache load and the Q6_K lane's fp16 conversion by
// one PTX instruction (exact, as the host's). Byte
// layouts: docs/FORMATS.md and src/quant (q4_q5.cpp, q2_k_q3_k.cpp, q4_k_q5_k.cpp, q6_k.cpp,
// iq4.cpp).
#pragma once

#include <cstdint>

#include "core/fp16_bits.h"

#ifndef BITNET_HD
#if defined(__CUDACC__) || defined(__HIPCC__)
#define BITNET_HD __host__ __device__ inline
#else
#define BITNET_HD inline
#endif
#endif

namespace bitnet::cuda {

enum class BlockFormat : uint8_t { kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ4_NL, kIQ4_XS };

// Elements and bytes of one block of f (constexpr: the kernels' block strides).
BITNET_HD constexpr int block_elems(BlockFormat f) {
  switch (f) {
    case BlockFormat::kQ4_0:
    case BlockFormat::kQ4_1:
    case BlockFormat::kQ5_0:
    case BlockFormat::kQ5_1:
    case BlockFormat::kIQ4_NL: return 32;
    default: return 256;
  }
}
BITNET_HD constexpr int block_bytes(BlockFormat f) {
  switch (f) {
    case BlockFormat::kQ4_0: return 18;
    case BlockFormat::kQ4_1: return 20;
    case BlockFormat::kQ5_0: return 22;
    case BlockFormat::kQ5_1: return 24;
    case BlockFormat::kQ2_K: return 84;
    case BlockFormat::kQ3_K: return 110;
    case BlockFormat::kQ4_K: return 144;
    case BlockFormat::kQ5_K: return 176;
    case BlockFormat::kQ6_K: return 210;
    case BlockFormat::kIQ4_NL: return 18;
    case BlockFormat::kIQ4_XS: return 136;
  }
  return 0;
}

// The fp16 at p (little-endian, any alignment) as a float.
BITNET_HD float block_fp16(const uint8_t* p) {
  const uint32_t bits = fp16_to_fp32_bits(static_cast<uint16_t>(p[0] | (p[1] << 8)));
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// The 4-bit code of element e of a 32-element block of nibbles qs[16]: low nibbles first.
BITNET_HD int block_nibble32(const uint8_t* qs, int e) { return e < 16 ? (qs[e] & 0x0F) : (qs[e - 16] >> 4); }

// Q5_0/Q5_1: the nibble plus bit e of the 32-bit qh (little-endian) as 16.
BITNET_HD int block_q5_code(const uint8_t* qh, const uint8_t* qs, int e) {
  const uint32_t h = static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
                     static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
  return block_nibble32(qs, e) | static_cast<int>(((h >> e) << 4) & 0x10);
}

// Q2_K/Q3_K: the 2-bit code of element e, bits 2 * ((e % 128) / 32) of qs[32 * (e / 128) + e % 32].
BITNET_HD int block_low2(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

// Q3_K: the 6-bit scale of sub-block s (of 16), before the -32.
BITNET_HD int block_q3_K_scale(const uint8_t* scales, int s) {
  const int low = s < 8 ? (scales[s] & 0xF) : (scales[s - 8] >> 4);
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low | (high << 4);
}

// IQ4_NL/IQ4_XS: the table value of code q (ggml's kvalues_iq4nl: -127, -104, -83, -65, -49,
// -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113), from two packed words (no table in memory,
// so the same code runs on the host and the device).
BITNET_HD int block_iq4_value(int q) {
  const uint64_t word = q < 8 ? 0xF6EADDCFBFAD9881ull : 0x7159453526190D01ull;
  return static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * (q % 8))));
}

// Q4_K/Q5_K: the 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
BITNET_HD void block_scale_min_k4(int j, const uint8_t* q, int* scale, int* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K/Q5_K element e = 64c + 32k + l: nibble k of qs[32c + l].
BITNET_HD int block_q4_K_nibble(const uint8_t* qs, int e) {
  const uint8_t b = qs[32 * (e / 64) + e % 32];
  return (e / 32) % 2 == 0 ? (b & 0xF) : (b >> 4);
}

// d * code - m of a K-quant sub-block (d = fp16 d * scale, m = fp16 dmin * min), as ggml.
BITNET_HD float block_k_value(const uint8_t* block, int e, int code) {
  int sc = 0, mn = 0;
  block_scale_min_k4(e / 32, block + 4, &sc, &mn);
  const float d = block_fp16(block) * static_cast<float>(sc);
  const float m = block_fp16(block + 2) * static_cast<float>(mn);
  return d * static_cast<float>(code) - m;
}

// Element e (0 <= e < block_elems(F)) of the block at `block`.
template <BlockFormat F>
BITNET_HD float block_value(const uint8_t* block, int e) {
  if constexpr (F == BlockFormat::kQ4_0) {
    return static_cast<float>(block_nibble32(block + 2, e) - 8) * block_fp16(block);
  } else if constexpr (F == BlockFormat::kQ4_1) {
    return static_cast<float>(block_nibble32(block + 4, e)) * block_fp16(block) + block_fp16(block + 2);
  } else if constexpr (F == BlockFormat::kQ5_0) {
    return static_cast<float>(block_q5_code(block + 2, block + 6, e) - 16) * block_fp16(block);
  } else if constexpr (F == BlockFormat::kQ5_1) {
    return static_cast<float>(block_q5_code(block + 4, block + 8, e)) * block_fp16(block) + block_fp16(block + 2);
  } else if constexpr (F == BlockFormat::kQ2_K) {  // scales[16], qs[64], fp16 d, fp16 dmin
    const int sc = block[e / 16];
    const float dl = block_fp16(block + 80) * static_cast<float>(sc & 0xF);
    const float ml = block_fp16(block + 82) * static_cast<float>(sc >> 4);
    return dl * static_cast<float>(block_low2(block + 16, e)) - ml;
  } else if constexpr (F == BlockFormat::kQ3_K) {  // hmask[32], qs[64], scales[12], fp16 d
    const float dl = block_fp16(block + 108) * static_cast<float>(block_q3_K_scale(block + 96, e / 16) - 32);
    const int high = (block[e % 32] >> (e / 32)) & 1;
    return dl * static_cast<float>(block_low2(block + 32, e) - (high ? 0 : 4));
  } else if constexpr (F == BlockFormat::kIQ4_NL) {
    return block_fp16(block) * static_cast<float>(block_iq4_value(block_nibble32(block + 2, e)));
  } else if constexpr (F == BlockFormat::kIQ4_XS) {  // fp16 d, scales_h (u16), scales_l[4], qs[128]
    const int s = e / 32;
    const int scales_h = block[2] | (block[3] << 8);
    const int scale = ((block[4 + s / 2] >> (4 * (s % 2))) & 0xF) | (((scales_h >> (2 * s)) & 3) << 4);
    const float dl = block_fp16(block) * static_cast<float>(scale - 32);
    return dl * static_cast<float>(block_iq4_value(block_nibble32(block + 8 + 16 * s, e % 32)));
  } else if constexpr (F == BlockFormat::kQ4_K) {
    return block_k_value(block, e, block_q4_K_nibble(block + 16, e));
  } else if constexpr (F == BlockFormat::kQ5_K) {
    const int high = (block[16 + e % 32] >> (e / 32)) & 1;
    return block_k_value(block, e, block_q4_K_nibble(block + 48, e) + 16 * high);
  } else {  // Q6_K: ql[128], qh[64], int8 scales[16], fp16 d
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lo = block[64 * h + 32 * (k % 2) + l];
    const int low = k < 2 ? (lo & 0xF) : (lo >> 4);
    const int high = (block[128 + 32 * h + l] >> (2 * k)) & 3;
    const auto q = static_cast<float>((low | (high << 4)) - 32);
    return block_fp16(block + 208) * static_cast<float>(static_cast<int8_t>(block[192 + e / 16])) * q;
  }
}

// The 16 bits at p (2-byte aligned, little-endian). On the device through the read-only cache
// (__ldg): only for weights, which no kernel writes.
BITNET_HD uint32_t block_u16(const uint8_t* p) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __ldg(reinterpret_cast<const unsigned short*>(p));
#else
  uint16_t v;
  __builtin_memcpy(&v, p, 2);
  return v;
#endif
}

// Q6_K: elements 8j ... 8j + 7 of a block (j < 32; lane j of the float GEMV's warp reads
// them) in two steps, so that a kernel can issue the reads of several blocks before it decodes
// any: the raw bits (8 bytes of low nibbles and 8 of high bit pairs, read 2 bytes at a time:
// a block of a row of 210-byte blocks is only 2-byte aligned; the int8 scale; d), then the
// values block_value<kQ6_K> gives, by the same float operations, four codes per 32-bit word.
// Byte by byte, the 2B-4T head's 128256 x 2560 Q6_K GEMV took 0.93 ms on an H200.
struct Q6KLane {
  uint32_t lo[2];  // low-nibble bytes of elements 8j + 4w ... (both nibbles: k < 2 the low ones)
  uint32_t hi[2];  // high-pair bytes
  int32_t scale;   // the sub-block's int8 scale
  uint32_t d;      // fp16 bits
};

BITNET_HD Q6KLane block_q6_K_lane(const uint8_t* block, int j) {
  const int e0 = 8 * j, h = e0 / 128, k = (e0 % 128) / 32, l0 = e0 % 32;
  const uint8_t* lo = block + 64 * h + 32 * (k % 2) + l0;
  const uint8_t* hi = block + 128 + 32 * h + l0;
  Q6KLane r;
  for (int w = 0; w < 2; ++w) {
    r.lo[w] = block_u16(lo + 4 * w) | block_u16(lo + 4 * w + 2) << 16;
    r.hi[w] = block_u16(hi + 4 * w) | block_u16(hi + 4 * w + 2) << 16;
  }
  r.scale = static_cast<int8_t>(block[192 + e0 / 16]);
  r.d = block_u16(block + 208);
  return r;
}

// A code c < 256 as the float c - 32 without an int-to-float conversion (a low-rate instruction
// on NVIDIA GPUs, 16 per clock and SM on sm_90 against 128 float operations, and 8 per lane and
// block here): the bits 0x4B000000 | c are the float 2^23 + c, and (2^23 + c) - (2^23 + 32) is
// exact.
BITNET_HD float block_code_minus_32(uint32_t c) {
  const uint32_t bits = 0x4B000000u | c;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f - 8388640.0f;
}

BITNET_HD void block_q6_K_values8(const Q6KLane& r, int j, float out[8]) {
  const int k = (8 * j % 128) / 32;
  float d;
#if defined(__CUDA_ARCH__)
  asm("cvt.f32.f16 %0, %1;" : "=f"(d) : "h"(static_cast<unsigned short>(r.d)));  // exact, as the host's
#else
  const uint32_t dbits = fp16_to_fp32_bits(static_cast<uint16_t>(r.d));
  __builtin_memcpy(&d, &dbits, 4);
#endif
  const float dsc = d * static_cast<float>(r.scale);
  for (int w = 0; w < 2; ++w) {
    const uint32_t code = ((k < 2 ? r.lo[w] : r.lo[w] >> 4) & 0x0F0F0F0Fu) | ((r.hi[w] >> (2 * k)) & 0x03030303u) << 4;
    for (int b = 0; b < 4; ++b) out[4 * w + b] = dsc * block_code_minus_32((code >> (8 * b)) & 0xFFu);
  }
}

// Element e of the block at `block` in format f.
BITNET_HD float block_value(BlockFormat f, const uint8_t* block, int e) {
  switch (f) {
    case BlockFormat::kQ4_0: return block_value<BlockFormat::kQ4_0>(block, e);
    case BlockFormat::kQ4_1: return block_value<BlockFormat::kQ4_1>(block, e);
    case BlockFormat::kQ5_0: return block_value<BlockFormat::kQ5_0>(block, e);
    case BlockFormat::kQ5_1: return block_value<BlockFormat::kQ5_1>(block, e);
    case BlockFormat::kQ2_K: return block_value<BlockFormat::kQ2_K>(block, e);
    case BlockFormat::kQ3_K: return block_value<BlockFormat::kQ3_K>(block, e);
    case BlockFormat::kQ4_K: return block_value<BlockFormat::kQ4_K>(block, e);
    case BlockFormat::kQ5_K: return block_value<BlockFormat::kQ5_K>(block, e);
    case BlockFormat::kQ6_K: return block_value<BlockFormat::kQ6_K>(block, e);
    case BlockFormat::kIQ4_NL: return block_value<BlockFormat::kIQ4_NL>(block, e);
    case BlockFormat::kIQ4_XS: return block_value<BlockFormat::kIQ4_XS>(block, e);
  }
  return 0.0f;
}

}  // namespace bitnet::cuda
