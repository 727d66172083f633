#include "model/weight_check.h"

#include <fmt/format.h>

#include <cmath>

#include "quant/quant.h"

namespace bitnet {

namespace {
constexpr double kMinNormRms = 1e-3;
constexpr double kMaxNormRms = 1e3;
}  // namespace

std::vector<std::string> find_suspicious_weights(const Network& model) {
  std::vector<std::string> found;
  for (const hal::WeightDesc& w : model.weight_table()) {
    const int64_t n = w.ne[0] * w.ne[1] * w.ne[2] * w.ne[3];
    if (w.ne[1] != 1 || quant::is_ternary(w.type)) continue;  // 1-D float weights only
    std::vector<float> v(static_cast<size_t>(n));
    if (!quant::dequantize(w.type, w.bytes, n, v.data()).ok()) {
      found.push_back(fmt::format("{}: cannot be decoded", w.name));
      continue;
    }
    double sum_sq = 0.0;
    int64_t non_finite = 0;
    for (float x : v) {
      if (!std::isfinite(x)) ++non_finite;
      else sum_sq += static_cast<double>(x) * x;
    }
    if (non_finite > 0) {
      found.push_back(fmt::format("{}: {} non-finite values", w.name, non_finite));
      continue;
    }
    const bool is_norm = w.name.find("norm") != std::string::npos;
    const double rms = std::sqrt(sum_sq / static_cast<double>(n));
    if (is_norm && (rms < kMinNormRms || rms > kMaxNormRms)) {
      found.push_back(fmt::format("{}: root-mean-square {:.3g} outside [{:g}, {:g}]", w.name, rms,
                                  kMinNormRms, kMaxNormRms));
    }
  }
  return found;
}

}  // namespace bitnet
