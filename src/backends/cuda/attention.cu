// Attention over the F16 KV cache, split-K (flash-decoding): pass 1 gives each (token, head,
// slice of positions) one block of 4 warps; warp w takes positions p0 + w, p0 + w + 4, ... of
// its slice with an online softmax (ops_math.h SoftmaxState), loading several positions' rows at
// a time, lane l holds head dimensions
// 2l + 64i as half2 (a warp reads a 256-byte K or V row in one instruction; heads of 64, 128
// or 256), or, for any other head of up to 256, the same dimensions below head_dim as single
// halves, those past it held at zero (stories260K's heads of 8, 80, 96, ...); the 4 warps merge
// in shared memory and write the slice's (m, l, o). Pass 2 merges the slices of each (token,
// head) and divides by the sum. The number of slices is fixed per graph (choose_attention_split:
// from n_ctx, not the position), so a captured decode step replays at any position; slices
// past a token's position write an empty state. Causal: token t reads positions 0..pos[t].
// Prefill with many query tokens runs the same kernels (one block row per token): correct, not
// the tensor-core prefill attention, which is not written yet.
#include "backends/cuda/gpu_common.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/ops_math.h"

namespace bitnet::cuda {
namespace {

constexpr int kWarps = 4;

// Dimensions 2l + 64i and 2l + 64i + 1 of the K or V slice at `base` (in halves) as a float2.
// kFull: head_dim == 64 * kPairs, one half2 read (base is even); else those at or past head_dim
// are 0.
template <bool kFull>
__device__ __forceinline__ float2 load_pair(const __half* __restrict__ cache, int64_t base, int d, int head_dim) {
  if constexpr (kFull) {
    return __half22float2(reinterpret_cast<const __half2*>(cache)[(base + d) / 2]);
  } else {
    return make_float2(d < head_dim ? __half2float(cache[base + d]) : 0.0f,
                       d + 1 < head_dim ? __half2float(cache[base + d + 1]) : 0.0f);
  }
}

template <int kPairs, bool kFull>  // half2 pairs per lane: head_dim / 64, or head_dim <= 64 * kPairs
__global__ void __launch_bounds__(kWarp* kWarps)
    attention_split_kernel(const float* __restrict__ q, const __half* __restrict__ k_cache,
                           const __half* __restrict__ v_cache, KvRows rows, AttentionShape shape,
                           float* __restrict__ scratch) {
  wait_for_previous();
  constexpr int kDim = 64 * kPairs;
  const int hd = kFull ? kDim : shape.head_dim;
  const int h = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int64_t t = blockIdx.z;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int hkv = h / (shape.n_head / shape.n_head_kv);
  const int64_t n_pos = static_cast<int64_t>(rows.pos[t]) + 1;
  const int64_t p0 = static_cast<int64_t>(split) * shape.split_len;
  const int64_t p1 = p0 + shape.split_len < n_pos ? p0 + shape.split_len : n_pos;
  const int32_t* table = token_table(rows, t);

  float2 qv[kPairs], o[kPairs];
  const float* qh = q + (t * shape.n_head + h) * hd;
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const int d = 2 * lane + 64 * i;
    qv[i] = make_float2(d < hd ? qh[d] : 0.0f, d + 1 < hd ? qh[d + 1] : 0.0f);
    o[i] = make_float2(0.0f, 0.0f);
  }
  SoftmaxState st{-INFINITY, 0.0f};
  // kAhead positions per round, their K and V rows loaded before any is used: one memory latency
  // per round instead of two per position. Positions still enter the softmax one
  // by one in ascending order, as with one position per round.
  constexpr int kAhead = kPairs <= 2 ? 4 : 2;
  for (int64_t j0 = p0 + warp; j0 < p1; j0 += kWarps * kAhead) {
    int64_t base[kAhead];
    float2 kk[kAhead][kPairs], vv[kAhead][kPairs];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t j = j0 + int64_t{u} * kWarps;  // uniform over the warp
      base[u] = j < p1 ? kv_row(j, table, rows.block_shift) * shape.n_embd_kv + int64_t{hkv} * hd : -1;
#pragma unroll
      for (int i = 0; i < kPairs; ++i) {
        const bool in = base[u] >= 0;
        kk[u][i] = in ? load_pair<kFull>(k_cache, base[u], 2 * lane + 64 * i, hd) : make_float2(0.0f, 0.0f);
        vv[u][i] = in ? load_pair<kFull>(v_cache, base[u], 2 * lane + 64 * i, hd) : make_float2(0.0f, 0.0f);
      }
    }
    float score[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kPairs; ++i) dot += qv[i].x * kk[u][i].x + qv[i].y * kk[u][i].y;
      score[u] = warp_sum(dot) * shape.kq_scale;
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (base[u] < 0) break;  // uniform: positions past p1
      float p;
      const float corr = softmax_add(st, score[u], p);
#pragma unroll
      for (int i = 0; i < kPairs; ++i) {
        o[i].x = o[i].x * corr + p * vv[u][i].x;
        o[i].y = o[i].y * corr + p * vv[u][i].y;
      }
    }
  }

  // Merge the warps: warp 0 folds in warps 1..3.
  __shared__ float sm[kWarps], sl[kWarps];
  __shared__ float2 so[kWarps][kDim / 2];
  if (lane == 0) {
    sm[warp] = st.m;
    sl[warp] = st.l;
  }
#pragma unroll
  for (int i = 0; i < kPairs; ++i) so[warp][lane + 32 * i] = o[i];
  __syncthreads();
  if (warp != 0) return;
  for (int w = 1; w < kWarps; ++w) {
    float fa, fb;
    softmax_merge(st, SoftmaxState{sm[w], sl[w]}, fa, fb);
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const float2 b = so[w][lane + 32 * i];
      o[i].x = o[i].x * fa + b.x * fb;
      o[i].y = o[i].y * fa + b.y * fb;
    }
  }
  float* slot = scratch + ((t * shape.n_head + h) * shape.n_splits + split) * (2 + int64_t{hd});  // attention_slot_floats
  if (lane == 0) {
    slot[0] = st.m;
    slot[1] = st.l;
  }
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const int d = 2 * lane + 64 * i;
    if (d < hd) slot[2 + d] = o[i].x;
    if (d + 1 < hd) slot[2 + d + 1] = o[i].y;
  }
}

// One block per (token, head): thread d merges dimension d over the slices.
__global__ void attention_merge_kernel(const float* __restrict__ scratch, AttentionShape shape, float* __restrict__ out) {
  wait_for_previous();
  const int h = static_cast<int>(blockIdx.x);
  const int64_t t = blockIdx.y;
  const float* slots = scratch + (t * shape.n_head + h) * shape.n_splits * (2 + int64_t{shape.head_dim});
  for (int d = static_cast<int>(threadIdx.x); d < shape.head_dim; d += static_cast<int>(blockDim.x)) {
    SoftmaxState st{-INFINITY, 0.0f};
    float o = 0.0f;
    for (int s = 0; s < shape.n_splits; ++s) {
      const float* slot = slots + s * (2 + int64_t{shape.head_dim});
      float fa, fb;
      softmax_merge(st, SoftmaxState{slot[0], slot[1]}, fa, fb);
      o = o * fa + slot[2 + d] * fb;
    }
    out[(t * shape.n_head + h) * shape.head_dim + d] = o / st.l;
  }
}

template <int kPairs, bool kFull>
GpuError launch_split(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, const KvRows& rows,
                      const AttentionShape& shape, int64_t n_tokens, float* scratch, GpuStream stream) {
  const dim3 grid(static_cast<unsigned>(shape.n_head), static_cast<unsigned>(shape.n_splits),
                  static_cast<unsigned>(n_tokens));
  return launch_dependent(attention_split_kernel<kPairs, kFull>, grid, dim3(kWarp * kWarps), stream, q,
                          reinterpret_cast<const __half*>(k_cache), reinterpret_cast<const __half*>(v_cache), rows, shape,
                          scratch);
}

}  // namespace

GpuError attention_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, const KvRows& rows,
                       const AttentionShape& shape, int64_t n_tokens, float* scratch, float* out, GpuStream stream) {
  if (n_tokens <= 0 || n_tokens > 65535 || shape.n_head <= 0 || shape.n_head_kv <= 0 ||
      shape.n_head % shape.n_head_kv != 0 || shape.n_embd_kv != static_cast<int64_t>(shape.n_head_kv) * shape.head_dim ||
      shape.n_splits <= 0 || shape.n_splits > 65535 || shape.split_len <= 0 || rows.pos == nullptr) {
    return kGpuInvalidValue;
  }
  const int32_t hd = shape.head_dim;
  if (!attention_head_dim_supported(hd)) return kGpuInvalidValue;
  GpuError e = kGpuSuccess;
  if (hd == 64) {
    e = launch_split<1, true>(q, k_cache, v_cache, rows, shape, n_tokens, scratch, stream);
  } else if (hd == 128) {
    e = launch_split<2, true>(q, k_cache, v_cache, rows, shape, n_tokens, scratch, stream);
  } else if (hd == 256) {
    e = launch_split<4, true>(q, k_cache, v_cache, rows, shape, n_tokens, scratch, stream);
  } else if (hd < 64) {
    e = launch_split<1, false>(q, k_cache, v_cache, rows, shape, n_tokens, scratch, stream);
  } else if (hd < 128) {
    e = launch_split<2, false>(q, k_cache, v_cache, rows, shape, n_tokens, scratch, stream);
  } else {
    e = launch_split<4, false>(q, k_cache, v_cache, rows, shape, n_tokens, scratch, stream);
  }
  if (e != kGpuSuccess) return e;
  const dim3 grid(static_cast<unsigned>(shape.n_head), static_cast<unsigned>(n_tokens));
  return launch_dependent(attention_merge_kernel, grid, dim3(128), stream, scratch, shape, out);
}

}  // namespace bitnet::cuda
