#include "quant/q8_0.h"

#include <algorithm>
#include <cmath>

#include "core/fp16.h"
#include "quant/bytes.h"

namespace bitnet::quant {
namespace {

// roundf: halves away from zero, as ggml. A non-finite product (1/d overflows when d is
// subnormal) becomes 0, which is what ggml's float -> int8 conversion yields on x86; the
// stored d is 0 then anyway.
int8_t round_to_int8(float v) {
  return std::isfinite(v) ? static_cast<int8_t>(std::round(v)) : int8_t{0};
}

// amax / 127 of a block.
float q8_scale(const float* x) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kQ8_0BlockElems; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax / 127.0f;
}

}  // namespace

void q8_0_quantize_block(const float* x, uint8_t* dst) {
  const float d = q8_scale(x);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(dst, fp32_to_fp16(d));
  for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
    dst[2 + j] = static_cast<uint8_t>(round_to_int8(x[j] * id));
  }
}

void q8_0_dequantize_block(const uint8_t* src, float* y) {
  const float d = fp16_to_fp32(load_u16(src));
  for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
    y[j] = static_cast<float>(static_cast<int8_t>(src[2 + j])) * d;
  }
}

void q8_1_quantize_block(const float* x, uint8_t* dst) {
  const float d = q8_scale(x);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(dst, fp32_to_fp16(d));
  int sum = 0;
  for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
    const int8_t q = round_to_int8(x[j] * id);
    dst[4 + j] = static_cast<uint8_t>(q);
    sum += q;
  }
  store_u16(dst + 2, fp32_to_fp16(static_cast<float>(sum) * d));
}

void q8_1_dequantize_block(const uint8_t* src, float* y) {
  const float d = fp16_to_fp32(load_u16(src));
  for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
    y[j] = static_cast<float>(static_cast<int8_t>(src[4 + j])) * d;
  }
}

float vec_dot_q8_0_q8_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQ8_0BlockElems; ++b) {
    const uint8_t* wb = w + b * kQ8_0BlockBytes;
    const uint8_t* ab = a + b * kQ8_0BlockBytes;
    int sumi = 0;
    for (int64_t j = 0; j < kQ8_0BlockElems; ++j) {
      sumi += static_cast<int8_t>(wb[2 + j]) * static_cast<int8_t>(ab[2 + j]);
    }
    sumf += static_cast<float>(sumi) * (fp16_to_fp32(load_u16(wb)) * fp16_to_fp32(load_u16(ab)));
  }
  return sumf;
}

}  // namespace bitnet::quant
