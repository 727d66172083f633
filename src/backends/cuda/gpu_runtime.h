// The GPU runtime API of the backend's host code and kernel launchers: CUDA's, or HIP's when the
// same sources are built for AMD GPUs (hipcc for the .cu files, the host compiler with
// BITNET_HIP=1 for the .cpp files; see CMakeLists.txt). The code is written against CUDA's
// names; for HIP each one the backend uses is mapped to its HIP twin here, as llama.cpp's
// vendors/hip.h does. A name missing from this list fails to compile in the HIP build, never
// silently. Include this header, never <cuda_runtime_api.h> directly.
#pragma once

#if defined(__HIPCC__) || BITNET_HIP
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>

#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDeviceProp hipDeviceProp_t
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaDevAttrGlobalMemoryBusWidth hipDeviceAttributeMemoryBusWidth
#define cudaDevAttrL2CacheSize hipDeviceAttributeL2CacheSize
#define cudaDevAttrMemoryClockRate hipDeviceAttributeMemoryClockRate
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaError_t hipError_t
#define cudaErrorECCUncorrectable hipErrorECCNotCorrectable
#define cudaErrorIllegalAddress hipErrorIllegalAddress
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaErrorLaunchFailure hipErrorLaunchFailure
#define cudaErrorLaunchTimeout hipErrorLaunchTimeOut
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaEventCreate hipEventCreate
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDestroy hipEventDestroy
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEvent_t hipEvent_t
#define cudaFree hipFree
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncGetAttributes hipFuncGetAttributes
#define cudaFreeHost hipHostFree
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaGetErrorName hipGetErrorName
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaGraphExec_t hipGraphExec_t
#define cudaGraphInstantiate hipGraphInstantiateWithFlags
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraph_t hipGraph_t
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocDefault hipHostMallocDefault
#define cudaMalloc hipMalloc
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemset hipMemset
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaSetDevice hipSetDevice
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaStreamCreate hipStreamCreate
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStream_t hipStream_t
#define cudaSuccess hipSuccess
#else
#include <cuda_runtime_api.h>
#endif

namespace bitnet::cuda {

using GpuStream = cudaStream_t;
using GpuError = cudaError_t;
inline constexpr GpuError kGpuSuccess = cudaSuccess;
inline constexpr GpuError kGpuInvalidValue = cudaErrorInvalidValue;
inline GpuError gpuGetLastError() { return cudaGetLastError(); }

// The runtime's name in messages ("CUDA" or "HIP") and the backend's id in the registry.
#if defined(__HIPCC__) || BITNET_HIP
inline constexpr const char* kGpuApi = "HIP";
inline constexpr const char* kGpuBackendId = "hip";
#else
inline constexpr const char* kGpuApi = "CUDA";
inline constexpr const char* kGpuBackendId = "cuda";
#endif

}  // namespace bitnet::cuda
