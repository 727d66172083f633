// The arithmetic of the CUDA (and HIP) W2A8 kernels as __host__ __device__ functions, so that
// the host tests check the very code the kernels run against the scalar reference
// (src/backends/cpu/kernels_scalar.cpp, src/quant): decoding of the file formats, the repack
// into the device layout, the 2-bit unpack, dp4a, the epilogue and activation quantization.
// Plain C++ when no CUDA/HIP compiler reads it (the host tests build it with g++ and clang).
//
// Device layout of a ternary weight ("W2C", docs/design.md "CUDA backend"): row-major, each row
// n_cols / 4 bytes (n_cols a multiple of kChunkCols). A row is a sequence of 32-bit words of 16
// columns; word k of row r holds columns 16k .. 16k+15 with column 16k + 4i + b in byte b,
// bits 2i..2i+1 (code = w + 1 in {0, 1, 2}). So `(word >> 2i) & 0x03030303` is four int8 lanes
// holding columns 16k + 4i .. +3: the lanes of one 32-bit load of int8 activations, ready for
// __dp4a. Four words (16 bytes, one uint4 load) make a chunk of 64 columns; lane l of a warp
// reads chunk l + 32 * it of its row, so a warp's load instruction reads 512 contiguous bytes.
// Scales: one float per scale block of `scale_block` columns of a row (the row for I2_S and for
// TQ files whose blocks share one d; 256 otherwise), row-major [n_rows][n_cols / scale_block].
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/fp16_bits.h"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define BITNET_HD __host__ __device__ inline
#else
#define BITNET_HD inline
#endif

namespace bitnet::cuda {

inline constexpr int kWordCols = 16;   // columns per 32-bit word of codes
inline constexpr int kChunkCols = 64;  // columns per 16-byte chunk (one uint4 load)
inline constexpr int kChunkWords = kChunkCols / kWordCols;
inline constexpr int kWarp = 32;

// ---- decoding the file formats (FORMATS.md): the code (0..3) of column j ----

// I2_S: 128-column groups of 32 bytes; column j of a group in byte j % 32, bits 7-2(j/32) ..
// 6-2(j/32) (high bits first). `group` points at the group's 32 bytes, j < 128.
BITNET_HD uint32_t i2s_code(const uint8_t* group, int j) {
  return (static_cast<uint32_t>(group[j & 31]) >> (6 - 2 * (j >> 5))) & 3u;
}

// TQ2_0: 66-byte blocks of 256 columns; column 128h + m + 32n in qs[32h + m], bits 2n..2n+1.
BITNET_HD uint32_t tq2_0_code(const uint8_t* block, int j) {
  const int h = j >> 7, n = (j >> 5) & 3, m = j & 31;
  return (static_cast<uint32_t>(block[32 * h + m]) >> (2 * n)) & 3u;
}

// TQ1_0: 54-byte blocks of 256 columns; qs[48] with 5 trits per byte (columns m + 32n from
// qs[m], then 160 + m + 16n from qs[32 + m]), qh[4] with 4 (240 + m + 4n from qh[m]). Trit n of
// a byte q is ((uint8_t)(q * 3^n) * 3) >> 8.
BITNET_HD uint32_t tq1_0_code(const uint8_t* block, int j) {
  int byte, n;
  if (j < 160) {
    byte = j & 31;
    n = j >> 5;
  } else if (j < 240) {
    byte = 32 + ((j - 160) & 15);
    n = (j - 160) >> 4;
  } else {
    byte = 48 + ((j - 240) & 3);
    n = (j - 240) >> 2;
  }
  uint32_t m = block[byte];
  for (int i = 0; i < n; ++i) m = (m * 3u) & 255u;  // q * 3^n mod 256
  return (m * 3u) >> 8;
}

// IEEE half -> float through core/fp16_bits.h, as core/fp16.h converts (the TQ blocks' d).
BITNET_HD float half_bits_to_float(uint16_t h) {
  const uint32_t bits = fp16_to_fp32_bits(h);
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

enum class TernaryFormat : uint8_t { kI2S, kTQ2_0, kTQ1_0 };

// Bytes of one row of n_cols columns in the file (I2_S: codes only; the tensor's scale sits in
// the trailer after all rows), and columns per file block.
BITNET_HD int64_t ternary_row_bytes(TernaryFormat f, int64_t n_cols) {
  switch (f) {
    case TernaryFormat::kI2S: return n_cols / 4;
    case TernaryFormat::kTQ2_0: return n_cols / 256 * 66;
    case TernaryFormat::kTQ1_0: return n_cols / 256 * 54;
  }
  return 0;
}
BITNET_HD int ternary_block_cols(TernaryFormat f) { return f == TernaryFormat::kI2S ? 128 : 256; }

// Code of column j of a file row.
BITNET_HD uint32_t ternary_code(TernaryFormat f, const uint8_t* row, int64_t j) {
  switch (f) {
    case TernaryFormat::kI2S: return i2s_code(row + j / 128 * 32, static_cast<int>(j % 128));
    case TernaryFormat::kTQ2_0: return tq2_0_code(row + j / 256 * 66, static_cast<int>(j % 256));
    case TernaryFormat::kTQ1_0: return tq1_0_code(row + j / 256 * 54, static_cast<int>(j % 256));
  }
  return 3;
}

// d of the 256-column file block b of a TQ row (I2_S has none: its scale is per tensor).
BITNET_HD float tq_block_scale(TernaryFormat f, const uint8_t* row, int64_t b) {
  const int64_t block_bytes = f == TernaryFormat::kTQ2_0 ? 66 : 54;
  const uint8_t* d = row + b * block_bytes + block_bytes - 2;
  return half_bits_to_float(static_cast<uint16_t>(d[0] | (d[1] << 8)));
}

// ---- the device layout ----

// Word k of a row in the W2C layout from the 16 codes of columns 16k .. 16k+15.
BITNET_HD uint32_t pack_word(const uint32_t codes[kWordCols]) {
  uint32_t w = 0;
  for (int i = 0; i < 4; ++i) {
    for (int b = 0; b < 4; ++b) w |= (codes[4 * i + b] & 3u) << (8 * b + 2 * i);
  }
  return w;
}

// The four int8 lanes (columns 16k + 4i .. +3, lane b = column 16k + 4i + b) of word k.
BITNET_HD int32_t unpack_lanes(uint32_t word, int i) { return static_cast<int32_t>((word >> (2 * i)) & 0x03030303u); }

// Repacks row r of a file tensor into `words` (n_cols / 16 of them). Returns false when a code
// is 3 (not a ternary value): the caller rejects the tensor. One thread per word on the device
// (repack_row_words over a word range), or a plain loop on the host.
BITNET_HD bool repack_words(TernaryFormat f, const uint8_t* row, int64_t k0, int64_t k1, uint32_t* words) {
  bool ok = true;
  for (int64_t k = k0; k < k1; ++k) {
    uint32_t codes[kWordCols];
    for (int c = 0; c < kWordCols; ++c) {
      codes[c] = ternary_code(f, row, kWordCols * k + c);
      ok = ok && codes[c] != 3;
    }
    words[k] = pack_word(codes);
  }
  return ok;
}

// ---- the dot product ----

// AMD GPUs with v_dot4_i32_i8 (LLVM's dot1-insts; ROCm 5.2's clang 15 has no macro for the
// feature, so the architectures are named): the listed ones use it, every other target the
// byte loop below, the same sums (an unlisted architecture with the instruction is only slower).
#if defined(__HIP_DEVICE_COMPILE__) &&                                                         \
    (defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx1011__) || \
     defined(__gfx1012__) || defined(__gfx1030__) || defined(__gfx1031__) || defined(__gfx1032__) || \
     defined(__gfx1033__) || defined(__gfx1034__) || defined(__gfx1035__) || defined(__gfx1036__))
#define BITNET_AMDGCN_SDOT4 1
#endif

// __dp4a(a, b, c): c + the sum of the four products of a's and b's signed bytes.
BITNET_HD int32_t dp4a(int32_t a, int32_t b, int32_t c) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610)
  return __dp4a(a, b, c);
#elif defined(BITNET_AMDGCN_SDOT4)
  return __builtin_amdgcn_sdot4(a, b, c, false);  // clamp = false: no saturation, as __dp4a
#else
  const auto u = static_cast<uint32_t>(a), v = static_cast<uint32_t>(b);
  for (int i = 0; i < 4; ++i) {
    c += static_cast<int32_t>(static_cast<int8_t>(u >> (8 * i))) * static_cast<int32_t>(static_cast<int8_t>(v >> (8 * i)));
  }
  return c;
#endif
}

// sum code * q over one word's 16 columns: act[i] holds the int8 activations of columns
// 16k + 4i .. +3 (one little-endian int32 each). |sum| <= 16 * 2 * 128: no overflow anywhere
// in a row below 2^21 columns.
BITNET_HD int32_t word_dot(uint32_t word, const int32_t act[4], int32_t acc) {
  for (int i = 0; i < 4; ++i) acc = dp4a(unpack_lanes(word, i), act[i], acc);
  return acc;
}

// The epilogue, as the CPU's: y = (sum code * q - act_sum) / s * w_scale (FORMATS.md), where
// dot and act_sum run over one scale block (the row for a per-row scale).
BITNET_HD float w2a8_epilogue(int32_t dot, int32_t act_sum, float s, float w_scale) {
  return static_cast<float>(dot - act_sum) / s * w_scale;
}

// The integer term of one 64-column chunk: sum code * q over its columns (w: its 4 words; act:
// its 64 activations as 16 int32) minus their activation sum. One lane of the GEMV computes it
// per chunk; the terms of a scale block add up to the CPU's `dot - act_sum` exactly.
BITNET_HD int32_t chunk_term(const uint32_t w[kChunkWords], const int32_t act[16], int32_t chunk_sum) {
  int32_t d = 0;
  for (int k = 0; k < kChunkWords; ++k) d = word_dot(w[k], act + 4 * k, d);
  return d - chunk_sum;
}

// Whether the GEMV's lane groups can hold a scale block: a whole row, or a power of two of
// chunks that divides the warp (lanes 4k..4k+3 hold the 4 chunks of a 256-column block).
BITNET_HD bool w2a8_scale_block_ok(int64_t n_cols, int64_t scale_block) {
  if (n_cols <= 0 || n_cols % kChunkCols != 0 || scale_block <= 0 || n_cols % scale_block != 0) return false;
  if (scale_block == n_cols) return true;
  const int64_t lanes = scale_block / kChunkCols;
  return scale_block % kChunkCols == 0 && lanes <= kWarp && (lanes & (lanes - 1)) == 0;
}

// Host twin of the W2A8 GEMV kernel (w2a8_gemv.cu) for one row and one token, in the kernel's
// order: lane l takes chunks l, l + 32, ...; a per-row scale sums the lanes' integer terms
// (exact: bit-identical to the CPU's matmul_ternary); per-block scales sum each block's terms
// over its lanes in int32, the block's first lane adds the block's epilogue to its float
// accumulator, and the warp adds the 32 accumulators with the butterfly of __shfl_xor_sync
// (offsets 16, 8, 4, 2, 1). words: the row's n_cols / 16 words; q: the token's int8 row;
// chunk_sum: its sums per 64 columns; scales: the row's n_cols / scale_block scales.
inline float w2a8_row_twin(const uint32_t* words, const int8_t* q, const int32_t* chunk_sum, float s,
                           const float* scales, int64_t n_cols, int64_t scale_block) {
  const int64_t n_chunks = n_cols / kChunkCols;
  const auto term = [&](int64_t c) {
    int32_t act[16];
    std::memcpy(act, q + c * kChunkCols, sizeof act);
    return chunk_term(words + c * kChunkWords, act, chunk_sum[c]);
  };
  if (scale_block == n_cols) {
    int32_t total = 0;
    for (int64_t c = 0; c < n_chunks; ++c) total += term(c);
    return w2a8_epilogue(total, 0, s, scales[0]);
  }
  const int64_t lanes_per_block = scale_block / kChunkCols;
  float acc[kWarp] = {};
  for (int64_t c0 = 0; c0 < n_chunks; c0 += kWarp) {
    for (int64_t l = 0; l < kWarp; l += lanes_per_block) {
      if (c0 + l >= n_chunks) break;
      int32_t block = 0;
      for (int64_t i = 0; i < lanes_per_block; ++i) block += term(c0 + l + i);
      acc[l] += w2a8_epilogue(block, 0, s, scales[(c0 + l) / lanes_per_block]);
    }
  }
  for (int off = kWarp / 2; off >= 1; off /= 2) {
    float next[kWarp];
    for (int l = 0; l < kWarp; ++l) next[l] = acc[l] + acc[l ^ off];
    for (int l = 0; l < kWarp; ++l) acc[l] = next[l];
  }
  return acc[0];
}

// ---- activation quantization (quant/act_quant.h) ----

// s = 127 / max(max|x|, 1e-5), taken in double as bitnet.cpp does; amax is max|x| in float (exact).
BITNET_HD float act_scale(float amax) {
  const double m = static_cast<double>(amax) > 1e-5 ? static_cast<double>(amax) : 1e-5;
  return static_cast<float>(127.0 / m);
}

// round_half_to_even(x * s) clamped to [-128, 127]; NaN -> 0.
BITNET_HD int8_t act_quant_one(float x, float s) {
  const float r = rintf(x * s);
  if (r >= 127.0f) return 127;
  if (r <= -128.0f) return -128;
  return r == r ? static_cast<int8_t>(r) : 0;
}

// Host twin of the activation quantization of one row (norm_quant.cu without the norm): q,
// s and the sums per 64 columns that the GEMV's epilogue subtracts.
inline float act_quant_row_twin(const float* x, int64_t n_cols, int8_t* q, int32_t* chunk_sum) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n_cols; ++i) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;  // NaN skipped
  const float s = act_scale(amax);
  for (int64_t c = 0; c < n_cols / kChunkCols; ++c) {
    int32_t sum = 0;
    for (int64_t i = c * kChunkCols; i < (c + 1) * kChunkCols; ++i) sum += q[i] = act_quant_one(x[i], s);
    chunk_sum[c] = sum;
  }
  return s;
}

}  // namespace bitnet::cuda
