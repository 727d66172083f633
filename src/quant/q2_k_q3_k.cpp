#include "quant/q2_k_q3_k.h"

#include "core/fp16.h"
#include "quant/bytes.h"
#include "quant/k_quant_util.h"
#include "quant/q8_k.h"

namespace bitnet::quant {
namespace {

constexpr int kSubBlocks = kQK_K / 16;

// The 2-bit code of element e (layout in q2_k_q3_k.h).
int low2(const uint8_t* qs, int e) {
  const int shift = 2 * ((e % 128) / 32);
  return (qs[32 * (e / 128) + e % 32] >> shift) & 3;
}

// Q3_K code of element e: the low 2 bits minus 4 unless the high bit is set, in [-4, 3].
int q3_K_code(const uint8_t* hmask, const uint8_t* qs, int e) {
  const bool high = (hmask[e % 32] >> (e / 32)) & 1;
  return low2(qs, e) - (high ? 0 : 4);
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
      y[e] = dl * static_cast<float>(q3_K_code(hmask, qs, e));
    }
  }
}

float vec_dot_q2_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* wb = w + b * kQ2_KBlockBytes;
    const uint8_t* ab = a + b * kQ8_KBlockBytes;
    const uint8_t* scales = wb;
    const uint8_t* qs = wb + 16;
    const int8_t* q8 = q8_K_qs(ab);

    // The min terms: each 16-element bsum of the activations times its sub-block's min.
    int summs = 0;
    for (int s = 0; s < kSubBlocks; ++s) summs += q8_K_bsum(ab, s) * (scales[s] >> 4);

    int isum = 0;
    for (int s = 0; s < kSubBlocks; ++s) {
      int isuml = 0;
      for (int e = 16 * s; e < 16 * s + 16; ++e) isuml += q8[e] * low2(qs, e);
      isum += (scales[s] & 0xF) * isuml;
    }
    const float d_a = q8_K_d(ab);
    const float dall = d_a * fp16_to_fp32(load_u16(wb + 80));
    const float dmin = d_a * fp16_to_fp32(load_u16(wb + 82));
    sumf += dall * static_cast<float>(isum) - dmin * static_cast<float>(summs);
  }
  return sumf;
}

float vec_dot_q3_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sums[8] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* wb = w + b * kQ3_KBlockBytes;
    const uint8_t* ab = a + b * kQ8_KBlockBytes;
    const uint8_t* hmask = wb;
    const uint8_t* qs = wb + 32;
    const uint8_t* scales = wb + 96;
    const int8_t* q8 = q8_K_qs(ab);
    int scale[kSubBlocks];
    for (int s = 0; s < kSubBlocks; ++s) scale[s] = q3_K_scale(scales, s) - 32;
    int32_t lanes[8] = {};
    for (int e = 0; e < kQK_K; ++e) {
      // ggml forms code * q8 in int16 (|product| <= 4 * 128), then adds scale * that in int32.
      const auto prod = static_cast<int16_t>(q8[e] * q3_K_code(hmask, qs, e));
      lanes[e % 8] += scale[e / 16] * prod;
    }
    const float d = fp16_to_fp32(load_u16(wb + 108)) * q8_K_d(ab);
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(lanes[l]);
  }
  float sumf = 0.0f;
  for (float s : sums) sumf += s;
  return sumf;
}

}  // namespace bitnet::quant
