#include "backends/cuda/cuda_probe.h"
#if BITNET_HIP
#include "backends/cuda/hip_backend.h"  // the registry's declarations, checked against these
#endif

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>

#include "backends/cuda/gpu_runtime.h"

namespace bitnet::cuda {
namespace {

#if BITNET_HIP
// The architecture of a gcnArchName ("gfx90a:sramecc+:xnack-" -> "gfx90a").
std::string gfx_arch(const char* gcn_arch_name) {
  const std::string_view s(gcn_arch_name);
  return std::string(s.substr(0, s.find(':')));
}

// Architectures with v_dot4_i32_i8, as w2a8_math.h's BITNET_AMDGCN_SDOT4 lists them.
bool gfx_has_sdot4(const std::string& arch) {
  static constexpr std::string_view kWith[] = {"gfx906",  "gfx908",  "gfx90a",  "gfx1011", "gfx1012", "gfx1030",
                                               "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"};
  return std::find(std::begin(kWith), std::end(kWith), arch) != std::end(kWith);
}

// Architectures whose GPUs all carry HBM (Vega 20, CDNA 1-3).
bool gfx_has_hbm(const std::string& arch) {
  static constexpr std::string_view kHbm[] = {"gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942"};
  return std::find(std::begin(kHbm), std::end(kHbm), arch) != std::end(kHbm);
}

// Whether this build holds code objects for `arch` (CMake's BITNET_HIP_ARCHS, ','-separated here).
bool built_for(const std::string& arch) {
  const std::string_view list = BITNET_HIP_ARCHS;
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string entry(list.substr(at, end - at));
    if (gfx_arch(entry.c_str()) == arch) return true;  // "gfx90a:xnack+" builds for gfx90a
    at = end + 1;
  }
  return false;
}
#endif

}  // namespace

#if BITNET_HIP
std::string hip_arch_refusal(const char* gcn_arch_name) {
  const std::string arch = gfx_arch(gcn_arch_name);
  if (built_for(arch)) return {};
  return fmt::format("this build has no code objects for {} (built for {}; configure with -DBITNET_HIP_ARCHS={})", arch,
                     BITNET_HIP_ARCHS, arch);
}
#endif

hal::BackendProbe probe() {
  hal::BackendProbe p;
  p.backend = kGpuBackendId;
  p.compiled = true;
  int count = 0;
  // Without a driver this returns cudaErrorInsufficientDriver (35) or cudaErrorNoDevice and
  // leaves `count` untouched: test the error, not the count. HIP without an AMD GPU (no
  // /dev/kfd) answers hipErrorNoDevice (100).
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    p.reason = err == cudaErrorInsufficientDriver
                   ? fmt::format("no {} driver ({}GetDeviceCount: {} {})", kGpuApi, kGpuBackendId, static_cast<int>(err),
                                 cudaGetErrorName(err))
                   : fmt::format("no {} device ({}GetDeviceCount: {} {})", kGpuApi, kGpuBackendId, static_cast<int>(err),
                                 cudaGetErrorName(err));
    return p;
  }
  if (count == 0) {
    p.reason = fmt::format("no {} device", kGpuApi);
    return p;
  }
  int runtime_version = 0, driver_version = 0;
  (void)cudaRuntimeGetVersion(&runtime_version);
  (void)cudaDriverGetVersion(&driver_version);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    hal::DeviceInfo d;
    d.backend = kGpuBackendId;
    d.index = i;
    d.id = fmt::format("{}:{}", kGpuBackendId, i);
    d.name = prop.name;
    d.memory_bytes = prop.totalGlobalMem;
    d.compute_units = prop.multiProcessorCount;
    d.sm_count = prop.multiProcessorCount;
    d.subgroups = true;
    d.subgroup_size = prop.warpSize;
#if BITNET_HIP
    // ROCm numbers its versions major * 10^7 + minor * 10^5 + patch; the architecture
    // ("gfx90a:sramecc+:xnack-") stands where CUDA has a compute capability.
    d.vendor = "AMD";
    d.driver_version = "";  // hipDriverGetVersion answers the HIP version, not the amdgpu driver's
    d.api_version = fmt::format("HIP runtime {}.{}", runtime_version / 10000000, runtime_version / 100000 % 100);
    d.compute_capability = gfx_arch(prop.gcnArchName);
    d.int8_dot = gfx_has_sdot4(d.compute_capability);
    d.fp16 = true;
#else
    d.vendor = "NVIDIA";
    d.driver_version = fmt::format("{}.{}", driver_version / 1000, driver_version % 1000 / 10);
    d.api_version = fmt::format("CUDA runtime {}.{}", runtime_version / 1000, runtime_version % 1000 / 10);
    d.compute_capability = fmt::format("{}.{}", prop.major, prop.minor);
    d.int8_dot = prop.major > 6 || (prop.major == 6 && prop.minor >= 1);  // dp4a from sm_61
    d.fp16 = prop.major >= 6;
#endif
    // The memory's peak as the kernel benchmark computes it: double data rate x bus width. On
    // AMD only for HBM (the Instinct and Vega 20 architectures): for GDDR6 ROCm is said to report
    // a clock that is not the data rate's half, so the peak is left unknown there.
#if BITNET_HIP
    const bool peak_known = gfx_has_hbm(d.compute_capability);
#else
    const bool peak_known = true;
#endif
    int clock_khz = 0, bus_bits = 0;
    if (peak_known && cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, i) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, i) == cudaSuccess) {
      d.memory_bandwidth_gbs = peak_bandwidth_gbs(clock_khz, bus_bits);
    }
    d.is_gpu = true;
    p.devices.push_back(std::move(d));
  }
  p.available = !p.devices.empty();
  if (!p.available) p.reason = fmt::format("no {} device answered {}GetDeviceProperties", kGpuApi, kGpuBackendId);
#if BITNET_HIP
  // Listed either way; runnable where the build holds the device's code objects.
  std::string refusal;
  bool any_built = false;
  for (const hal::DeviceInfo& d : p.devices) {
    const std::string why = hip_arch_refusal(d.compute_capability.c_str());
    if (why.empty()) any_built = true;
    else if (refusal.empty()) refusal = why;
  }
  if (p.available && !any_built) {
    p.available = false;
    p.reason = refusal;
  }
#endif
#if !BITNET_CUDA_BACKEND
  // Built without nvcc: the kernels and the backend that runs them are not in this binary.
  if (p.available) {
    p.available = false;
    p.reason = fmt::format("{} devices found, but this build has no {} kernels (no compiler at configure time)", kGpuApi, kGpuApi);
  }
#endif
  return p;
}

}  // namespace bitnet::cuda
