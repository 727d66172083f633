// rms_norm fused with the W2A8 activation quantization (optionally after the FFN's gating,
// relu(a)^2 * b or silu(a) * b, recomputed per pass like y, or after the residual add a + b,
// written once and read back), and the plain rms_norm.
//
// One block per row (two kernels: rows that fit in registers are read once; wider rows, three
// times). The sum of squares is taken in double (as the CPU's rms_norm_row), the
// normalized value y = x * scale * g is recomputed in each pass instead of stored (the same
// float expression gives the same bits), and the quantization is w2a8_math.h's act_scale /
// act_quant_one, so q and s equal quant::act_quant_i8 of y (act_quant_row_twin). One warp per
// 64-column chunk writes the chunk's q and its sum for the GEMV's epilogue. The double sums
// differ from the CPU's sequential sum only in order (far below float rounding).
#include "backends/cuda/gpu_common.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/ops_math.h"
#include "backends/cuda/w2a8_math.h"

namespace bitnet::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarp;
static_assert(kThreads % kWarp == 0);

// The block's sum (double) or max (float) of one value per thread; every thread gets it.
__device__ double block_sum(double v, double* smem) {
  v = warp_sum(v);
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kWarps; ++w) total += smem[w];
  __syncthreads();
  return total;
}

__device__ float block_max(float v, float* smem) {
  v = warp_max(v);
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  float m = 0.0f;
  for (int w = 0; w < kWarps; ++w) m = fmaxf(m, smem[w]);
  __syncthreads();
  return m;
}

// 1 / sqrt(mean(x^2) + eps) of a row of n elements x(i), as the CPU's rms_norm_row.
template <class X>
__device__ float rms_scale(X x, int64_t n, float eps, double* smem) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    const float v = x(i);
    sum = __dadd_rn(sum, __dmul_rn(v, v));
  }
  sum = block_sum(sum, smem);
  return 1.0f / sqrtf(static_cast<float>(sum / static_cast<double>(n)) + eps);
}

// x of the norm from the inputs a and b, element by element: the FFN's gating, the residual
// add, or a alone.
template <Gate kGate>
__device__ __forceinline__ float gate_value(float a, float b) {
  if constexpr (kGate == Gate::kRelu2) return relu2(a, b);
  if constexpr (kGate == Gate::kSilu) return silu_mul_one(a, b);
  if constexpr (kGate == Gate::kAdd) return __fadd_rn(a, b);
  return a;
}

// g null: no norm (y = x); b null: no gate (x = a). kAdd: sum (which may alias a or b; hence
// no __restrict__ on them) = a + b first, element by element by the thread that reads them,
// then x is read back from sum.
template <Gate kGate>
__global__ void __launch_bounds__(kThreads)
    rms_norm_quant_kernel(const float* a, const float* b, const float* __restrict__ g, int64_t n_cols, float eps,
                          int8_t* __restrict__ q, float* __restrict__ act_scale_out, int32_t* __restrict__ chunk_sum,
                          float* __restrict__ normed, float* sum) {
  __shared__ double dsmem[kWarps];
  __shared__ float fsmem[kWarps];
  wait_for_previous();
  const int64_t t = blockIdx.x;
  const float* ar = a + t * n_cols;
  const float* br = kGate == Gate::kNone ? nullptr : b + t * n_cols;
  if constexpr (kGate == Gate::kAdd) {
    float* sr = sum + t * n_cols;
    for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) sr[i] = gate_value<kGate>(ar[i], br[i]);
    __syncthreads();  // the passes below read elements other threads wrote
    ar = sr;
  }
  const auto x = [&](int64_t i) {  // kAdd: the sum, read back
    if constexpr (kGate == Gate::kRelu2 || kGate == Gate::kSilu) return gate_value<kGate>(ar[i], br[i]);
    return ar[i];
  };
  const bool norm = g != nullptr;  // uniform over the block
  const float scale = norm ? rms_scale(x, n_cols, eps, dsmem) : 1.0f;
  const auto y = [&](int64_t i) { return norm ? __fmul_rn(__fmul_rn(x(i), scale), g[i]) : x(i); };

  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) {
    const float v = y(i);
    if (normed != nullptr) normed[t * n_cols + i] = v;
    amax = fabsf(v) > amax ? fabsf(v) : amax;  // false for NaN: NaN never becomes the max
  }
  amax = block_max(amax, fsmem);
  const float s = act_scale(amax);

  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t n_chunks = n_cols / kChunkCols;
  for (int64_t c = warp; c < n_chunks; c += kWarps) {
    const int64_t i = c * kChunkCols + lane;
    const int8_t q0 = act_quant_one(y(i), s);
    const int8_t q1 = act_quant_one(y(i + kWarp), s);
    q[t * n_cols + i] = q0;
    q[t * n_cols + i + kWarp] = q1;
    const int32_t sum = warp_sum(static_cast<int32_t>(q0) + static_cast<int32_t>(q1));
    if (lane == 0) chunk_sum[t * n_chunks + c] = sum;
  }
  if (threadIdx.x == 0) act_scale_out[t] = s;
}

__device__ __forceinline__ double add_squares(double ss, float4 v) {
  ss = __dadd_rn(ss, __dmul_rn(v.x, v.x));
  ss = __dadd_rn(ss, __dmul_rn(v.y, v.y));
  ss = __dadd_rn(ss, __dmul_rn(v.z, v.z));
  return __dadd_rn(ss, __dmul_rn(v.w, v.w));
}

// as the kernel above: false for NaN, so NaN never becomes the max
__device__ __forceinline__ float abs_max(float m, float4 v) {
  m = fabsf(v.x) > m ? fabsf(v.x) : m;
  m = fabsf(v.y) > m ? fabsf(v.y) : m;
  m = fabsf(v.z) > m ? fabsf(v.z) : m;
  return fabsf(v.w) > m ? fabsf(v.w) : m;
}

// The same result for rows of up to kThreads * 4 * kVecs columns, each element read once: thread
// i holds float4 number k * kThreads + i of the row for k < kVecs in registers through all three
// passes (the kernel above reads the row three times, each pass a chain of dependent DRAM reads
// on one block: 10-20 us for one decode token's 2560 or 6912 columns). A 64-column chunk is 16
// float4s held by 16 neighbouring lanes (k * kThreads is a multiple of 16), so its sum is four
// xor shuffles. Every pointer is 16-byte aligned (the launcher checks). Only the order of the
// double sum of squares differs from the kernel above.
template <Gate kGate, int kVecs>
__global__ void __launch_bounds__(kThreads)
    rms_norm_quant_rows_kernel(const float* a, const float* b, const float* __restrict__ g, int64_t n_cols, float eps,
                               int8_t* __restrict__ q, float* __restrict__ act_scale_out, int32_t* __restrict__ chunk_sum,
                               float* __restrict__ normed, float* sum) {
  __shared__ double dsmem[kWarps];
  __shared__ float fsmem[kWarps];
  wait_for_previous();
  const int64_t t = blockIdx.x;
  const int64_t n_vecs = n_cols / 4;
  const auto* a4 = reinterpret_cast<const float4*>(a + t * n_cols);
  const auto* b4 = kGate == Gate::kNone ? nullptr : reinterpret_cast<const float4*>(b + t * n_cols);
  float4 v[kVecs];
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int64_t i = static_cast<int64_t>(k) * kThreads + threadIdx.x;
    v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i < n_vecs) {
      const float4 x = a4[i];
      if constexpr (kGate == Gate::kNone) {
        v[k] = x;
      } else {
        const float4 y = b4[i];
        v[k] = make_float4(gate_value<kGate>(x.x, y.x), gate_value<kGate>(x.y, y.y), gate_value<kGate>(x.z, y.z),
                           gate_value<kGate>(x.w, y.w));
      }
    }
  }
  if constexpr (kGate == Gate::kAdd) {
    // after every load of this thread: sum may alias a or b, and each element is this thread's alone
    auto* s4 = reinterpret_cast<float4*>(sum + t * n_cols);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = static_cast<int64_t>(k) * kThreads + threadIdx.x;
      if (i < n_vecs) s4[i] = v[k];
    }
  }
  if (g != nullptr) {  // uniform over the block
    double ss = 0.0;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      ss = add_squares(ss, v[k]);
    }
    ss = block_sum(ss, dsmem);
    const float scale = 1.0f / sqrtf(static_cast<float>(ss / static_cast<double>(n_cols)) + eps);
    const auto* g4 = reinterpret_cast<const float4*>(g);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = static_cast<int64_t>(k) * kThreads + threadIdx.x;
      if (i < n_vecs) {
        const float4 gg = __ldg(g4 + i);
        v[k] = make_float4(__fmul_rn(__fmul_rn(v[k].x, scale), gg.x), __fmul_rn(__fmul_rn(v[k].y, scale), gg.y),
                           __fmul_rn(__fmul_rn(v[k].z, scale), gg.z), __fmul_rn(__fmul_rn(v[k].w, scale), gg.w));
      }
    }
  }
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int64_t i = static_cast<int64_t>(k) * kThreads + threadIdx.x;
    if (i >= n_vecs) continue;
    if (normed != nullptr) reinterpret_cast<float4*>(normed + t * n_cols)[i] = v[k];
    amax = abs_max(amax, v[k]);
  }
  amax = block_max(amax, fsmem);
  const float s = act_scale(amax);
  auto* q4 = reinterpret_cast<char4*>(q + t * n_cols);
  const int64_t n_chunks = n_cols / kChunkCols;
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int64_t i = static_cast<int64_t>(k) * kThreads + threadIdx.x;
    const bool valid = i < n_vecs;  // the same for the 16 lanes of a chunk (n_cols % 64 == 0)
    int32_t qs = 0;
    if (valid) {
      const char4 c = make_char4(act_quant_one(v[k].x, s), act_quant_one(v[k].y, s), act_quant_one(v[k].z, s),
                                 act_quant_one(v[k].w, s));
      q4[i] = c;
      qs = static_cast<int32_t>(c.x) + c.y + c.z + c.w;
    }
#pragma unroll
    for (int off = 8; off >= 1; off >>= 1) qs += shfl_xor(qs, off);  // every lane: uniform loop
    if (valid && threadIdx.x % 16 == 0) chunk_sum[t * n_chunks + i / 16] = qs;
  }
  if (threadIdx.x == 0) act_scale_out[t] = s;
}

// One block per (row, slice).
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const float* x, const float* __restrict__ g, int64_t n_slice, float eps, float* dst) {
  __shared__ double dsmem[kWarps];
  wait_for_previous();
  const int64_t off = static_cast<int64_t>(blockIdx.x) * n_slice;
  const float scale = rms_scale([&](int64_t i) { return x[off + i]; }, n_slice, eps, dsmem);
  // Every thread has read its elements before any writes (block_sum synchronises): dst may be x.
  for (int64_t i = threadIdx.x; i < n_slice; i += kThreads) dst[off + i] = __fmul_rn(__fmul_rn(x[off + i], scale), g[i]);
}

constexpr int kMaxRowVecs = 8;  // rows of up to 8192 columns in registers

// The register kernel for rows of `vecs` float4s per thread (at most kMaxRowVecs), or with
// in_registers false the three-pass kernel.
template <Gate kGate>
GpuError launch_norm_quant(bool in_registers, int64_t vecs, unsigned grid, const float* a, const float* b,
                           const float* g, int64_t n_cols, float eps, const Q8View& out, float* normed, GpuStream stream,
                           float* sum) {
  const auto launch = [&](auto kernel) {
    return launch_dependent(kernel, dim3(grid), dim3(kThreads), stream, a, b, g, n_cols, eps, out.q, out.scale,
                            out.chunk_sum, normed, sum);
  };
  if (!in_registers) return launch(rms_norm_quant_kernel<kGate>);
  switch (vecs) {
    case 1: return launch(rms_norm_quant_rows_kernel<kGate, 1>);
    case 2: return launch(rms_norm_quant_rows_kernel<kGate, 2>);
    case 3:
    case 4: return launch(rms_norm_quant_rows_kernel<kGate, 4>);
    default: return launch(rms_norm_quant_rows_kernel<kGate, kMaxRowVecs>);
  }
}

}  // namespace

GpuError gated_rms_norm_quant(Gate gate, const float* a, const float* b, const float* g, int64_t n_tokens,
                              int64_t n_cols, float eps, Q8View out, float* normed, GpuStream stream, float* sum) {
  if (n_tokens <= 0 || n_tokens > 0x7fffffff || n_cols <= 0 || n_cols % kChunkCols != 0 ||
      (gate != Gate::kNone && b == nullptr) || (gate == Gate::kAdd) != (sum != nullptr)) {
    return kGpuInvalidValue;
  }
  const auto grid = static_cast<unsigned>(n_tokens);
  const auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  const int64_t vecs = (n_cols / 4 + kThreads - 1) / kThreads;  // float4s per thread
  const bool in_registers = vecs <= kMaxRowVecs && !misaligned(a) && !misaligned(b) && !misaligned(g) &&
                            !misaligned(out.q) && !misaligned(normed) && !misaligned(sum);
  switch (gate) {
    case Gate::kNone:
      return launch_norm_quant<Gate::kNone>(in_registers, vecs, grid, a, b, g, n_cols, eps, out, normed, stream, sum);
    case Gate::kRelu2:
      return launch_norm_quant<Gate::kRelu2>(in_registers, vecs, grid, a, b, g, n_cols, eps, out, normed, stream, sum);
    case Gate::kSilu:
      return launch_norm_quant<Gate::kSilu>(in_registers, vecs, grid, a, b, g, n_cols, eps, out, normed, stream, sum);
    case Gate::kAdd:
      return launch_norm_quant<Gate::kAdd>(in_registers, vecs, grid, a, b, g, n_cols, eps, out, normed, stream, sum);
  }
  return kGpuInvalidValue;
}

GpuError rms_norm_quant(const float* x, const float* g, int64_t n_tokens, int64_t n_cols, float eps, Q8View out,
                        float* normed, GpuStream stream) {
  return gated_rms_norm_quant(Gate::kNone, x, nullptr, g, n_tokens, n_cols, eps, out, normed, stream);
}

GpuError rms_norm(const float* x, const float* g, int64_t n_rows, int64_t n_cols, int32_t n_slices, float eps,
                  float* dst, GpuStream stream) {
  const int64_t slices = n_slices > 0 ? n_slices : 1;
  if (n_rows <= 0 || n_cols <= 0 || n_cols % slices != 0 || n_rows * slices > 0x7fffffff) return kGpuInvalidValue;
  return launch_dependent(rms_norm_kernel, dim3(static_cast<unsigned>(n_rows * slices)), dim3(kThreads), stream, x, g,
                          n_cols / slices, eps, dst);
}

}  // namespace bitnet::cuda
