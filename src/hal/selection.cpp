#include "hal/selection.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace bitnet::hal {

namespace {

constexpr const char* kGpuOrder[] = {"cuda", "hip", "vulkan", "opencl"};

int gpu_rank(const std::string& backend) {
  for (int i = 0; i < 4; ++i) {
    if (backend == kGpuOrder[i]) return i;
  }
  return 4;
}

}  // namespace

bool is_known_device_request(const std::string& d) {
  return d == "auto" || d == "cpu" || d == "gpu" || d == "cuda" || d == "hip" || d == "opencl" ||
         d == "vulkan";
}

Result<SelectionPlan> plan_selection(const std::vector<BackendProbe>& probes,
                                     const SelectionRequest& r) {
  if (!is_known_device_request(r.device)) {
    return invalid_argument(fmt::format(
        "unknown device '{}' (expected auto, cpu, gpu, cuda, hip, opencl or vulkan)", r.device));
  }
  if (!r.gpu_backend.empty() && gpu_rank(r.gpu_backend) == 4) {
    return invalid_argument(fmt::format(
        "unknown GPU backend '{}' (expected cuda, hip, vulkan or opencl)", r.gpu_backend));
  }
  const bool explicit_backend = r.device != "auto" && r.device != "gpu" && r.device != "cpu";
  SelectionPlan plan;
  const DeviceInfo* cpu = nullptr;
  std::vector<const DeviceInfo*> gpus;
  std::vector<std::string> reasons;  // of the backends a failed GPU request names: the one asked for, or all
  for (const BackendProbe& p : probes) {
    // The CPU is always there; it is unavailable only when the requested kernel set is not.
    if (!p.available && p.backend == "cpu") return invalid_argument("cpu: " + p.reason);
    // An unavailable backend may still list devices: fakes (BITNET_GPU_FAKE), which are chosen
    // like real ones so that the fallback paths can be tested, and real devices it cannot run
    // (an AMD GPU whose architecture the HIP build has no code for, CUDA devices in a build
    // without kernels), which are detected but never candidates.
    const bool has_fakes = std::any_of(p.devices.begin(), p.devices.end(), [](const DeviceInfo& d) { return d.is_fake; });
    if (!p.available && p.backend != "cpu" && !has_fakes) {
      plan.notes.push_back(fmt::format("{}: {}", p.backend, p.compiled ? p.reason : "not compiled in"));
      if (!explicit_backend || p.backend == r.device) reasons.push_back(plan.notes.back());
    }
    for (const DeviceInfo& d : p.devices) {
      plan.detected.push_back(d.id);
      if (d.backend == "cpu") {
        cpu = &d;
      } else if (p.available || d.is_fake) {
        gpus.push_back(&d);
      }
    }
  }
  if (cpu == nullptr) return internal_error("the CPU backend is missing from the probe");

  // GPU candidates for this request, best first.
  std::vector<const DeviceInfo*> picked;
  if (r.device != "cpu") {
    for (const DeviceInfo* d : gpus) {
      if (explicit_backend && d->backend != r.device) continue;
      if (!r.gpu_backend.empty() && d->backend != r.gpu_backend) continue;
      if (r.gpu_device >= 0 && d->index != r.gpu_device) continue;
      if (r.device == "auto" && d->is_software) continue;
      picked.push_back(d);
    }
    std::stable_sort(picked.begin(), picked.end(), [](const DeviceInfo* a, const DeviceInfo* b) {
      if (a->is_software != b->is_software) return !a->is_software;  // real GPUs first
      return gpu_rank(a->backend) < gpu_rank(b->backend);
    });
  }
  for (const DeviceInfo* d : picked) plan.candidates.push_back(*d);

  const bool wants_gpu = r.device != "auto" && r.device != "cpu";
  if (wants_gpu && plan.candidates.empty()) {
    std::string why = fmt::format("no {} device{}{}", r.device == "gpu" ? "GPU" : r.device,
                                  r.gpu_backend.empty() ? "" : " of backend " + r.gpu_backend,
                                  r.gpu_device < 0 ? "" : fmt::format(" with index {}", r.gpu_device));
    if (!reasons.empty()) why += fmt::format(" ({})", fmt::join(reasons, "; "));
    if (r.strict) return unavailable(why + "; strict mode forbids falling back to the CPU");
    plan.notes.insert(plan.notes.begin(), why);
  }
  // The CPU is the fallback, except in strict mode when something else was asked for.
  if (!(r.strict && wants_gpu)) plan.candidates.push_back(*cpu);
  return plan;
}

}  // namespace bitnet::hal
