#include "hal/registry.h"

#include <fmt/format.h>

#include <unistd.h>

#include <thread>

#include "backends/cpu/cpu_backend.h"
#include "core/cpu_features.h"
#if BITNET_HAVE_OPENCL
#include "backends/opencl/cl_backend.h"
#endif
#if BITNET_HAVE_VULKAN
#include "backends/vulkan/vk_backend.h"
#endif
#if BITNET_HAVE_CUDA
#include "backends/cuda/cuda_probe.h"
#endif
#if BITNET_HAVE_CUDA_BACKEND
#include "backends/cuda/cuda_backend.h"
#endif
#if BITNET_HAVE_HIP
#include "backends/cuda/hip_backend.h"
#endif

namespace bitnet::hal {

namespace {

// The CPU device's id names the kernel set that will run ("cpu-avx2"); a requested set the
// CPU cannot run makes the CPU unavailable, with the reason.
BackendProbe probe_cpu(const std::string& requested_isa) {
  const CpuFeatures f = detect_cpu_features();
  const Result<std::string> isa = cpu::resolve_cpu_isa(requested_isa);
  if (!isa.ok()) return {"cpu", true, false, "BITNET_CPU_ISA: " + isa.status().message(), {}};
  DeviceInfo d;
  d.backend = "cpu";
  d.id = "cpu-" + *isa;
  d.name = f.model_name;
  d.vendor = "host";
  d.compute_units = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) d.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  d.features = f.names();
  // The kernel set that will run multiplies int8 by dot-product instructions: vpdpbusd
  // (AVX-512 VNNI, AVX-VNNI) or sdot/smmla (NEON dotprod, i8mm).
  for (const char* set : {"avx512vnni", "avxvnni", "neon-dotprod", "neon-i8mm"}) d.int8_dot = d.int8_dot || *isa == set;
  return {"cpu", true, true, "", {d}};
}

[[maybe_unused]] BackendProbe not_compiled(const std::string& backend) {  // unused where every backend is built
  BackendProbe p;
  p.backend = backend;
  p.reason = "not compiled into this build";
  return p;
}

void add_fakes(std::vector<BackendProbe>& probes, const std::vector<std::string>& fakes) {
  int n = 0;
  for (std::string name : fakes) {
    if (name == "rocm") name = "hip";
    for (BackendProbe& p : probes) {
      if (p.backend != name) continue;
      DeviceInfo d;
      d.backend = name;
      d.index = static_cast<int>(p.devices.size());
      d.id = fmt::format("{}:fake{}", name, n++);
      d.name = fmt::format("fake {} GPU (BITNET_GPU_FAKE)", name);
      d.vendor = "fake";
      d.memory_bytes = uint64_t{16} << 30;
      d.compute_units = 80;
      d.is_gpu = true;
      d.is_fake = true;
      if (name == "cuda") {
        d.compute_capability = "8.0";
        d.sm_count = 80;
      }
      p.devices.push_back(std::move(d));
    }
  }
}

}  // namespace

std::vector<std::string> compiled_backends() {
  std::vector<std::string> b = {"cpu"};
#if BITNET_HAVE_CUDA
  b.emplace_back("cuda");
#endif
#if BITNET_HAVE_HIP
  b.emplace_back("hip");
#endif
#if BITNET_HAVE_VULKAN
  b.emplace_back("vulkan");
#endif
#if BITNET_HAVE_OPENCL
  b.emplace_back("opencl");
#endif
  return b;
}

std::vector<BackendProbe> probe_backends(const ProbeOptions& options) {
  std::vector<BackendProbe> probes;
  probes.push_back(probe_cpu(options.cpu_isa));
#if BITNET_HAVE_CUDA
  probes.push_back(cuda::probe());
#else
  probes.push_back(not_compiled("cuda"));
#endif
#if BITNET_HAVE_HIP
  probes.push_back(hip::probe());
#else
  probes.push_back(not_compiled("hip"));
#endif
#if BITNET_HAVE_VULKAN
  probes.push_back(vulkan::probe());
#else
  probes.push_back(not_compiled("vulkan"));
#endif
#if BITNET_HAVE_OPENCL
  probes.push_back(opencl::probe());
#else
  probes.push_back(not_compiled("opencl"));
#endif
  add_fakes(probes, options.fake_gpus);
  return probes;
}

Result<std::unique_ptr<Backend>> create_backend(const DeviceInfo& device, const BackendOptions& options) {
  if (device.is_fake) return unavailable(fmt::format("{} is a fake device (BITNET_GPU_FAKE) and cannot run", device.id));
  if (device.backend == "cpu") return cpu::make_cpu_backend({options.n_threads, options.cpu_isa});
#if BITNET_HAVE_OPENCL
  if (device.backend == "opencl") return opencl::make_backend(device.index);
#endif
#if BITNET_HAVE_VULKAN
  if (device.backend == "vulkan") return vulkan::make_backend(device.index);
#endif
#if BITNET_HAVE_CUDA_BACKEND
  if (device.backend == "cuda") return cuda::make_backend(device.index);
#endif
#if BITNET_HAVE_HIP
  if (device.backend == "hip") return hip::make_backend(device.index);
#endif
  return unavailable(fmt::format("backend {} cannot run in this build", device.backend));
}

}  // namespace bitnet::hal

namespace bitnet {

std::vector<BackendDescription> list_devices(const std::vector<std::string>& fake_gpus) {
  return hal::probe_backends({.fake_gpus = fake_gpus, .cpu_isa = {}});
}

}  // namespace bitnet
