// Elementwise kernels of the forward pass: residual add, the gated activations, .scale,
// rope, the F16 KV store and embedding rows. Grid-stride loops over flat indices.
#include "backends/cuda/gpu_common.cuh"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/kernels.h"
#include "backends/cuda/ops_math.h"

namespace bitnet::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 ? b : 65535);  // grid-stride beyond
}

#define BITNET_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void add_kernel(const float* a, const float* b, int64_t n, float* dst) {
  BITNET_GRID_STRIDE(i, n) dst[i] = a[i] + b[i];
}

__global__ void silu_mul_kernel(const float* a, const float* b, int64_t n, float* dst) {
  BITNET_GRID_STRIDE(i, n) dst[i] = silu_mul_one(a[i], b[i]);
}

__global__ void relu2_mul_kernel(const float* a, const float* b, int64_t n, float* dst) {
  BITNET_GRID_STRIDE(i, n) dst[i] = relu2(a[i], b[i]);
}

__global__ void add_row_kernel(float* x, const float* row, int64_t n, int64_t n_cols) {
  BITNET_GRID_STRIDE(i, n) x[i] += row[i % n_cols];
}

__global__ void scale_kernel(float* x, const float* scale, int64_t n) {
  const float s = *scale;
  BITNET_GRID_STRIDE(i, n) x[i] *= s;
}

// One thread per (token, head, pair).
__global__ void rope_kernel(float* x, const float2* cos_sin, int64_t n_tokens, int32_t n_head, int32_t head_dim,
                            int32_t n_rot, bool neox) {
  const int64_t n_pairs = n_rot / 2;
  BITNET_GRID_STRIDE(i, n_tokens * n_head * n_pairs) {
    const int64_t t = i / (n_head * n_pairs);
    const int64_t h = i / n_pairs % n_head;
    const auto p = static_cast<int32_t>(i % n_pairs);
    int32_t a, b;
    rope_pair_index(p, n_rot, neox, a, b);
    float* v = x + (t * n_head + h) * head_dim;
    const float2 cs = cos_sin[t * n_pairs + p];
    float x0 = v[a], x1 = v[b];
    rope_pair(x0, x1, cs.x, cs.y);
    v[a] = x0;
    v[b] = x1;
  }
}

// q's pairs, then k's pairs (rotated, written back and stored), then every v element and the
// k elements past n_rot (stored): one flat index over the three ranges.
__global__ void rope_store_kv_kernel(float* q, float* k, const float* v, const float2* cos_sin, int64_t n_tokens,
                                     int32_t n_head, int32_t n_head_kv, int32_t head_dim, int32_t n_rot, bool neox,
                                     KvRows rows, __half* k_cache, __half* v_cache) {
  wait_for_previous();
  const int64_t n_pairs = n_rot / 2;
  const int64_t n_embd_kv = static_cast<int64_t>(n_head_kv) * head_dim;
  const int64_t q_end = n_tokens * n_head * n_pairs;
  const int64_t k_end = q_end + n_tokens * n_head_kv * n_pairs;
  BITNET_GRID_STRIDE(i, k_end + n_tokens * n_embd_kv) {
    if (i < k_end) {
      const bool is_q = i < q_end;
      const int64_t j = is_q ? i : i - q_end;
      const int32_t heads = is_q ? n_head : n_head_kv;
      const int64_t t = j / (heads * n_pairs);
      const int64_t h = j / n_pairs % heads;
      const auto p = static_cast<int32_t>(j % n_pairs);
      int32_t a, b;
      rope_pair_index(p, n_rot, neox, a, b);
      float* x = (is_q ? q : k) + (t * heads + h) * head_dim;
      const float2 cs = cos_sin[t * n_pairs + p];
      float x0 = x[a], x1 = x[b];
      rope_pair(x0, x1, cs.x, cs.y);
      x[a] = x0;
      x[b] = x1;
      if (!is_q) {
        __half* row = k_cache + kv_row(rows.pos[t], token_table(rows, t), rows.block_shift) * n_embd_kv + h * head_dim;
        row[a] = __float2half_rn(x0);
        row[b] = __float2half_rn(x1);
      }
      continue;
    }
    const int64_t j = i - k_end;
    const int64_t t = j / n_embd_kv, d = j % n_embd_kv;
    const int64_t row = kv_row(rows.pos[t], token_table(rows, t), rows.block_shift);
    v_cache[row * n_embd_kv + d] = __float2half_rn(v[j]);
    if (d % head_dim >= n_rot) k_cache[row * n_embd_kv + d] = __float2half_rn(k[j]);  // not rotated
  }
}

__global__ void store_kv_kernel(const float* k, const float* v, int64_t n_tokens, int64_t n_embd_kv, KvRows rows,
                                __half* k_cache, __half* v_cache) {
  BITNET_GRID_STRIDE(i, n_tokens * n_embd_kv) {
    const int64_t t = i / n_embd_kv, d = i % n_embd_kv;
    const int64_t row = kv_row(rows.pos[t], token_table(rows, t), rows.block_shift);
    k_cache[row * n_embd_kv + d] = __float2half_rn(k[i]);
    v_cache[row * n_embd_kv + d] = __float2half_rn(v[i]);
  }
}

__device__ float load_elem(const FloatWeightView& w, int64_t r, int64_t k) {
  const int64_t i = r * w.n_cols + k;
  switch (w.format) {
    case FloatFormat::kF32: return static_cast<const float*>(w.data)[i];
    case FloatFormat::kF16: return __half2float(static_cast<const __half*>(w.data)[i]);
    case FloatFormat::kBF16: return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(w.data)[i]) << 16);
    case FloatFormat::kQ8_0:
      return static_cast<float>(static_cast<const int8_t*>(w.data)[i]) * w.q8_d[r * (w.n_cols / 32) + k / 32];
    case FloatFormat::kBlocks: {
      const int64_t elems = block_elems(w.block);
      const uint8_t* block = static_cast<const uint8_t*>(w.data) + (r * (w.n_cols / elems) + k / elems) * block_bytes(w.block);
      return block_value(w.block, block, static_cast<int>(k % elems));
    }
  }
  return 0.0f;
}

__global__ void embed_kernel(FloatWeightView w, const int32_t* tokens, int64_t n_tokens, float* dst) {
  BITNET_GRID_STRIDE(i, n_tokens * w.n_cols) {
    const int64_t t = i / w.n_cols, k = i % w.n_cols;
    dst[i] = load_elem(w, tokens[t], k);
  }
}

}  // namespace

GpuError kernel_image_status() {
  cudaFuncAttributes attr{};
  const GpuError err = cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(&add_kernel));
  (void)gpuGetLastError();  // not sticky: clear it for the launches that follow
  return err;
}

GpuError add(const float* a, const float* b, int64_t n, float* dst, GpuStream stream) {
  if (n <= 0) return kGpuInvalidValue;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, n, dst);
  return launch_status();
}

GpuError silu_mul(const float* a, const float* b, int64_t n, float* dst, GpuStream stream) {
  if (n <= 0) return kGpuInvalidValue;
  silu_mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, n, dst);
  return launch_status();
}

GpuError relu2_mul(const float* a, const float* b, int64_t n, float* dst, GpuStream stream) {
  if (n <= 0) return kGpuInvalidValue;
  relu2_mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, n, dst);
  return launch_status();
}

GpuError add_row(float* x, const float* row, int64_t n_rows, int64_t n_cols, GpuStream stream) {
  if (n_rows <= 0 || n_cols <= 0) return kGpuInvalidValue;
  add_row_kernel<<<blocks_for(n_rows * n_cols), kThreads, 0, stream>>>(x, row, n_rows * n_cols, n_cols);
  return launch_status();
}

GpuError scale_by(float* x, const float* scale, int64_t n, GpuStream stream) {
  if (n <= 0) return kGpuInvalidValue;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, scale, n);
  return launch_status();
}

GpuError rope(float* x, const float* cos_sin, int64_t n_tokens, int32_t n_head, int32_t head_dim, int32_t n_rot,
              bool neox, GpuStream stream) {
  if (n_tokens <= 0 || n_head <= 0 || n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim) return kGpuInvalidValue;
  rope_kernel<<<blocks_for(n_tokens * n_head * (n_rot / 2)), kThreads, 0, stream>>>(
      x, reinterpret_cast<const float2*>(cos_sin), n_tokens, n_head, head_dim, n_rot, neox);
  return launch_status();
}

GpuError store_kv_f16(const float* k, const float* v, int64_t n_tokens, int64_t n_embd_kv, const KvRows& rows,
                      uint16_t* k_cache, uint16_t* v_cache, GpuStream stream) {
  if (n_tokens <= 0 || n_embd_kv <= 0 || rows.pos == nullptr) return kGpuInvalidValue;
  store_kv_kernel<<<blocks_for(n_tokens * n_embd_kv), kThreads, 0, stream>>>(
      k, v, n_tokens, n_embd_kv, rows, reinterpret_cast<__half*>(k_cache), reinterpret_cast<__half*>(v_cache));
  return launch_status();
}

GpuError rope_store_kv_f16(float* q, float* k, const float* v, const float* cos_sin, int64_t n_tokens, int32_t n_head,
                           int32_t n_head_kv, int32_t head_dim, int32_t n_rot, bool neox, const KvRows& rows,
                           uint16_t* k_cache, uint16_t* v_cache, GpuStream stream) {
  if (n_tokens <= 0 || n_head <= 0 || n_head_kv <= 0 || n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim ||
      rows.pos == nullptr) {
    return kGpuInvalidValue;
  }
  const int64_t n = n_tokens * ((n_head + n_head_kv) * static_cast<int64_t>(n_rot / 2) + static_cast<int64_t>(n_head_kv) * head_dim);
  return launch_dependent(rope_store_kv_kernel, dim3(blocks_for(n)), dim3(kThreads), stream, q, k, v,
                          reinterpret_cast<const float2*>(cos_sin), n_tokens, n_head, n_head_kv, head_dim, n_rot, neox, rows,
                          reinterpret_cast<__half*>(k_cache), reinterpret_cast<__half*>(v_cache));
}

GpuError embed_rows(const FloatWeightView& w, const int32_t* tokens, int64_t n_tokens, float* dst, GpuStream stream) {
  if (n_tokens <= 0 || !float_view_cols_ok(w)) return kGpuInvalidValue;
  embed_kernel<<<blocks_for(n_tokens * w.n_cols), kThreads, 0, stream>>>(w, tokens, n_tokens, dst);
  return launch_status();
}

#if !defined(__HIPCC__)
// gpu_common.cuh's launch_dependent: per device, whether its compute capability is 9 or more
// (programmatic dependent launch) and the kernels it runs were compiled for compute_90 or later
// (`wait_for_previous` is empty below that: a build for sm_80 JIT-compiled on an H100 must not
// launch early), looked up once; BITNET_CUDA_PDL=0 disables it everywhere. Every kernel is built
// for the same architectures, so one of them answers for all.
bool dependent_launch_enabled() {
  static const bool off = [] {
    const char* v = std::getenv("BITNET_CUDA_PDL");
    return v != nullptr && std::strcmp(v, "0") == 0;
  }();
  if (off) return false;
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return false;
  int state = known[device].load(std::memory_order_relaxed);
  if (state == 0) {
    int major = 0;
    cudaFuncAttributes attributes{};
    const bool sm90 = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 9;
    const bool built90 = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&scale_kernel)) == cudaSuccess &&
                         attributes.ptxVersion >= 90;
    state = sm90 && built90 ? 2 : 1;
    known[device].store(state, std::memory_order_relaxed);
  }
  return state == 2;
}
#endif

}  // namespace bitnet::cuda
