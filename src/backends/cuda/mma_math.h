// The int8 tensor-core GEMM's fragments (w2a8_mma.cu) as __host__ __device__ functions, and a
// host twin of mma.m16n8k32.s32.s8.s8.s32, so that the host tests check how the kernel fills
// its fragments from W2C weights and int8 activations. The layouts are PTX ISA's "Matrix
// fragments for mma.m16n8k32" (.s8): lane = 4 * g + tig (groupID g, threadID_in_group tig);
//   A (16 x 32, row-major), 4 registers of 4 bytes: register i holds row g + 8 (i & 1),
//     columns 4 tig + 16 (i >> 1) .. +3 (byte b = column + b);
//   B (32 x 8, column-major), 2 registers: register i holds k = 4 tig + 16 i .. +3, column g;
//   C (16 x 8) int32, 4 registers: register i holds row g + 8 (i >> 1), column 2 tig + (i & 1).
// The twin follows those layouts; that the hardware does too is checked only on a GPU
// (cuda_kernels_test).
#pragma once

#include <cstdint>
#include <cstring>

#include "backends/cuda/w2a8_math.h"

// Loops the device compilers must unroll (register arrays indexed by the loop counter); nothing
// for gcc (it warns on an unknown pragma), nvcc's host pass included.
#if defined(__CUDA_ARCH__) || defined(__HIPCC__)
#define BITNET_UNROLL _Pragma("unroll")
#else
#define BITNET_UNROLL
#endif

namespace bitnet::cuda {

BITNET_HD int mma_a_row(int lane, int i) { return (lane >> 2) + 8 * (i & 1); }
BITNET_HD int mma_a_col(int lane, int i) { return 4 * (lane & 3) + 16 * (i >> 1); }
BITNET_HD int mma_b_k(int lane, int i) { return 4 * (lane & 3) + 16 * i; }
BITNET_HD int mma_b_n(int lane) { return lane >> 2; }
BITNET_HD int mma_c_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
BITNET_HD int mma_c_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

// A fragment of lane `lane` for weight rows row0 .. row0+15, columns k .. k+31 (k a multiple of
// 32) of a W2C weight (n_words words per row): four columns of a row are one unpack of a word,
// so the fragment is 4 word loads and shifts. Rows past n_rows read as code 0.
BITNET_HD void mma_load_a(const uint32_t* words, int64_t n_words, int64_t n_rows, int64_t row0, int64_t k, int lane,
                          int32_t a[4]) {
  for (int i = 0; i < 4; ++i) {
    const int64_t r = row0 + mma_a_row(lane, i);
    const int64_t col = k + mma_a_col(lane, i);
    const uint32_t w = r < n_rows ? words[r * n_words + col / kWordCols] : 0u;
    a[i] = unpack_lanes(w, static_cast<int>(col % kWordCols) / 4);
  }
}

// B fragment for tokens tok0 .. tok0+7, columns k .. k+31 of int8 rows q [n_tokens][n_cols]:
// one 4-byte load per register. Tokens past n_tokens read as 0.
BITNET_HD int32_t load_i32(const int8_t* p) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return *reinterpret_cast<const int32_t*>(p);
#else
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
BITNET_HD void mma_load_b(const int8_t* q, int64_t n_cols, int64_t n_tokens, int64_t tok0, int64_t k, int lane,
                          int32_t b[2]) {
  const int64_t t = tok0 + mma_b_n(lane);
  for (int i = 0; i < 2; ++i) b[i] = t < n_tokens ? load_i32(q + t * n_cols + k + mma_b_k(lane, i)) : 0;
}

// Host twin of one warp-wide mma.m16n8k32 s8 x s8 + s32: c[lane][i] += A B from the
// fragments of all 32 lanes.
inline void mma_m16n8k32_twin(const int32_t a[kWarp][4], const int32_t b[kWarp][2], int32_t c[kWarp][4]) {
  int8_t A[16][32], B[32][8];
  for (int lane = 0; lane < kWarp; ++lane) {
    for (int i = 0; i < 4; ++i) {
      for (int byte = 0; byte < 4; ++byte) {
        A[mma_a_row(lane, i)][mma_a_col(lane, i) + byte] = static_cast<int8_t>(static_cast<uint32_t>(a[lane][i]) >> (8 * byte));
      }
    }
    for (int i = 0; i < 2; ++i) {
      for (int byte = 0; byte < 4; ++byte) {
        B[mma_b_k(lane, i) + byte][mma_b_n(lane)] = static_cast<int8_t>(static_cast<uint32_t>(b[lane][i]) >> (8 * byte));
      }
    }
  }
  for (int lane = 0; lane < kWarp; ++lane) {
    for (int i = 0; i < 4; ++i) {
      int32_t sum = 0;
      for (int kk = 0; kk < 32; ++kk) sum += int32_t{A[mma_c_row(lane, i)][kk]} * int32_t{B[kk][mma_c_col(lane, i)]};
      c[lane][i] += sum;
    }
  }
}

// The same mma without the instruction (HIP, whose matrix cores take other shapes and
// layouts, and NVIDIA below sm_80), lane by lane: lane (g, tig) gathers, for t = 0..3, the
// four A registers of lane 4g + t (its rows g and g + 8) and the two B registers of lanes
// 4(2 tig) + t and 4(2 tig + 1) + t (its columns), and adds their dp4a products to its four
// C registers. `a_of(src, i)` / `b_of(src, i)` return register i of lane src's A / B fragment
// (a warp shuffle of width 32 on a device, an array read in the host test); every lane calls
// them with the same i in the same order. Integer sums: equal to the instruction's for any
// order (mma_m16n8k32_twin), checked by CudaMmaMath.LaneFallbackEqualsTheTwin.
template <class AOf, class BOf>
BITNET_HD void mma_m16n8k32_lanes(int lane, AOf a_of, BOf b_of, int32_t c[4]) {
  const int g = lane >> 2, tig = lane & 3;
BITNET_UNROLL
  for (int t = 0; t < 4; ++t) {
    int32_t at[4], bt[2][2];
BITNET_UNROLL
    for (int i = 0; i < 4; ++i) at[i] = a_of(4 * g + t, i);
BITNET_UNROLL
    for (int i = 0; i < 2; ++i) {
      bt[0][i] = b_of(4 * (2 * tig) + t, i);
      bt[1][i] = b_of(4 * (2 * tig + 1) + t, i);
    }
    // C register i: row half i >> 1 (A registers (i >> 1) and (i >> 1) + 2: columns 4t and
    // 16 + 4t), column 2 tig + (i & 1) (B registers 0 and 1: k = 4t and 16 + 4t).
BITNET_UNROLL
    for (int i = 0; i < 4; ++i) {
      c[i] = dp4a(at[i >> 1], bt[i & 1][0], c[i]);
      c[i] = dp4a(at[(i >> 1) + 2], bt[i & 1][1], c[i]);
    }
  }
}

// sum of q over the 64-column chunks of columns [k0, k1) of a token (its chunk sums).
BITNET_HD int32_t act_sum_range(const int32_t* chunk_sum, int64_t k0, int64_t k1) {
  int32_t sum = 0;
  for (int64_t c = k0 / kChunkCols; c < k1 / kChunkCols; ++c) sum += chunk_sum[c];
  return sum;
}

// Host twin of w2a8_mma.cu over a whole weight and n_tokens tokens, warp tile by warp tile in
// the kernel's order: per scale block, int32 mma accumulation over its columns, then the
// block's epilogue added to a float in block order (the CPU's order: bit-identical to
// matmul_ternary with per-row and with per-block scales). y [n_tokens][n_rows].
inline void w2a8_mma_twin(const uint32_t* words, const float* scales, int64_t n_rows, int64_t n_cols,
                          int64_t scale_block, const int8_t* q, const float* act_scale, const int32_t* chunk_sum,
                          int64_t n_tokens, float* y) {
  const int64_t n_words = n_cols / kWordCols, n_blocks = n_cols / scale_block, n_chunks = n_cols / kChunkCols;
  for (int64_t row0 = 0; row0 < n_rows; row0 += 16) {
    for (int64_t tok0 = 0; tok0 < n_tokens; tok0 += 8) {
      float acc[kWarp][4] = {};
      for (int64_t b = 0; b < n_blocks; ++b) {
        int32_t c[kWarp][4] = {};
        for (int64_t k = b * scale_block; k < (b + 1) * scale_block; k += 32) {
          int32_t fa[kWarp][4], fb[kWarp][2];
          for (int lane = 0; lane < kWarp; ++lane) {
            mma_load_a(words, n_words, n_rows, row0, k, lane, fa[lane]);
            mma_load_b(q, n_cols, n_tokens, tok0, k, lane, fb[lane]);
          }
          mma_m16n8k32_twin(fa, fb, c);
        }
        for (int lane = 0; lane < kWarp; ++lane) {
          for (int i = 0; i < 4; ++i) {
            const int64_t r = row0 + mma_c_row(lane, i), t = tok0 + mma_c_col(lane, i);
            if (r >= n_rows || t >= n_tokens) continue;
            const int32_t sum = act_sum_range(chunk_sum + t * n_chunks, b * scale_block, (b + 1) * scale_block);
            acc[lane][i] += w2a8_epilogue(c[lane][i], sum, act_scale[t], scales[r * n_blocks + b]);
          }
        }
      }
      for (int lane = 0; lane < kWarp; ++lane) {
        for (int i = 0; i < 4; ++i) {
          const int64_t r = row0 + mma_c_row(lane, i), t = tok0 + mma_c_col(lane, i);
          if (r < n_rows && t < n_tokens) y[t * n_rows + r] = acc[lane][i];
        }
      }
    }
  }
}

}  // namespace bitnet::cuda
