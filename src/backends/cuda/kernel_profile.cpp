#include "backends/cuda/kernel_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace bitnet::cuda {

std::string KernelProfile::table() const {
  std::vector<size_t> order;
  double total = 0.0;
  for (size_t k = 0; k < entries_.size(); ++k) {
    if (entries_[k].calls == 0) continue;
    order.push_back(k);
    total += entries_[k].us;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return entries_[a].us > entries_[b].us; });
  std::string out = fmt::format("{:<28} {:>9} {:>11} {:>10} {:>7}\n", "kernel", "calls", "total ms", "mean us", "share");
  for (size_t k : order) {
    const Entry& e = entries_[k];
    out += fmt::format("{:<28} {:>9} {:>11.3f} {:>10.2f} {:>6.1f}%\n", kernel_name(static_cast<Kernel>(k)), e.calls,
                       e.us / 1000.0, e.us / static_cast<double>(e.calls), total > 0.0 ? 100.0 * e.us / total : 0.0);
  }
  out += fmt::format("{} steps, {:.3f} ms, {:.1f} us per step\n", steps_, total / 1000.0,
                     steps_ > 0 ? total / static_cast<double>(steps_) : 0.0);
  return out;
}

}  // namespace bitnet::cuda
