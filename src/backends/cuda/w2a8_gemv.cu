// The W2A8 GEMV: ternary weights in the W2C layout times int8 activations (w2a8_math.h).
//
// One warp per output row, kRowsPerBlock rows per block. Lane l reads chunk l + 32 * it of the
// row, up to kLoadsAhead of them before any is used: one 16-byte load of 64 columns' codes, so a warp's load instruction covers 512
// contiguous bytes; the 64 activations of the chunk are four 16-byte loads (L1/L2 hits: every
// row reads the same ones). Each 32-bit word of codes gives four dp4a operands by shift and
// mask. Tokens come in tiles of kTokens (1, 4 or 8) per weight read: decode reads each weight
// byte once; a batch or prefill reads it once per 8 tokens (the mma GEMM for large prefills
// is not written yet).
//
// A group of up to kGemvGroupMax weights of one input (q, k and v) is one launch: global row R
// of the grid is row R - row_begin of the weight whose rows hold it, so each warp does exactly
// the single product's work (a block may span two weights: warps are independent).
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
constexpr int kLoadsAhead = 4;  // decode's chunk loads in flight per lane: rows of up to 8192 columns in one round

// Weight i of a group, one kernel parameter each (a struct of arrays indexed by a computed i
// went through a 96-byte local copy): it holds global rows [slot i-1's row_end, row_end).
struct Slot {
  const uint4* words;
  const float* scales;
  float* y;
  int row_end;  // the launcher keeps the rows of a group below 2^31
};

template <int kTokens>
__global__ void __launch_bounds__(kWarp* kRowsPerBlock)
    w2a8_gemv_kernel(const Slot s0, const Slot s1, const Slot s2, int64_t n_cols, int64_t scale_block,
                     const int8_t* __restrict__ q, const float* __restrict__ act_scale,
                     const int32_t* __restrict__ chunk_sum, int64_t n_tokens) {
  wait_for_previous();
  const int lane = static_cast<int>(threadIdx.x);
  const int global_row = static_cast<int>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.y);
  // An unused slot's row_end repeats the last weight's: no row selects it.
  const bool in0 = global_row < s0.row_end, in1 = !in0 && global_row < s1.row_end;
  // Field by field (a reference to the chosen parameter would copy all three to local memory).
  const int row_end = in0 ? s0.row_end : in1 ? s1.row_end : s2.row_end;
  if (global_row >= row_end) return;  // the whole warp: global_row depends on threadIdx.y only
  const int row_begin = in0 ? 0 : in1 ? s0.row_end : s1.row_end;
  const int64_t r = global_row - row_begin;
  const int64_t n_rows = row_end - row_begin;
  const uint4* __restrict__ words = in0 ? s0.words : in1 ? s1.words : s2.words;
  const float* __restrict__ scales = in0 ? s0.scales : in1 ? s1.scales : s2.scales;
  float* __restrict__ y = in0 ? s0.y : in1 ? s1.y : s2.y;
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
  // decode reads ahead; tiles of 4 and 8 tokens have the registers for one chunk (127 registers and
  // spills otherwise) and more arithmetic per load to hide it
  constexpr int kAhead = kTokens == 1 ? kLoadsAhead : 1;
  for (int64_t c00 = 0; c00 < n_chunks; c00 += kWarp * kAhead) {
    // every load of codes of this round first: one DRAM latency per round, not one per chunk
    uint4 ahead[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t c = c00 + u * kWarp + lane;
      ahead[u] = c < n_chunks ? __ldg(row + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t c0 = c00 + u * kWarp;
      if (c0 >= n_chunks) break;  // uniform over the warp
      const int64_t c = c0 + lane;
      const bool valid = c < n_chunks;
      const uint32_t w[kChunkWords] = {ahead[u].x, ahead[u].y, ahead[u].z, ahead[u].w};
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
GpuError launch(const Slot (&slots)[kGemvGroupMax], int64_t n_cols, int64_t scale_block, const Q8View& x,
                int64_t n_tokens, GpuStream stream) {
  const int n_rows = slots[kGemvGroupMax - 1].row_end;
  const dim3 block(kWarp, kRowsPerBlock);
  const dim3 grid(static_cast<unsigned>((n_rows + kRowsPerBlock - 1) / kRowsPerBlock),
                  static_cast<unsigned>((n_tokens + kTokens - 1) / kTokens));
  return launch_dependent(w2a8_gemv_kernel<kTokens>, grid, block, stream, slots[0], slots[1], slots[2], n_cols, scale_block,
                          x.q, x.scale, x.chunk_sum, n_tokens);
}

}  // namespace

GpuError w2a8_gemv_group(const W2cView* w, float* const* y, int n, const Q8View& x, int64_t n_tokens, GpuStream stream) {
  if (n < 1 || n > kGemvGroupMax || n_tokens <= 0 || (n_tokens + 7) / 8 > 65535 ||
      !w2a8_scale_block_ok(w[0].n_cols, w[0].scale_block)) {
    return kGpuInvalidValue;
  }
  Slot slots[kGemvGroupMax] = {};
  int64_t rows = 0;
  for (int i = 0; i < kGemvGroupMax; ++i) {
    if (i < n) {
      if (w[i].n_rows <= 0 || w[i].n_cols != w[0].n_cols || w[i].scale_block != w[0].scale_block) return kGpuInvalidValue;
      rows += w[i].n_rows;
      if (rows > 0x7fffffff - kRowsPerBlock) return kGpuInvalidValue;
      slots[i] = {reinterpret_cast<const uint4*>(w[i].words), w[i].scales, y[i], 0};
    }
    slots[i].row_end = static_cast<int>(rows);  // past n: the last weight's end, an empty range
  }
  const int64_t n_cols = w[0].n_cols, scale_block = w[0].scale_block;
  if (n_tokens == 1) return launch<1>(slots, n_cols, scale_block, x, n_tokens, stream);
  if (n_tokens <= 4) return launch<4>(slots, n_cols, scale_block, x, n_tokens, stream);
  return launch<8>(slots, n_cols, scale_block, x, n_tokens, stream);
}

GpuError w2a8_gemv(const W2cView& w, const Q8View& x, int64_t n_tokens, float* y, GpuStream stream) {
  return w2a8_gemv_group(&w, &y, 1, x, n_tokens, stream);
}

}  // namespace bitnet::cuda
