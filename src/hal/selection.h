// Device selection as a pure function of the probe results and the request, so that the
// rules can be tested with fake devices. Order of preference:
//   auto:   real GPUs (cuda, hip, vulkan, opencl, in that order), then the CPU. Software
//           implementations (PoCL's CPU device, lavapipe) are never picked by auto.
//   gpu:    real GPUs first, then software GPU implementations, then the CPU.
//   <name>: that backend's devices (software ones included), then the CPU.
//   cpu:    the CPU.
// BITNET_GPU_BACKEND narrows GPU candidates to one backend, BITNET_GPU_DEVICE to one index.
// The CPU stays the last candidate (the fallback) unless strict mode forbids falling back.
#pragma once

#include <string>
#include <vector>

#include "bitnet/status.h"
#include "hal/device.h"

namespace bitnet::hal {

struct SelectionRequest {
  std::string device = "auto";  // auto | cpu | gpu | cuda | hip | opencl | vulkan
  std::string gpu_backend;      // narrows GPU candidates ("" = any)
  int gpu_device = -1;          // narrows to one device index (-1 = any)
  bool strict = false;          // no fallback to another device
};

struct SelectionPlan {
  std::vector<DeviceInfo> candidates;  // in order; the first that loads is used
  std::vector<std::string> detected;   // ids of every runnable or fake device, for the log line
  std::vector<std::string> notes;      // why wanted devices are missing ("opencl: no platform")
};

bool is_known_device_request(const std::string& device);

Result<SelectionPlan> plan_selection(const std::vector<BackendProbe>& probes,
                                     const SelectionRequest& request);

}  // namespace bitnet::hal
