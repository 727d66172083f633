#include "hal/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "backends/cpu/cpu_backend.h"

namespace bitnet::hal {

std::vector<std::string> compiled_backends() { return {"cpu"}; }

std::string Selection::summary() const {
  return fmt::format("requested={} detected=[{}] selected={}", requested,
                     fmt::join(detected, ","), selected);
}

Result<Selection> select_backend(const BackendRequest& request) {
  static constexpr std::string_view kKnown[] = {"auto", "cpu", "gpu", "cuda", "hip", "opencl", "vulkan"};
  bool known = false;
  for (std::string_view k : kKnown) known = known || request.device == k;
  if (!known) {
    return invalid_argument(fmt::format(
        "unknown device '{}' (expected auto, cpu, gpu, cuda, hip, opencl or vulkan)", request.device));
  }
  if (request.device != "auto" && request.device != "cpu") {
    return unsupported(fmt::format("device '{}' is not compiled into this build (available: {})",
                                   request.device, fmt::join(compiled_backends(), ", ")));
  }
  Selection s;
  s.backend = cpu::make_cpu_backend({request.n_threads});
  s.requested = request.device;
  s.detected = {"cpu"};
  s.selected = s.backend->info().name;
  return s;
}

}  // namespace bitnet::hal
