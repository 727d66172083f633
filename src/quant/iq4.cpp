#include "quant/iq4.h"

#include "core/fp16.h"
#include "quant/bytes.h"

namespace bitnet::quant {
namespace {

// 32 elements from 16 bytes of nibbles, each times dl.
void dequantize_nibbles(const uint8_t* qs, float dl, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = dl * static_cast<float>(kIq4NlValues[qs[j] & 0xF]);
    y[j + 16] = dl * static_cast<float>(kIq4NlValues[qs[j] >> 4]);
  }
}

}  // namespace

void iq4_nl_dequantize_block(const uint8_t* src, float* y) {
  dequantize_nibbles(src + 2, fp16_to_fp32(load_u16(src)), y);
}

void iq4_xs_dequantize_block(const uint8_t* src, float* y) {
  const float d = fp16_to_fp32(load_u16(src));
  const uint16_t scales_h = load_u16(src + 2);
  const uint8_t* scales_l = src + 4;
  const uint8_t* qs = src + 8;
  for (int s = 0; s < 8; ++s) {
    const int ls = ((scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((scales_h >> (2 * s)) & 3) << 4);
    dequantize_nibbles(qs + 16 * s, d * static_cast<float>(ls - 32), y + 32 * s);
  }
}

}  // namespace bitnet::quant
