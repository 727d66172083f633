// The only place that knows which backends were compiled in. Resolves a device request
// ("auto", "cpu", ...) to a backend; GPU backends and the probe arrive with later issues.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bitnet/status.h"
#include "hal/backend.h"

namespace bitnet::hal {

struct BackendRequest {
  std::string device = "auto";  // auto | cpu | gpu | cuda | hip | opencl | vulkan
  int n_threads = 0;            // CPU threads; 0 = all hardware threads
};

// Backends compiled into this build, e.g. {"cpu"}.
std::vector<std::string> compiled_backends();

struct Selection {
  std::unique_ptr<Backend> backend;
  std::string requested;
  std::vector<std::string> detected;
  std::string selected;
  std::string summary() const;  // "requested=auto detected=[cpu] selected=cpu-scalar"
};

Result<Selection> select_backend(const BackendRequest& request);

}  // namespace bitnet::hal
