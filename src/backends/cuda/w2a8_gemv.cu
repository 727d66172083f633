// The W2A8 GEMV: ternary weights in the W2C layout times int8 activations (w2a8_math.h).
//
// One warp per output row, kRowsPerBlock rows per block. Lane l reads chunk l + 32 * it of the
// row: one 16-byte load of 64 columns' codes, so a warp's load instruction covers 512
// contiguous bytes; the 64 activations of the chunk are four 16-byte loads (L1/L2 hits: every
// row reads the same ones). Each 32-bit word of codes gives four dp4a operands by shift and
// mask. Tokens come in tiles of kTokens (1, 4 or 8) per weight read: decode reads each weight
// byte once; a batch or prefill reads it once per 8 tokens (the mma GEMM for large prefills
// is not written yet).
//
// Reduction (w2a8_row_twin reproduces it on the host): a per-row scale adds every lane's
// integer terms and applies the epilogue once (bit-identical to the CPU); per-block scales
// (256 columns = 4 chunks = 4 neighbouring lanes) add the block's terms with xor shuffles, the
// block's first lane adds its epilogue to a float, and the warp adds the floats.
#include "backends/cuda/gpu_common.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/w2a8_math.h"

namespace bitnet::cuda {
namespace {

constexpr int kRowsPerBlock = 4;

template <int kTokens>
__global__ void __launch_bounds__(kWarp* kRowsPerBlock)
    w2a8_gemv_kernel(const uint4* __restrict__ words, const float* __restrict__ scales, int64_t n_rows, int64_t n_cols,
                     int64_t scale_block, const int8_t* __restrict__ q, const float* __restrict__ act_scale,
                     const int32_t* __restrict__ chunk_sum, int64_t n_tokens, float* __restrict__ y) {
  const int lane = static_cast<int>(threadIdx.x);
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.y;
  if (r >= n_rows) return;  // the whole warp: r depends on threadIdx.y only
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  const int nt = static_cast<int>(n_tokens - t0 < kTokens ? n_tokens - t0 : kTokens);
  const int64_t n_chunks = n_cols / kChunkCols;
  const int64_t n_blocks = n_cols / scale_block;
  const bool per_row = scale_block == n_cols;
  const int lanes_per_block = per_row ? kWarp : static_cast<int>(scale_block / kChunkCols);
  const uint4* row = words + r * n_chunks;

  int32_t isum[kTokens];
  float fsum[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    isum[t] = 0;
    fsum[t] = 0.0f;
  }
  for (int64_t c0 = 0; c0 < n_chunks; c0 += kWarp) {
    const int64_t c = c0 + lane;
    const bool valid = c < n_chunks;
    uint32_t w[kChunkWords] = {0, 0, 0, 0};
    if (valid) {
      const uint4 v = __ldg(row + c);
      w[0] = v.x;
      w[1] = v.y;
      w[2] = v.z;
      w[3] = v.w;
    }
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      if (t >= nt) continue;  // uniform over the warp (continue, not break: the loop unrolls)
      int32_t term = 0;
      if (valid) {
        const int4* a = reinterpret_cast<const int4*>(q + (t0 + t) * n_cols + c * kChunkCols);
        int32_t act[16];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int4 v = __ldg(a + k);
          act[4 * k] = v.x;
          act[4 * k + 1] = v.y;
          act[4 * k + 2] = v.z;
          act[4 * k + 3] = v.w;
        }
        term = chunk_term(w, act, __ldg(chunk_sum + (t0 + t) * n_chunks + c));
      }
      if (per_row) {
        isum[t] += term;
      } else {
        for (int off = 1; off < lanes_per_block; off <<= 1) term += shfl_xor(term, off);
        if (valid && lane % lanes_per_block == 0) {
          fsum[t] += w2a8_epilogue(term, 0, __ldg(act_scale + t0 + t), __ldg(scales + r * n_blocks + c / lanes_per_block));
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    if (t >= nt) continue;
    float out;
    if (per_row) {
      out = w2a8_epilogue(warp_sum(isum[t]), 0, __ldg(act_scale + t0 + t), __ldg(scales + r));
    } else {
      out = warp_sum(fsum[t]);
    }
    if (lane == 0) y[(t0 + t) * n_rows + r] = out;
  }
}

template <int kTokens>
GpuError launch(const W2cView& w, const Q8View& x, int64_t n_tokens, float* y, GpuStream stream) {
  const dim3 block(kWarp, kRowsPerBlock);
  const dim3 grid(static_cast<unsigned>((w.n_rows + kRowsPerBlock - 1) / kRowsPerBlock),
                  static_cast<unsigned>((n_tokens + kTokens - 1) / kTokens));
  w2a8_gemv_kernel<kTokens><<<grid, block, 0, stream>>>(reinterpret_cast<const uint4*>(w.words), w.scales, w.n_rows,
                                                         w.n_cols, w.scale_block, x.q, x.scale, x.chunk_sum, n_tokens, y);
  return launch_status();
}

}  // namespace

GpuError w2a8_gemv(const W2cView& w, const Q8View& x, int64_t n_tokens, float* y, GpuStream stream) {
  if (n_tokens <= 0 || w.n_rows <= 0 || !w2a8_scale_block_ok(w.n_cols, w.scale_block) ||
      (w.n_rows + kRowsPerBlock - 1) / kRowsPerBlock > 0x7fffffff || (n_tokens + 7) / 8 > 65535) {
    return kGpuInvalidValue;
  }
  if (n_tokens == 1) return launch<1>(w, x, n_tokens, y, stream);
  if (n_tokens <= 4) return launch<4>(w, x, n_tokens, y, stream);
  return launch<8>(w, x, n_tokens, y, stream);
}

}  // namespace bitnet::cuda
