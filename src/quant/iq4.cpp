#include "quant/iq4.h"

#include "core/fp16.h"
#include "quant/bytes.h"
#include "quant/q8_0.h"
#include "quant/q8_k.h"

namespace bitnet::quant {
namespace {

// 32 elements from 16 bytes of nibbles, each times dl.
void dequantize_nibbles(const uint8_t* qs, float dl, float* y) {
  for (int j = 0; j < 16; ++j) {
    y[j] = dl * static_cast<float>(kIq4NlValues[qs[j] & 0xF]);
    y[j + 16] = dl * static_cast<float>(kIq4NlValues[qs[j] >> 4]);
  }
}

// The integer dot of 32 table values (nibbles of qs[16], as dequantize_nibbles lays them out)
// with q8[32].
int dot_nibbles(const uint8_t* qs, const int8_t* q8) {
  int sumi1 = 0;
  int sumi2 = 0;
  for (int j = 0; j < 16; ++j) {
    sumi1 += q8[j] * kIq4NlValues[qs[j] & 0xF];
    sumi2 += q8[j + 16] * kIq4NlValues[qs[j] >> 4];
  }
  return sumi1 + sumi2;
}

// The 6-bit scale (0..63, before the -32) of IQ4_XS sub-block s.
int iq4_xs_scale(const uint8_t* block, int s) {
  const uint16_t scales_h = load_u16(block + 2);
  const uint8_t* scales_l = block + 4;
  return ((scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((scales_h >> (2 * s)) & 3) << 4);
}

}  // namespace

void iq4_nl_dequantize_block(const uint8_t* src, float* y) {
  dequantize_nibbles(src + 2, fp16_to_fp32(load_u16(src)), y);
}

void iq4_xs_dequantize_block(const uint8_t* src, float* y) {
  const float d = fp16_to_fp32(load_u16(src));
  const uint8_t* qs = src + 8;
  for (int s = 0; s < 8; ++s) {
    dequantize_nibbles(qs + 16 * s, d * static_cast<float>(iq4_xs_scale(src, s) - 32), y + 32 * s);
  }
}

float vec_dot_iq4_nl_q8_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kIq4NlBlockElems; ++b) {
    const uint8_t* wb = w + b * kIq4NlBlockBytes;
    const uint8_t* ab = a + b * kQ8_0BlockBytes;
    const float d = fp16_to_fp32(load_u16(ab)) * fp16_to_fp32(load_u16(wb));
    const int sumi = dot_nibbles(wb + 2, reinterpret_cast<const int8_t*>(ab + 2));
    sumf += d * static_cast<float>(sumi);
  }
  return sumf;
}

float vec_dot_iq4_xs_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* wb = w + b * kIq4XsBlockBytes;
    const uint8_t* ab = a + b * kQ8_KBlockBytes;
    const float d4d8 = fp16_to_fp32(load_u16(wb)) * q8_K_d(ab);
    const uint8_t* qs = wb + 8;
    const int8_t* q8 = q8_K_qs(ab);
    for (int s = 0; s < 8; ++s) {
      const float ds = d4d8 * static_cast<float>(iq4_xs_scale(wb, s) - 32);
      sumf += ds * static_cast<float>(dot_nibbles(qs + 16 * s, q8 + 32 * s));
    }
  }
  return sumf;
}

}  // namespace bitnet::quant
