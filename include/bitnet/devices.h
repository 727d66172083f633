// Backends and devices as the probe finds them: what `bitnet devices` shows and what
// selection chooses from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bitnet {

struct DeviceDescription {
  std::string backend;            // "cpu" | "cuda" | "hip" | "opencl" | "vulkan"
  int index = 0;                  // device index within its backend
  std::string id;                 // short id for logs: "cpu-avx2", "opencl:pocl", "vulkan:lavapipe", "cuda:0"
  std::string name;               // device name as the driver reports it
  std::string vendor;
  std::string driver_version;
  std::string api_version;        // OpenCL / Vulkan / CUDA runtime version
  uint64_t memory_bytes = 0;      // global / device-local memory
  uint64_t max_alloc_bytes = 0;   // largest single buffer (0: unknown)
  double memory_bandwidth_gbs = 0;  // GPU memory's peak, memory clock x bus width x 2 (0: unknown)
  int compute_units = 0;
  bool int8_dot = false;          // hardware int8 dot products (dp4a, cl_khr_integer_dot_product, ...)
  bool fp16 = false;              // fp16 arithmetic
  bool subgroups = false;
  int subgroup_size = 0;
  std::string compute_capability; // CUDA "8.6"; HIP: the architecture, "gfx90a"
  int sm_count = 0;               // CUDA streaming multiprocessors
  std::vector<std::string> features;  // CPU ISA extensions or notable device extensions
  bool is_gpu = false;            // a real GPU (auto may pick it)
  bool is_software = false;       // a CPU emulation (PoCL CPU device, lavapipe): never auto-picked
  bool is_fake = false;           // from BITNET_GPU_FAKE: for tests of selection only
};

struct BackendDescription {
  std::string backend;            // "cpu", "cuda", "opencl", ...
  bool compiled = false;          // built into this binary
  bool available = false;         // runtime present and at least one device
  std::string reason;             // why not available ("no OpenCL platform (-1001)", ...)
  std::vector<DeviceDescription> devices;
};

// Probes every backend this build knows (compiled in or not). `fake_gpus` adds fake devices
// ("cuda", "rocm", ...) for tests of the selection logic; they are listed but cannot run.
std::vector<BackendDescription> list_devices(const std::vector<std::string>& fake_gpus);

}  // namespace bitnet
