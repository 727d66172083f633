// rms_norm fused with the W2A8 activation quantization (optionally after the FFN's gating,
// relu(a)^2 * b or silu(a) * b, recomputed per pass like y, or after the residual add a + b,
// written once and read back), and the plain rms_norm.
//
// One block per row. The sum of squares is taken in double (as the CPU's rms_norm_row), the
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
  const int64_t t = blockIdx.x;
  const float* ar = a + t * n_cols;
  const float* br = kGate == Gate::kNone ? nullptr : b + t * n_cols;
  if constexpr (kGate == Gate::kAdd) {
    float* sr = sum + t * n_cols;
    for (int64_t i = threadIdx.x; i < n_cols; i += kThreads) sr[i] = __fadd_rn(ar[i], br[i]);
    __syncthreads();  // the passes below read elements other threads wrote
    ar = sr;
  }
  const auto x = [&](int64_t i) {
    if constexpr (kGate == Gate::kRelu2) return relu2(ar[i], br[i]);
    if constexpr (kGate == Gate::kSilu) return silu_mul_one(ar[i], br[i]);
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

// One block per (row, slice).
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const float* x, const float* __restrict__ g, int64_t n_slice, float eps, float* dst) {
  __shared__ double dsmem[kWarps];
  const int64_t off = static_cast<int64_t>(blockIdx.x) * n_slice;
  const float scale = rms_scale([&](int64_t i) { return x[off + i]; }, n_slice, eps, dsmem);
  // Every thread has read its elements before any writes (block_sum synchronises): dst may be x.
  for (int64_t i = threadIdx.x; i < n_slice; i += kThreads) dst[off + i] = __fmul_rn(__fmul_rn(x[off + i], scale), g[i]);
}

}  // namespace

GpuError gated_rms_norm_quant(Gate gate, const float* a, const float* b, const float* g, int64_t n_tokens,
                              int64_t n_cols, float eps, Q8View out, float* normed, GpuStream stream, float* sum) {
  if (n_tokens <= 0 || n_tokens > 0x7fffffff || n_cols <= 0 || n_cols % kChunkCols != 0 ||
      (gate != Gate::kNone && b == nullptr) || (gate == Gate::kAdd) != (sum != nullptr)) {
    return kGpuInvalidValue;
  }
  const auto grid = static_cast<unsigned>(n_tokens);
  switch (gate) {
    case Gate::kNone:
      rms_norm_quant_kernel<Gate::kNone><<<grid, kThreads, 0, stream>>>(a, b, g, n_cols, eps, out.q, out.scale,
                                                                         out.chunk_sum, normed, sum);
      break;
    case Gate::kRelu2:
      rms_norm_quant_kernel<Gate::kRelu2><<<grid, kThreads, 0, stream>>>(a, b, g, n_cols, eps, out.q, out.scale,
                                                                          out.chunk_sum, normed, sum);
      break;
    case Gate::kSilu:
      rms_norm_quant_kernel<Gate::kSilu><<<grid, kThreads, 0, stream>>>(a, b, g, n_cols, eps, out.q, out.scale,
                                                                         out.chunk_sum, normed, sum);
      break;
    case Gate::kAdd:
      rms_norm_quant_kernel<Gate::kAdd><<<grid, kThreads, 0, stream>>>(a, b, g, n_cols, eps, out.q, out.scale,
                                                                        out.chunk_sum, normed, sum);
      break;
  }
  return launch_status();
}

GpuError rms_norm_quant(const float* x, const float* g, int64_t n_tokens, int64_t n_cols, float eps, Q8View out,
                        float* normed, GpuStream stream) {
  return gated_rms_norm_quant(Gate::kNone, x, nullptr, g, n_tokens, n_cols, eps, out, normed, stream);
}

GpuError rms_norm(const float* x, const float* g, int64_t n_rows, int64_t n_cols, int32_t n_slices, float eps,
                  float* dst, GpuStream stream) {
  const int64_t slices = n_slices > 0 ? n_slices : 1;
  if (n_rows <= 0 || n_cols <= 0 || n_cols % slices != 0 || n_rows * slices > 0x7fffffff) return kGpuInvalidValue;
  rms_norm_kernel<<<static_cast<unsigned>(n_rows * slices), kThreads, 0, stream>>>(x, g, n_cols / slices, eps, dst);
  return launch_status();
}

}  // namespace bitnet::cuda
