#include "quant/act_quant.h"

#include <cmath>

namespace bitnet::quant {

float act_quant_i8(const float* x, int64_t n, int8_t* q, int32_t* sum) {
  double amax = 1e-5;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (a > amax) amax = a;  // false for NaN: NaN never becomes the max
  }
  const auto s = static_cast<float>(127.0 / amax);
  int32_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    // nearbyint rounds halves to even in the default rounding mode (bitnet.cpp's nearest_int).
    const float r = std::nearbyint(x[i] * s);
    int v = 0;
    if (r >= 127.0f) {
      v = 127;
    } else if (r <= -128.0f) {
      v = -128;
    } else if (r == r) {
      v = static_cast<int>(r);
    }
    q[i] = static_cast<int8_t>(v);
    total += v;
  }
  *sum = total;
  return s;
}

}  // namespace bitnet::quant
