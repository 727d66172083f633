// The W2A8 GEMM for prefill and batches on int8 tensor cores (sm_80+): mma.m16n8k32 s8 x s8
// -> s32, the ternary codes unpacked from W2C on the fly into the A fragments (four columns of
// a row are one shift-and-mask of a word: mma_math.h), the int8 activations loaded straight
// into B fragments. Each warp computes 16 weight rows x kTokenTiles * 8 tokens; the int32 sums
// of a scale block get the epilogue `(dot - act_sum) / s * scale` added to a float in block
// order, as the CPU does (w2a8_mma_twin: bit-identical to matmul_ternary). The block's words
// and activations pass through shared memory, 128 columns at a time (no double buffering yet:
// other blocks on the SM hide the copies). Where the
// instruction is missing (hipcc, NVIDIA below sm_80) mma_s8 computes the same tile from warp
// shuffles and dp4a: the HIP check compiles this kernel too; it is not tuned for AMD GPUs.
#include "backends/cuda/gpu_common.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/mma_math.h"

namespace bitnet::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kTokenTiles = 4;  // 8-token tiles per warp

// c += A B for one 16 x 8 x 32 tile held in the fragments of the warp's 32 lanes.
__device__ __forceinline__ void mma_s8(int lane, int32_t c[4], const int32_t a[4], const int32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  (void)lane;
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  // No such instruction (HIP: AMD's MFMA/WMMA have other shapes and fragment layouts; NVIDIA
  // below sm_80, which the launcher refuses): the same integer sums from shuffles and dp4a
  // (mma_m16n8k32_lanes), 32 shuffles and 32 dp4a per tile. Every lane of the 32-lane warp
  // takes part (the kernel's early return is per warp).
  mma_m16n8k32_lanes(
      lane, [&](int src, int i) { return shfl_idx(a[i], src); }, [&](int src, int i) { return shfl_idx(b[i], src); },
      c);
#endif
}

// Adds the epilogue of scale block b, (c - act_sum) / s * scale, to each of the warp tile's
// outputs in range (the blocks' order is the CPU's: w2a8_mma_twin), and zeroes c for the next.
__device__ __forceinline__ void add_block_epilogue(float (&acc)[kTokenTiles][4], int32_t (&c)[kTokenTiles][4], int64_t b,
                                                   int64_t row0, int64_t tok_base, int lane, int64_t n_rows,
                                                   int64_t n_tokens, int64_t scale_block, int64_t n_blocks,
                                                   int64_t n_chunks, const float* __restrict__ scales,
                                                   const float* __restrict__ act_scale,
                                                   const int32_t* __restrict__ chunk_sum) {
#pragma unroll
  for (int j = 0; j < kTokenTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t r = row0 + mma_c_row(lane, i), t = tok_base + 8 * j + mma_c_col(lane, i);
      if (r < n_rows && t < n_tokens) {
        const int32_t sum = act_sum_range(chunk_sum + t * n_chunks, b * scale_block, (b + 1) * scale_block);
        acc[j][i] += w2a8_epilogue(c[j][i], sum, act_scale[t], scales[r * n_blocks + b]);
      }
      c[j][i] = 0;
    }
  }
}

// Writes the warp tile's outputs in range: y [n_tokens][n_rows].
__device__ __forceinline__ void store_tile(const float (&acc)[kTokenTiles][4], int64_t row0, int64_t tok_base, int lane,
                                           int64_t n_rows, int64_t n_tokens, float* __restrict__ y) {
#pragma unroll
  for (int j = 0; j < kTokenTiles; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t r = row0 + mma_c_row(lane, i), t = tok_base + 8 * j + mma_c_col(lane, i);
      if (r < n_rows && t < n_tokens) y[t * n_rows + r] = acc[j][i];
    }
  }
}

// Shared-memory tiles of kTileCols columns: the block's 64 weight rows (kTileCols / 16 words
// each, padded to an odd word stride so the 8 rows a fragment load touches sit in 8 banks) and
// its 32 tokens' int8 activations (rows padded by 16 bytes: the fragment loads' 8 tokens x 4
// words fall in 32 banks). Every thread copies its share with 8- and 16-byte loads; the
// fragments are then read from shared memory. (Fragments loaded straight from global memory,
// 4-byte loads of 8 rows each, kept the L1 75% busy at 24 TMAC/s on an H200: ncu, 2026-11-29.)
constexpr int kTileCols = 128;
// More tokens than this take the tiled kernel (an H200, 2B-4T shape: a prompt of 512 tokens
// 9,230 -> 10,120 tok/s; 128 tokens and batched decode steps are faster direct, below).
constexpr int64_t kTiledMinTokens = 128;
constexpr int kRowsPerBlock = kWarpsPerBlock * 16;
constexpr int kTokensPerBlock = kTokenTiles * 8;
constexpr int kTileWords = kTileCols / kWordCols;  // 8 words per row
constexpr int kAStride = kTileWords + 1;           // in words
constexpr int kBStride = kTileCols / 4 + 4;        // in words (144 bytes: 16-byte aligned rows)

__global__ void __launch_bounds__(kWarp* kWarpsPerBlock)
    w2a8_mma_tiled_kernel(const uint32_t* __restrict__ words, const float* __restrict__ scales, int64_t n_rows,
                          int64_t n_cols, int64_t scale_block, const int8_t* __restrict__ q,
                          const float* __restrict__ act_scale, const int32_t* __restrict__ chunk_sum, int64_t n_tokens,
                          float* __restrict__ y) {
  __shared__ uint32_t sa[kRowsPerBlock * kAStride];
  __shared__ __align__(16) int32_t sb[kTokensPerBlock * kBStride];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWarp, warp = tid / kWarp;
  const int64_t block_row0 = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock;
  const int64_t row0 = block_row0 + warp * 16;
  const bool rows_here = row0 < n_rows;  // a warp past the last row still copies tiles (barriers)
  const int64_t tok_base = static_cast<int64_t>(blockIdx.y) * kTokensPerBlock;
  const int64_t n_words = n_cols / kWordCols, n_blocks = n_cols / scale_block, n_chunks = n_cols / kChunkCols;

  float acc[kTokenTiles][4] = {};  // the output tile
  int32_t c[kTokenTiles][4] = {};  // the current scale block's int32 sums
  for (int64_t k0 = 0; k0 < n_cols; k0 += kTileCols) {
    const int64_t tile_cols = n_cols - k0 < kTileCols ? n_cols - k0 : kTileCols;  // a multiple of 32
    __syncthreads();  // every warp is done with the previous tiles
    // A: 64 rows x 8 words as 256 pairs of words (rows are 8-byte aligned: n_cols % 32 == 0)
    for (int p = tid; p < kRowsPerBlock * kTileWords / 2; p += kWarp * kWarpsPerBlock) {
      const int r = p / (kTileWords / 2), w = 2 * (p % (kTileWords / 2));
      uint2 v = make_uint2(0u, 0u);  // rows past n_rows and columns past the tile read as 0
      if (block_row0 + r < n_rows && w * kWordCols < tile_cols) {
        v = __ldg(reinterpret_cast<const uint2*>(words + (block_row0 + r) * n_words + k0 / kWordCols + w));
      }
      sa[r * kAStride + w] = v.x;
      sa[r * kAStride + w + 1] = v.y;
    }
    // B: 32 tokens x 128 bytes as 256 16-byte pieces
    for (int p = tid; p < kTokensPerBlock * kTileCols / 16; p += kWarp * kWarpsPerBlock) {
      const int t = p / (kTileCols / 16), piece = p % (kTileCols / 16);
      int4 v = make_int4(0, 0, 0, 0);
      if (tok_base + t < n_tokens && piece * 16 < tile_cols) {
        v = __ldg(reinterpret_cast<const int4*>(q + (tok_base + t) * n_cols + k0 + piece * 16));
      }
      *reinterpret_cast<int4*>(sb + t * kBStride + piece * 4) = v;
    }
    __syncthreads();
    if (!rows_here) continue;
    for (int kk = 0; kk < tile_cols; kk += 32) {
      int32_t fa[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t word = sa[(warp * 16 + mma_a_row(lane, i)) * kAStride + (kk + mma_a_col(lane, i)) / kWordCols];
        fa[i] = unpack_lanes(word, mma_a_col(lane, i) % kWordCols / 4);
      }
#pragma unroll
      for (int j = 0; j < kTokenTiles; ++j) {
        int32_t fb[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) fb[i] = sb[(8 * j + mma_b_n(lane)) * kBStride + (kk + mma_b_k(lane, i)) / 4];
        mma_s8(lane, c[j], fa, fb);
      }
      const int64_t k = k0 + kk;
      if ((k + 32) % scale_block != 0) continue;
      add_block_epilogue(acc, c, k / scale_block, row0, tok_base, lane, n_rows, n_tokens, scale_block, n_blocks, n_chunks,
                         scales, act_scale, chunk_sum);  // the scale block this step ends
    }
  }
  if (!rows_here) return;
  store_tile(acc, row0, tok_base, lane, n_rows, n_tokens, y);
}

// Fragments loaded straight from global memory (4-byte loads of 8 rows each: the L1 is the
// bottleneck, 75% busy at 24 TMAC/s on an H200), no barriers: faster than the tiles above where
// there are few blocks (a prompt of 128 tokens: 7,200 against 6,700 tok/s; batched decode).
__global__ void __launch_bounds__(kWarp* kWarpsPerBlock)
    w2a8_mma_direct_kernel(const uint32_t* __restrict__ words, const float* __restrict__ scales, int64_t n_rows,
                           int64_t n_cols, int64_t scale_block, const int8_t* __restrict__ q,
                           const float* __restrict__ act_scale, const int32_t* __restrict__ chunk_sum, int64_t n_tokens,
                           float* __restrict__ y) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp) * 16;
  if (row0 >= n_rows) return;  // the whole warp
  const int64_t tok_base = static_cast<int64_t>(blockIdx.y) * kTokenTiles * 8;
  const int64_t n_words = n_cols / kWordCols, n_blocks = n_cols / scale_block, n_chunks = n_cols / kChunkCols;

  float acc[kTokenTiles][4] = {};  // the output tile
  int32_t c[kTokenTiles][4] = {};  // the current scale block's int32 sums
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int64_t k = b * scale_block; k < (b + 1) * scale_block; k += 32) {
      int32_t fa[4];
      mma_load_a(words, n_words, n_rows, row0, k, lane, fa);
#pragma unroll
      for (int j = 0; j < kTokenTiles; ++j) {
        int32_t fb[2];
        mma_load_b(q, n_cols, n_tokens, tok_base + 8 * j, k, lane, fb);
        mma_s8(lane, c[j], fa, fb);
      }
    }
    add_block_epilogue(acc, c, b, row0, tok_base, lane, n_rows, n_tokens, scale_block, n_blocks, n_chunks, scales,
                       act_scale, chunk_sum);
  }
  store_tile(acc, row0, tok_base, lane, n_rows, n_tokens, y);
}

}  // namespace

GpuError w2a8_gemm_mma(const W2cView& w, const Q8View& x, int64_t n_tokens, float* y, int cc_major, GpuStream stream) {
  const int64_t tokens_per_block = kTokensPerBlock, rows_per_block = kRowsPerBlock;
  if (cc_major < 8 || n_tokens <= 0 || w.n_rows <= 0 || w.n_cols % 32 != 0 || !w2a8_scale_block_ok(w.n_cols, w.scale_block) ||
      w.scale_block % 32 != 0 || (n_tokens + tokens_per_block - 1) / tokens_per_block > 65535 ||
      (w.n_rows + rows_per_block - 1) / rows_per_block > 0x7fffffff) {
    return kGpuInvalidValue;
  }
  const dim3 grid(static_cast<unsigned>((w.n_rows + rows_per_block - 1) / rows_per_block),
                  static_cast<unsigned>((n_tokens + tokens_per_block - 1) / tokens_per_block));
  if (n_tokens > kTiledMinTokens) {
    w2a8_mma_tiled_kernel<<<grid, kWarp * kWarpsPerBlock, 0, stream>>>(w.words, w.scales, w.n_rows, w.n_cols,
                                                                       w.scale_block, x.q, x.scale, x.chunk_sum, n_tokens, y);
  } else {
    w2a8_mma_direct_kernel<<<grid, kWarp * kWarpsPerBlock, 0, stream>>>(w.words, w.scales, w.n_rows, w.n_cols,
                                                                        w.scale_block, x.q, x.scale, x.chunk_sum, n_tokens, y);
  }
  return launch_status();
}

}  // namespace bitnet::cuda
