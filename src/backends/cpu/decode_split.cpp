#include "backends/cpu/decode_split.h"

#include <algorithm>

namespace bitnet::cpu {

namespace {
// Weight of the newest measurement in a thread's rate: a loop's time varies by several percent
// from step to step with the other threads' and processes' traffic.
constexpr double kNewRateWeight = 0.125;
}  // namespace

void DecodeSplit::cuts(size_t key, int64_t n_items, std::span<int64_t> cuts) const {
  const size_t n = static_cast<size_t>(n_threads_);
  const size_t base = key * n;
  std::vector<double>& share = share_;
  double total = 0;
  for (size_t s = 0; s < n; ++s) {
    const double r = base + n <= rates_.size() ? rates_[base + s] : 0.0;
    share[s] = r;
    total += r;
  }
  bool measured = total > 0;
  for (size_t s = 0; s < n && measured; ++s) measured = share[s] > 0;
  // Shares as fractions, each within [0.5, 1.5] of an even one, renormalised.
  double sum = 0;
  for (size_t s = 0; s < n; ++s) {
    const double even = 1.0 / static_cast<double>(n);
    share[s] = measured ? std::clamp(share[s] / total, 0.5 * even, 1.5 * even) : even;
    sum += share[s];
  }
  double acc = 0;
  cuts[0] = 0;
  for (size_t s = 0; s < n; ++s) {
    acc += share[s] / sum;
    cuts[s + 1] = s + 1 == n ? n_items : std::clamp<int64_t>(static_cast<int64_t>(acc * static_cast<double>(n_items) + 0.5), cuts[s], n_items);
  }
}

void DecodeSplit::record(size_t key, std::span<const int64_t> items, std::span<const int64_t> busy_ns) {
  const size_t n = static_cast<size_t>(n_threads_);
  if (rates_.size() < (key + 1) * n) rates_.resize((key + 1) * n, 0.0);
  for (size_t s = 0; s < n; ++s) {
    if (items[s] <= 0 || busy_ns[s] <= 0) continue;
    const double r = static_cast<double>(items[s]) / static_cast<double>(busy_ns[s]);
    double& rate = rates_[key * n + s];
    rate = rate > 0 ? rate + kNewRateWeight * (r - rate) : r;
  }
}

}  // namespace bitnet::cpu
