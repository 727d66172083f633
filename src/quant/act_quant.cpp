#include "quant/act_quant.h"

#include <cmath>

namespace bitnet::quant {

int8_t act_quant_one(float x, float s) {
  // nearbyint rounds halves to even in the default rounding mode (bitnet.cpp's nearest_int).
  const float r = std::nearbyint(x * s);
  if (r >= 127.0f) return 127;
  if (r <= -128.0f) return -128;
  return r == r ? static_cast<int8_t>(r) : 0;
}

float act_quant_i8(const float* x, int64_t n, int8_t* q, int32_t* sum) {
  double amax = 1e-5;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (a > amax) amax = a;  // false for NaN: NaN never becomes the max
  }
  const auto s = static_cast<float>(127.0 / amax);
  int32_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    q[i] = act_quant_one(x[i], s);
    total += q[i];
  }
  *sum = total;
  return s;
}

}  // namespace bitnet::quant
