// Attention over the F16 KV cache, split-K (flash-decoding): pass 1 gives each (token, head,
// slice of positions) one block of 4 warps; warp w takes positions p0 + w, p0 + w + 4, ... of
// its slice with an online softmax (ops_math.h SoftmaxState), lane l holds head dimensions
// 2l + 64i as half2 (a warp reads a 256-byte K or V row in one instruction); the 4 warps merge
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

template <int kPairs>  // half2 pairs per lane: head_dim / 64
__global__ void __launch_bounds__(kWarp* kWarps)
    attention_split_kernel(const float* __restrict__ q, const __half2* __restrict__ k_cache,
                           const __half2* __restrict__ v_cache, KvRows rows, AttentionShape shape,
                           float* __restrict__ scratch) {
  constexpr int kDim = 64 * kPairs;
  const int h = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int64_t t = blockIdx.z;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int hkv = h / (shape.n_head / shape.n_head_kv);
  const int64_t n_pos = static_cast<int64_t>(rows.pos[t]) + 1;
  const int64_t p0 = static_cast<int64_t>(split) * shape.split_len;
  const int64_t p1 = p0 + shape.split_len < n_pos ? p0 + shape.split_len : n_pos;
  const int32_t* table = rows.table == nullptr ? nullptr : rows.table + rows.table_begin[t];

  float2 qv[kPairs], o[kPairs];
  const float* qh = q + (t * shape.n_head + h) * kDim;
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    qv[i] = make_float2(qh[2 * lane + 64 * i], qh[2 * lane + 64 * i + 1]);
    o[i] = make_float2(0.0f, 0.0f);
  }
  SoftmaxState st{-INFINITY, 0.0f};
  const int64_t row_pairs = shape.n_embd_kv / 2;
  for (int64_t j = p0 + warp; j < p1; j += kWarps) {
    const int64_t base = kv_row(j, table, rows.block_shift) * row_pairs + hkv * (kDim / 2);
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const float2 k = __half22float2(k_cache[base + lane + 32 * i]);
      dot += qv[i].x * k.x + qv[i].y * k.y;
    }
    const float score = warp_sum(dot) * shape.kq_scale;
    float p;
    const float corr = softmax_add(st, score, p);
#pragma unroll
    for (int i = 0; i < kPairs; ++i) {
      const float2 v = __half22float2(v_cache[base + lane + 32 * i]);
      o[i].x = o[i].x * corr + p * v.x;
      o[i].y = o[i].y * corr + p * v.y;
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
  float* slot = scratch + ((t * shape.n_head + h) * shape.n_splits + split) * (2 + kDim);  // attention_slot_floats
  if (lane == 0) {
    slot[0] = st.m;
    slot[1] = st.l;
  }
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    slot[2 + 2 * lane + 64 * i] = o[i].x;
    slot[2 + 2 * lane + 64 * i + 1] = o[i].y;
  }
}

// One block per (token, head): thread d merges dimension d over the slices.
__global__ void attention_merge_kernel(const float* __restrict__ scratch, AttentionShape shape, float* __restrict__ out) {
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

template <int kPairs>
void launch_split(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, const KvRows& rows,
                  const AttentionShape& shape, int64_t n_tokens, float* scratch, GpuStream stream) {
  const dim3 grid(static_cast<unsigned>(shape.n_head), static_cast<unsigned>(shape.n_splits),
                  static_cast<unsigned>(n_tokens));
  attention_split_kernel<kPairs><<<grid, kWarp * kWarps, 0, stream>>>(
      q, reinterpret_cast<const __half2*>(k_cache), reinterpret_cast<const __half2*>(v_cache), rows, shape, scratch);
}

}  // namespace

GpuError attention_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, const KvRows& rows,
                       const AttentionShape& shape, int64_t n_tokens, float* scratch, float* out, GpuStream stream) {
  if (n_tokens <= 0 || n_tokens > 65535 || shape.n_head <= 0 || shape.n_head_kv <= 0 ||
      shape.n_head % shape.n_head_kv != 0 || shape.n_embd_kv != static_cast<int64_t>(shape.n_head_kv) * shape.head_dim ||
      shape.n_splits <= 0 || shape.n_splits > 65535 || shape.split_len <= 0 || rows.pos == nullptr) {
    return kGpuInvalidValue;
  }
  switch (shape.head_dim) {
    case 64: launch_split<1>(q, k_cache, v_cache, rows, shape, n_tokens, scratch, stream); break;
    case 128: launch_split<2>(q, k_cache, v_cache, rows, shape, n_tokens, scratch, stream); break;
    case 256: launch_split<4>(q, k_cache, v_cache, rows, shape, n_tokens, scratch, stream); break;
    default: return kGpuInvalidValue;
  }
  if (const GpuError e = launch_status(); e != kGpuSuccess) return e;
  const dim3 grid(static_cast<unsigned>(shape.n_head), static_cast<unsigned>(n_tokens));
  attention_merge_kernel<<<grid, 128, 0, stream>>>(scratch, shape, out);
  return launch_status();
}

}  // namespace bitnet::cuda
