#include "quant/q2_k_q3_k.h"

#include "core/fp16.h"
#include "quant/bytes.h"
#include "quant/k_quant_util.h"

namespace bitnet::quant {
namespace {

constexpr int kSubBlocks = kQK_K / 16;

// The 2-bit code of element e (layout in q2_k_q3_k.h).
int low2(const uint8_t* qs, int e) {
  const int shift = 2 * ((e % 128) / 32);
  return (qs[32 * (e / 128) + e % 32] >> shift) & 3;
}

}  // namespace

int q3_K_scale(const uint8_t* scales, int s) {
  const int low = s < 8 ? (scales[s] & 0xF) : (scales[s - 8] >> 4);
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low | (high << 4);
}

void q2_K_dequantize_block(const uint8_t* src, float* y) {
  const uint8_t* scales = src;
  const uint8_t* qs = src + 16;
  const float d = fp16_to_fp32(load_u16(src + 80));
  const float min = fp16_to_fp32(load_u16(src + 82));
  for (int s = 0; s < kSubBlocks; ++s) {
    const float dl = d * static_cast<float>(scales[s] & 0xF);
    const float ml = min * static_cast<float>(scales[s] >> 4);
    for (int e = 16 * s; e < 16 * s + 16; ++e) {
      y[e] = dl * static_cast<float>(low2(qs, e)) - ml;
    }
  }
}

void q3_K_dequantize_block(const uint8_t* src, float* y) {
  const uint8_t* hmask = src;
  const uint8_t* qs = src + 32;
  const uint8_t* scales = src + 96;
  const float d_all = fp16_to_fp32(load_u16(src + 108));
  for (int s = 0; s < kSubBlocks; ++s) {
    const float dl = d_all * static_cast<float>(q3_K_scale(scales, s) - 32);
    for (int e = 16 * s; e < 16 * s + 16; ++e) {
      const bool high = (hmask[e % 32] >> (e / 32)) & 1;
      y[e] = dl * static_cast<float>(low2(qs, e) - (high ? 0 : 4));
    }
  }
}

}  // namespace bitnet::quant
