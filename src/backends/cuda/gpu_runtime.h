// The few runtime names the kernel launchers' interface needs, from CUDA or from HIP (hipcc
// compiles the same .cu sources with -DBITNET_HIP). Host code of the CUDA backend only.
#pragma once

#if defined(__HIPCC__) || defined(BITNET_HIP)
#include <hip/hip_runtime_api.h>
namespace bitnet::cuda {
using GpuStream = hipStream_t;
using GpuError = hipError_t;
inline constexpr GpuError kGpuSuccess = hipSuccess;
inline constexpr GpuError kGpuInvalidValue = hipErrorInvalidValue;
inline GpuError gpuGetLastError() { return hipGetLastError(); }
}  // namespace bitnet::cuda
#else
#include <cuda_runtime_api.h>
namespace bitnet::cuda {
using GpuStream = cudaStream_t;
using GpuError = cudaError_t;
inline constexpr GpuError kGpuSuccess = cudaSuccess;
inline constexpr GpuError kGpuInvalidValue = cudaErrorInvalidValue;
inline GpuError gpuGetLastError() { return cudaGetLastError(); }
}  // namespace bitnet::cuda
#endif
