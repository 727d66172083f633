// probe(): every OpenCL platform and device, with what the kernels care about.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "backends/opencl/cl_backend.h"
#include "backends/opencl/cl_device.h"

namespace bitnet::opencl {

namespace {

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  if (clGetPlatformInfo(p, what, n, s.data(), nullptr) != CL_SUCCESS) return {};
  s.resize(std::min(s.find('\0'), s.size()));
  return s;
}

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  if (clGetDeviceInfo(d, what, n, s.data(), nullptr) != CL_SUCCESS) return {};
  s.resize(std::min(s.find('\0'), s.size()));
  return s;
}

template <class T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  if (clGetDeviceInfo(d, what, sizeof(T), &v, nullptr) != CL_SUCCESS) return T{};
  return v;
}

bool has_extension(const std::string& extensions, std::string_view name) {
  size_t pos = 0;
  while ((pos = extensions.find(name, pos)) != std::string::npos) {
    const size_t end = pos + name.size();
    const bool starts = pos == 0 || extensions[pos - 1] == ' ';
    const bool ends = end == extensions.size() || extensions[end] == ' ';
    if (starts && ends) return true;
    pos = end;
  }
  return false;
}

}  // namespace

Result<std::vector<ClDevice>> enumerate_devices() {
  cl_uint n_platforms = 0;
  const cl_int err = clGetPlatformIDs(0, nullptr, &n_platforms);
  if (err == -1001 || (err == CL_SUCCESS && n_platforms == 0)) {
    return unavailable(fmt::format("no OpenCL platform (clGetPlatformIDs: {})", err == CL_SUCCESS ? 0 : err));
  }
  BITNET_CL_RETURN_IF_ERROR(err, "clGetPlatformIDs");
  std::vector<cl_platform_id> platforms(n_platforms);
  BITNET_CL_RETURN_IF_ERROR(clGetPlatformIDs(n_platforms, platforms.data(), nullptr), "clGetPlatformIDs");

  std::vector<ClDevice> out;
  bool pocl_named = false;
  for (cl_platform_id p : platforms) {
    cl_uint n_devices = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n_devices) != CL_SUCCESS) continue;
    std::vector<cl_device_id> devices(n_devices);
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n_devices, devices.data(), nullptr) != CL_SUCCESS) continue;
    const std::string platform_name = platform_string(p, CL_PLATFORM_NAME);
    const bool is_pocl = platform_name.find("Portable Computing Language") != std::string::npos;
    for (cl_device_id d : devices) {
      ClDevice c;
      c.platform = p;
      c.device = d;
      hal::DeviceInfo& info = c.info;
      info.backend = "opencl";
      info.index = static_cast<int>(out.size());
      if (is_pocl && !pocl_named) {
        info.id = "opencl:pocl";
        pocl_named = true;
      } else {
        info.id = fmt::format("opencl:{}", info.index);
      }
      info.name = device_string(d, CL_DEVICE_NAME);
      info.vendor = device_string(d, CL_DEVICE_VENDOR);
      info.driver_version = device_string(d, CL_DRIVER_VERSION);
      info.api_version = device_string(d, CL_DEVICE_VERSION);
      info.memory_bytes = device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE);
      info.max_alloc_bytes = device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      info.compute_units = static_cast<int>(device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS));
      const std::string ext = device_string(d, CL_DEVICE_EXTENSIONS);
      info.fp16 = has_extension(ext, "cl_khr_fp16");
      info.subgroups = has_extension(ext, "cl_khr_subgroups") || has_extension(ext, "cl_intel_subgroups");
      info.int8_dot = has_extension(ext, "cl_khr_integer_dot_product");
      const auto type = device_value<cl_device_type>(d, CL_DEVICE_TYPE);
      info.is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
      info.is_software = (type & CL_DEVICE_TYPE_CPU) != 0;
      c.fp64 = has_extension(ext, "cl_khr_fp64");
      c.correctly_rounded_div =
          (device_value<cl_device_fp_config>(d, CL_DEVICE_SINGLE_FP_CONFIG) & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
      c.max_work_group = device_value<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      out.push_back(std::move(c));
    }
  }
  if (out.empty()) return unavailable("OpenCL platforms found but no devices");
  return out;
}

hal::BackendProbe probe() {
  hal::BackendProbe p;
  p.backend = "opencl";
  p.compiled = true;
  auto devices = enumerate_devices();
  if (!devices.ok()) {
    p.reason = devices.status().message();
    return p;
  }
  for (ClDevice& d : *devices) p.devices.push_back(std::move(d.info));
  p.available = true;
  return p;
}

}  // namespace bitnet::opencl
