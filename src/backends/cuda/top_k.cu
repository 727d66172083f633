// The top-k selection of logits rows on the device (Backend::compute_top): one block per row
// runs top_math.h's radix select, so a step copies back a few dozen entries per sequence
// instead of a 128K-vocabulary row.
#include "backends/cuda/gpu_common.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/top_math.h"

namespace bitnet::cuda {
namespace {

constexpr int kTopThreads = 1024;
// Copies of each histogram bin, one per lane of a 32-thread group: the threads of a warp that
// meet keys of one digit (logits share their top bits) add to 32 different words.
constexpr int kCopies = 32;

__global__ void __launch_bounds__(kTopThreads) top_k_kernel(const float* x, int64_t n_cols, TopArgs a, TopEntry* out) {
  __shared__ uint32_t hist[256 * kCopies];
  __shared__ uint32_t s_digit, s_need, s_count, s_slot;
  const int64_t r = blockIdx.x;
  const float* row = x + r * n_cols;
  TopEntry* dst = out + a.out_begin[r];
  const int32_t k = a.k[r];
  const unsigned copy = threadIdx.x % kCopies;
  if (k > 0) {
    uint32_t prefix = 0, mask = 0;
    if (threadIdx.x == 0) s_need = static_cast<uint32_t>(k);
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int i = threadIdx.x; i < 256 * kCopies; i += blockDim.x) hist[i] = 0;
      __syncthreads();
      for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
        const uint32_t key = top_key(row[i]);
        if ((key & mask) == prefix) atomicAdd(&hist[((key >> shift) & 255u) * kCopies + copy], 1u);
      }
      __syncthreads();
      for (int b = threadIdx.x; b < 256; b += blockDim.x) {
        uint32_t sum = 0;
        for (int c = 0; c < kCopies; ++c) sum += hist[b * kCopies + c];
        hist[b * kCopies] = sum;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        uint32_t need = s_need, count = 0;
        s_digit = top_digit(hist, kCopies, need, count);
        s_need = need;
        s_count = count;
        s_slot = 0;
      }
      __syncthreads();
      prefix |= s_digit << shift;
      mask |= 0xffu << shift;
    }
    // Every entry above the k-th key, and those at it when all of them are taken.
    const uint32_t need = s_need;
    const bool all_at = need == s_count;
    for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) {
      const float v = row[i];
      const uint32_t key = top_key(v);
      if (key > prefix || (all_at && key == prefix)) dst[atomicAdd(&s_slot, 1u)] = {static_cast<int32_t>(i), v};
    }
    __syncthreads();
    if (!all_at && threadIdx.x == 0) {
      // A tie at the boundary: the first `need` of the entries at the k-th key, by index.
      uint32_t slot = s_slot, taken = 0;
      for (int64_t i = 0; i < n_cols && taken < need; ++i) {
        if (top_key(row[i]) == prefix) {
          dst[slot++] = {static_cast<int32_t>(i), row[i]};
          ++taken;
        }
      }
    }
  }
  const int32_t b0 = a.also_begin[r], n_also = a.also_begin[r + 1] - b0;
  for (int j = threadIdx.x; j < n_also; j += blockDim.x) {
    const int32_t id = a.also[b0 + j];
    dst[k + j] = {id, row[id]};
  }
}

}  // namespace

GpuError top_k_rows(const float* x, int64_t n_rows, int64_t n_cols, const TopArgs& args, TopEntry* out, GpuStream stream) {
  if (n_rows <= 0 || n_rows > 0x7fffffff || n_cols <= 0 || n_cols > 0x7fffffff) return kGpuInvalidValue;
  top_k_kernel<<<static_cast<unsigned>(n_rows), kTopThreads, 0, stream>>>(x, n_cols, args, out);
  return launch_status();
}

}  // namespace bitnet::cuda
