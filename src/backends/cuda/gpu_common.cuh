// What every .cu file of the backend shares: the runtime header of the compiler at hand (CUDA's
// nvcc or HIP's hipcc read the same sources), warp reductions and the launch error check.
// Warps are 32 lanes: AMD's wave64 runs a block of (32, n) threads as wavefronts holding two
// such "warps", and every shuffle passes width 32, so the reductions stay inside them.
#pragma once

#if defined(__HIPCC__)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

#include <cstdint>

#include "backends/cuda/gpu_runtime.h"
#include "backends/cuda/w2a8_math.h"  // kWarp, BITNET_HD

namespace bitnet::cuda {

#if defined(__HIP_DEVICE_COMPILE__)
// The kernels' warps are 32 consecutive threads of a block (every block size is a multiple of
// 32, its x extent too where it has a y): a wavefront (__AMDGCN_WAVEFRONT_SIZE, 32 on gfx10/11,
// 64 on gfx9) must hold whole warps, so that the width-32 shuffles below stay in one warp.
static_assert(__AMDGCN_WAVEFRONT_SIZE % kWarp == 0, "a wavefront must hold whole 32-lane warps");
#endif

template <class T>
__device__ __forceinline__ T shfl_xor(T v, int offset) {
#if defined(__HIPCC__)
  return __shfl_xor(v, offset, 32);
#else
  return __shfl_xor_sync(0xffffffffu, v, offset, 32);
#endif
}

// v of lane src (0..31) of the calling lane's 32-lane warp.
template <class T>
__device__ __forceinline__ T shfl_idx(T v, int src) {
#if defined(__HIPCC__)
  return __shfl(v, src, 32);
#else
  return __shfl_sync(0xffffffffu, v, src, 32);
#endif
}

// Sum over the 32 lanes with the butterfly offsets 16, 8, 4, 2, 1; every lane gets the sum
// (float: lane l adds v[l ^ off] to v[l], the order w2a8_row_twin reproduces).
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1) v += shfl_xor(v, off);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1) v = fmaxf(v, shfl_xor(v, off));
  return v;
}

// The error of the launch just made (configuration errors; faults surface at the next sync).
// Call it right after each launch, before any other runtime call: before ROCm 7,
// hipGetLastError answers the status of the last HIP call, not the first error not yet read.
inline GpuError launch_status() { return gpuGetLastError(); }

// Programmatic dependent launch (CUDA, sm_90+). A kernel launched by launch_dependent may be
// scheduled while the kernel before it in the stream finishes, so its launch overlaps that
// kernel's tail instead of following it (a decode step is about 330 small dependent launches).
// Such a kernel must begin with wait_for_previous(): it returns once the previous kernel has
// finished and its writes are visible, so nothing before it may read or write global memory.
// Kernels launched plainly (<<<>>>) wait as always. BITNET_CUDA_PDL=0 turns it off; HIP,
// devices below sm_90 and kernels built below compute_90 launch plainly (the wait is then a
// no-op).
__device__ __forceinline__ void wait_for_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

#if !defined(__HIPCC__)
// The current device is sm_90+, the kernels were built for compute_90+ (the wait above is not
// empty) and BITNET_CUDA_PDL is not 0 (elementwise.cu).
bool dependent_launch_enabled();
#endif

template <class... Params, class... Args>
GpuError launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, GpuStream stream, Args... args) {
#if !defined(__HIPCC__)
  if (dependent_launch_enabled()) {
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = 0;
    config.stream = stream;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // read, so that the next launch_status does not report it again
      return e;
    }
    return launch_status();
  }
#endif
  kernel<<<grid, block, 0, stream>>>(static_cast<Params>(args)...);
  return launch_status();
}

}  // namespace bitnet::cuda
