// Enumerating OpenCL devices: shared by probe() and make_backend().
#pragma once

#include <string>
#include <vector>

#include "backends/opencl/cl_common.h"
#include "hal/device.h"

namespace bitnet::opencl {

struct ClDevice {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  hal::DeviceInfo info;
  bool fp64 = false;              // cl_khr_fp64
  bool correctly_rounded_div = false;  // CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT for float
  size_t max_work_group = 1;
};

// Every device of every platform, in probe order (index = position). An error when the
// runtime has no platform (clGetPlatformIDs -1001) or a query fails.
Result<std::vector<ClDevice>> enumerate_devices();

}  // namespace bitnet::opencl
