#include "backends/cuda/cuda_probe.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace bitnet::cuda {

hal::BackendProbe probe() {
  hal::BackendProbe p;
  p.backend = "cuda";
  p.compiled = true;
  int count = 0;
  // Without a driver this returns cudaErrorInsufficientDriver (35) or cudaErrorNoDevice and
  // leaves `count` untouched: test the error, not the count.
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    p.reason = err == cudaErrorInsufficientDriver
                   ? fmt::format("no CUDA driver (cudaGetDeviceCount: {} {})", static_cast<int>(err), cudaGetErrorName(err))
                   : fmt::format("no CUDA device (cudaGetDeviceCount: {} {})", static_cast<int>(err), cudaGetErrorName(err));
    return p;
  }
  if (count == 0) {
    p.reason = "no CUDA device";
    return p;
  }
  int runtime_version = 0, driver_version = 0;
  cudaRuntimeGetVersion(&runtime_version);
  cudaDriverGetVersion(&driver_version);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    hal::DeviceInfo d;
    d.backend = "cuda";
    d.index = i;
    d.id = fmt::format("cuda:{}", i);
    d.name = prop.name;
    d.vendor = "NVIDIA";
    d.driver_version = fmt::format("{}.{}", driver_version / 1000, driver_version % 1000 / 10);
    d.api_version = fmt::format("CUDA runtime {}.{}", runtime_version / 1000, runtime_version % 1000 / 10);
    d.memory_bytes = prop.totalGlobalMem;
    d.compute_units = prop.multiProcessorCount;
    d.sm_count = prop.multiProcessorCount;
    d.compute_capability = fmt::format("{}.{}", prop.major, prop.minor);
    d.int8_dot = prop.major > 6 || (prop.major == 6 && prop.minor >= 1);  // dp4a from sm_61
    d.fp16 = prop.major >= 6;
    d.subgroups = true;
    d.subgroup_size = prop.warpSize;
    d.is_gpu = true;
    p.devices.push_back(std::move(d));
  }
  p.available = !p.devices.empty();
  if (!p.available) p.reason = "no CUDA device answered cudaGetDeviceProperties";
#if !BITNET_CUDA_BACKEND
  // Built without nvcc: the kernels and the backend that runs them are not in this binary.
  if (p.available) {
    p.available = false;
    p.reason = "CUDA devices found, but this build has no CUDA kernels (no CUDA compiler at configure time)";
  }
#endif
  return p;
}

}  // namespace bitnet::cuda
