// Float-weight GEMV (the F16/F32/BF16/Q8_0 heads, the block formats of block_math.h, any float
// linear): one warp per row, each lane 8 columns per step (one 16-byte load of F16/BF16 codes,
// two of F32, 8 bytes of Q8_0 quants, 8 elements decoded from one block; Q6_K its own kernel,
// reading ahead), float accumulation,
// up to kTokens tokens per weight read. Rows whose width is not a multiple of 8 take element
// loads (kAny). The tied F16 head of
// 2B-4T is 657 MB per token: this kernel bounds decode speed as much as the ternary GEMV.
#include "backends/cuda/gpu_common.cuh"
#include "backends/cuda/kernels.h"

namespace bitnet::cuda {
namespace {

constexpr int kRowsPerBlock = 4;
constexpr int kStep = 8;  // columns per lane per step

// F == kBlocks: the blocks of format B (block_math.h); kStep divides every block's elements, so
// the 8 columns lie in one block.
template <FloatFormat F, BlockFormat B>
__device__ __forceinline__ void load8(const FloatWeightView& w, int64_t r, int64_t k, float out[kStep]) {
  const int64_t i = r * w.n_cols + k;
  if constexpr (F == FloatFormat::kBlocks) {
    constexpr int kElems = block_elems(B);
    const uint8_t* block = static_cast<const uint8_t*>(w.data) + (r * (w.n_cols / kElems) + k / kElems) * block_bytes(B);
    const int e = static_cast<int>(k % kElems);
#pragma unroll
    for (int j = 0; j < kStep; ++j) out[j] = block_value<B>(block, e + j);
  } else if constexpr (F == FloatFormat::kF32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(w.data) + i);
    const float4 a = __ldg(p), b = __ldg(p + 1);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  } else if constexpr (F == FloatFormat::kF16) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(static_cast<const __half*>(w.data) + i));
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      __half2 h;
      memcpy(&h, &u[j], 4);
      const float2 f = __half22float2(h);
      out[2 * j] = f.x;
      out[2 * j + 1] = f.y;
    }
  } else if constexpr (F == FloatFormat::kBF16) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w.data) + i));
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      out[2 * j] = __uint_as_float(u[j] << 16);
      out[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
    }
  } else {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(static_cast<const int8_t*>(w.data) + i));
    const float d = __ldg(w.q8_d + r * (w.n_cols / 32) + k / 32);
    const uint32_t u[2] = {v.x, v.y};
#pragma unroll
    for (int j = 0; j < kStep; ++j) out[j] = static_cast<float>(static_cast<int8_t>(u[j / 4] >> (8 * (j % 4)))) * d;
  }
}

// Weight k of row r read alone (F32, F16, BF16): the rows of a width that is not a multiple of
// 8 (stories260K's FFN of 172) are not 16-byte aligned for the vector loads.
template <FloatFormat F>
__device__ __forceinline__ float load1(const FloatWeightView& w, int64_t r, int64_t k) {
  const int64_t i = r * w.n_cols + k;
  if constexpr (F == FloatFormat::kF32) {
    return __ldg(static_cast<const float*>(w.data) + i);
  } else if constexpr (F == FloatFormat::kF16) {
    return __half2float(static_cast<const __half*>(w.data)[i]);
  } else {
    return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(w.data)[i]) << 16);
  }
}

// The sum of the 8 products, in the order every float GEMV here adds them.
__device__ __forceinline__ float dot8(const float wv[kStep], const float a[kStep]) {
  return wv[0] * a[0] + wv[1] * a[1] + wv[2] * a[2] + wv[3] * a[3] + wv[4] * a[4] + wv[5] * a[5] + wv[6] * a[6] +
         wv[7] * a[7];
}

__device__ __forceinline__ void load_acts8(const float* xp, float a[kStep]) {
  const float4 lo = __ldg(reinterpret_cast<const float4*>(xp)), hi = __ldg(reinterpret_cast<const float4*>(xp) + 1);
  a[0] = lo.x, a[1] = lo.y, a[2] = lo.z, a[3] = lo.w, a[4] = hi.x, a[5] = hi.y, a[6] = hi.z, a[7] = hi.w;
}

// The tokens of a block's tile: t0, t0 + 1, ... t0 + nt - 1 (blockIdx.y selects the tile).
struct TokenTile {
  int64_t t0;
  int nt;
};
template <int kTokens>
__device__ __forceinline__ TokenTile token_tile(int64_t n_tokens) {
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  return {t0, static_cast<int>(n_tokens - t0 < kTokens ? n_tokens - t0 : kTokens)};
}

// y[t][r] = the warp's sum of acc[t] for the tile's tokens (lane 0 writes).
template <int kTokens>
__device__ __forceinline__ void store_row(const float (&acc)[kTokens], TokenTile tile, int64_t r, int64_t n_rows,
                                          float* __restrict__ y) {
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= tile.nt) continue;
    const float s = warp_sum(acc[t]);
    if (threadIdx.x == 0) y[(tile.t0 + t) * n_rows + r] = s;
  }
}

// Q6_K rows: lane l takes elements 8l ... 8l + 7 of each block (the columns the kernel below
// gives it, added in the same order: the same sums), the raw bits of kQ6Ahead blocks (and for
// one token their activations) read before any is decoded, so that a row of 10 blocks waits
// for 3 rounds of loads instead of 10.
constexpr int kQ6Ahead = 4;

template <int kTokens>
__global__ void __launch_bounds__(kWarp* kRowsPerBlock)
    q6_K_gemv_kernel(FloatWeightView w, const float* __restrict__ x, int64_t n_tokens, float* __restrict__ y) {
  wait_for_previous();
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (r >= w.n_rows) return;
  const TokenTile tile = token_tile<kTokens>(n_tokens);
  constexpr int kBytes = block_bytes(BlockFormat::kQ6_K);
  const int64_t nb = w.n_cols / 256;
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * nb * kBytes;
  float acc[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
  for (int64_t b0 = 0; b0 < nb; b0 += kQ6Ahead) {
    Q6KLane raw[kQ6Ahead] = {};
    float a1[kTokens == 1 ? kQ6Ahead : 1][kStep];  // one token: its activations read ahead too
#pragma unroll
    for (int u = 0; u < kQ6Ahead; ++u) {
      if (b0 + u >= nb) continue;  // uniform over the warp
      raw[u] = block_q6_K_lane(row + (b0 + u) * kBytes, lane);
      if constexpr (kTokens == 1) load_acts8(x + tile.t0 * w.n_cols + (b0 + u) * 256 + lane * kStep, a1[u]);
    }
#pragma unroll
    for (int u = 0; u < kQ6Ahead; ++u) {
      if (b0 + u >= nb) continue;
      float wv[kStep];
      block_q6_K_values8(raw[u], lane, wv);
      const int64_t k = (b0 + u) * 256 + lane * kStep;
      if constexpr (kTokens == 1) {
        acc[0] += dot8(wv, a1[u]);
      } else {
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
          if (t >= tile.nt) continue;
          float a[kStep];
          load_acts8(x + (tile.t0 + t) * w.n_cols + k, a);
          acc[t] += dot8(wv, a);
        }
      }
    }
  }
  store_row(acc, tile, r, w.n_rows, y);
}

// kAny: rows of any width (F32, F16, BF16), element loads and the columns past the row held at
// 0; else 16-byte loads (n_cols a multiple of 8).
template <FloatFormat F, BlockFormat B, int kTokens, bool kAny>
__global__ void __launch_bounds__(kWarp* kRowsPerBlock)
    matmul_float_kernel(FloatWeightView w, const float* __restrict__ x, int64_t n_tokens, float* __restrict__ y) {
  wait_for_previous();
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (r >= w.n_rows) return;
  const TokenTile tile = token_tile<kTokens>(n_tokens);
  float acc[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
  for (int64_t k = static_cast<int64_t>(lane) * kStep; k < w.n_cols; k += kWarp * kStep) {
    float wv[kStep];
    if constexpr (kAny) {
#pragma unroll
      for (int j = 0; j < kStep; ++j) wv[j] = k + j < w.n_cols ? load1<F>(w, r, k + j) : 0.0f;
    } else {
      load8<F, B>(w, r, k, wv);
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      if (t >= tile.nt) continue;
      const float* xp = x + (tile.t0 + t) * w.n_cols + k;
      float a[kStep];
      if constexpr (kAny) {
#pragma unroll
        for (int j = 0; j < kStep; ++j) a[j] = k + j < w.n_cols ? __ldg(xp + j) : 0.0f;
      } else {
        load_acts8(xp, a);
      }
      acc[t] += dot8(wv, a);
    }
  }
  store_row(acc, tile, r, w.n_rows, y);
}

template <FloatFormat F, BlockFormat B, int kTokens, bool kAny>
GpuError launch(const FloatWeightView& w, const float* x, int64_t n_tokens, float* y, GpuStream stream) {
  const dim3 block(kWarp, kRowsPerBlock);
  const dim3 grid(static_cast<unsigned>((w.n_rows + kRowsPerBlock - 1) / kRowsPerBlock),
                  static_cast<unsigned>((n_tokens + kTokens - 1) / kTokens));
  if constexpr (F == FloatFormat::kBlocks && B == BlockFormat::kQ6_K) {
    return launch_dependent(q6_K_gemv_kernel<kTokens>, grid, block, stream, w, x, n_tokens, y);
  } else {
    return launch_dependent(matmul_float_kernel<F, B, kTokens, kAny>, grid, block, stream, w, x, n_tokens, y);
  }
}

template <FloatFormat F, BlockFormat B = BlockFormat::kQ4_0>
GpuError dispatch_tokens(const FloatWeightView& w, const float* x, int64_t n_tokens, float* y, GpuStream stream) {
  if constexpr (F == FloatFormat::kF32 || F == FloatFormat::kF16 || F == FloatFormat::kBF16) {
    if (w.n_cols % kStep != 0) {
      return n_tokens == 1 ? launch<F, B, 1, true>(w, x, n_tokens, y, stream) : launch<F, B, 4, true>(w, x, n_tokens, y, stream);
    }
  }
  return n_tokens == 1 ? launch<F, B, 1, false>(w, x, n_tokens, y, stream) : launch<F, B, 4, false>(w, x, n_tokens, y, stream);
}

GpuError dispatch_blocks(const FloatWeightView& w, const float* x, int64_t n_tokens, float* y, GpuStream stream) {
  constexpr FloatFormat kB = FloatFormat::kBlocks;
  switch (w.block) {
    case BlockFormat::kQ4_0: return dispatch_tokens<kB, BlockFormat::kQ4_0>(w, x, n_tokens, y, stream);
    case BlockFormat::kQ4_1: return dispatch_tokens<kB, BlockFormat::kQ4_1>(w, x, n_tokens, y, stream);
    case BlockFormat::kQ5_0: return dispatch_tokens<kB, BlockFormat::kQ5_0>(w, x, n_tokens, y, stream);
    case BlockFormat::kQ5_1: return dispatch_tokens<kB, BlockFormat::kQ5_1>(w, x, n_tokens, y, stream);
    case BlockFormat::kQ2_K: return dispatch_tokens<kB, BlockFormat::kQ2_K>(w, x, n_tokens, y, stream);
    case BlockFormat::kQ3_K: return dispatch_tokens<kB, BlockFormat::kQ3_K>(w, x, n_tokens, y, stream);
    case BlockFormat::kQ4_K: return dispatch_tokens<kB, BlockFormat::kQ4_K>(w, x, n_tokens, y, stream);
    case BlockFormat::kQ5_K: return dispatch_tokens<kB, BlockFormat::kQ5_K>(w, x, n_tokens, y, stream);
    case BlockFormat::kQ6_K: return dispatch_tokens<kB, BlockFormat::kQ6_K>(w, x, n_tokens, y, stream);
    case BlockFormat::kIQ4_NL: return dispatch_tokens<kB, BlockFormat::kIQ4_NL>(w, x, n_tokens, y, stream);
    case BlockFormat::kIQ4_XS: return dispatch_tokens<kB, BlockFormat::kIQ4_XS>(w, x, n_tokens, y, stream);
  }
  return kGpuInvalidValue;
}

}  // namespace

GpuError matmul_float(const FloatWeightView& w, const float* x, int64_t n_tokens, float* y, GpuStream stream) {
  if (n_tokens <= 0 || (n_tokens + 3) / 4 > 65535 || w.n_rows <= 0 || !float_view_cols_ok(w) ||
      (w.n_rows + kRowsPerBlock - 1) / kRowsPerBlock > 0x7fffffff) {
    return kGpuInvalidValue;
  }
  switch (w.format) {
    case FloatFormat::kF32: return dispatch_tokens<FloatFormat::kF32>(w, x, n_tokens, y, stream);
    case FloatFormat::kF16: return dispatch_tokens<FloatFormat::kF16>(w, x, n_tokens, y, stream);
    case FloatFormat::kBF16: return dispatch_tokens<FloatFormat::kBF16>(w, x, n_tokens, y, stream);
    case FloatFormat::kQ8_0: return dispatch_tokens<FloatFormat::kQ8_0>(w, x, n_tokens, y, stream);
    case FloatFormat::kBlocks: return dispatch_blocks(w, x, n_tokens, y, stream);
  }
  return kGpuInvalidValue;
}

}  // namespace bitnet::cuda
