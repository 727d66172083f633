#include "quant/q8_0.h"

#include <algorithm>
#include <cmath>

#include "core/fp16.h"
#include "quant/bytes.h"

namespace bitnet::quant {

void q8_0_quantize_block(const float* x, uint8_t* dst) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kQ8_0BlockElems; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(dst, fp32_to_fp16(d));
  for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
    // roundf: halves away from zero, as ggml. A non-finite product (1/d overflows when d is
    // subnormal) becomes 0, which is what ggml's float -> int8 conversion yields on x86; the
    // stored d is 0 then anyway.
    const float v = x[j] * id;
    const int8_t q = std::isfinite(v) ? static_cast<int8_t>(std::round(v)) : int8_t{0};
    dst[2 + j] = static_cast<uint8_t>(q);
  }
}

void q8_0_dequantize_block(const uint8_t* src, float* y) {
  const float d = fp16_to_fp32(load_u16(src));
  for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
    y[j] = static_cast<float>(static_cast<int8_t>(src[2 + j])) * d;
  }
}

}  // namespace bitnet::quant
