// The only place that knows which backends were compiled in: probes them, makes fakes for
// tests of selection, and creates a backend for a chosen device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bitnet/status.h"
#include "hal/backend.h"
#include "hal/device.h"

namespace bitnet::hal {

struct ProbeOptions {
  // Fake GPU backends to add ("cuda", "rocm"/"hip", "opencl", "vulkan"), for tests of the
  // selection logic; a fake device is listed and selectable but cannot run.
  std::vector<std::string> fake_gpus;
  // CPU kernel set to report and run ("" = the best this CPU executes; see resolve_cpu_isa).
  std::string cpu_isa;
};

// What create_backend needs beyond the device.
struct BackendOptions {
  int n_threads = 0;    // CPU threads (0 = every hardware thread)
  std::string cpu_isa;  // CPU kernel set ("" = the best this CPU executes)
};

// Every backend this build knows, compiled in or not, with its devices (the CPU first).
std::vector<BackendProbe> probe_backends(const ProbeOptions& options);

// Names of the backends compiled into this build, e.g. {"cpu", "opencl", "vulkan"}.
std::vector<std::string> compiled_backends();

// A backend on `device` (from probe_backends). Fake devices are kUnavailable.
Result<std::unique_ptr<Backend>> create_backend(const DeviceInfo& device, const BackendOptions& options);

}  // namespace bitnet::hal
