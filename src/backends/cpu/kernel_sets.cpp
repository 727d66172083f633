// The one file that knows which kernel sets this build has: the build files compile each ISA's
// sources only for its architecture, and the list below follows them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "backends/cpu/kernel_set.h"

namespace bitnet::cpu {

namespace {

// From the portable set to the most specific: selection takes the last one the CPU executes.
constexpr const KernelSet* kSets[] = {
    &kScalarKernels,
#if defined(__x86_64__)
    &kAvx2Kernels,
    &kAvxVnniKernels,
    &kAvx512VnniKernels,
#elif defined(__aarch64__)
    &kNeonKernels,
    &kNeonDotprodKernels,
    &kNeonI8mmKernels,
#endif
};

std::string join(std::span<const std::string_view> names, std::string_view sep) {
  return fmt::format("{}", fmt::join(names, sep));
}

std::vector<std::string_view> names_of(const CpuFeatures* f) {
  std::vector<std::string_view> names;
  for (const KernelSet* set : kSets) {
    if (f == nullptr || set->supported(*f)) names.push_back(set->name);
  }
  return names;
}

}  // namespace

bool KernelSet::supported(const CpuFeatures& f) const { return missing(f).empty(); }

std::vector<std::string_view> KernelSet::missing(const CpuFeatures& f) const {
  std::vector<std::string_view> lacks;
  for (std::string_view feature : needs) {
    if (!f.has(feature)) lacks.push_back(feature);
  }
  return lacks;
}

std::span<const KernelSet* const> kernel_sets() { return kSets; }

Result<const KernelSet*> select_kernel_set(std::string_view requested, const CpuFeatures& f) {
  if (requested.empty()) {
    const auto best = std::find_if(std::rbegin(kSets), std::rend(kSets),
                                   [&](const KernelSet* set) { return set->supported(f); });
    return *best;  // the scalar set needs nothing
  }
  const auto it = std::find_if(std::begin(kSets), std::end(kSets),
                               [&](const KernelSet* set) { return set->name == requested; });
  if (it == std::end(kSets)) {
    return invalid_argument(fmt::format("unknown CPU kernel set '{}' (known: {})", requested,
                                        join(names_of(nullptr), ", ")));
  }
  const std::vector<std::string_view> lacks = (*it)->missing(f);
  if (!lacks.empty()) {
    return unsupported(fmt::format("CPU kernel set '{}' needs {}: this CPU lacks {} (it runs: {})",
                                   requested, join((*it)->needs, " "), join(lacks, " "),
                                   join(names_of(&f), ", ")));
  }
  return *it;
}

}  // namespace bitnet::cpu
