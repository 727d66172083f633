#include "quant/q2_k_q3_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>

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

// Packs 2-bit codes L[256] into qs[64] (layout in q2_k_q3_k.h).
void pack_low2(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* Lh = L + 128 * h;
    for (int r = 0; r < 32; ++r) {
      qs[32 * h + r] = static_cast<uint8_t>(Lh[r] | (Lh[r + 32] << 2) | (Lh[r + 64] << 4) |
                                            (Lh[r + 96] << 6));
    }
  }
}

}  // namespace

void q2_K_quantize_block(const float* x, uint8_t* dst) {
  constexpr float kQ4Scale = 15.0f;
  uint8_t L[kQK_K];
  uint8_t Laux[16];
  float weights[16];
  float mins[kSubBlocks];
  float scales[kSubBlocks];
  float max_scale = 0.0f;  // scales and mins are >= 0 here
  float max_min = 0.0f;
  for (int s = 0; s < kSubBlocks; ++s) {
    const float* xs = x + 16 * s;
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(xs[l]);
    scales[s] = make_qkx2_quants(16, 3, xs, weights, L + 16 * s, &mins[s], Laux, -0.5f, 0.1f, 15,
                                 true);
    if (scales[s] > max_scale) max_scale = scales[s];
    if (mins[s] > max_min) max_min = mins[s];
  }
  uint8_t* sc = dst;
  if (max_scale > 0.0f) {
    const float iscale = kQ4Scale / max_scale;
    for (int s = 0; s < kSubBlocks; ++s) {
      sc[s] = static_cast<uint8_t>(nearest_int(iscale * scales[s]));
    }
    store_u16(dst + 80, fp32_to_fp16(max_scale / kQ4Scale));
  } else {
    std::memset(sc, 0, kSubBlocks);
    store_u16(dst + 80, fp32_to_fp16(0.0f));
  }
  if (max_min > 0.0f) {
    const float iscale = kQ4Scale / max_min;
    for (int s = 0; s < kSubBlocks; ++s) {
      sc[s] = static_cast<uint8_t>(sc[s] | (nearest_int(iscale * mins[s]) << 4));
    }
    store_u16(dst + 82, fp32_to_fp16(max_min / kQ4Scale));
  } else {
    store_u16(dst + 82, fp32_to_fp16(0.0f));
  }
  const float d_all = fp16_to_fp32(load_u16(dst + 80));
  const float d_min = fp16_to_fp32(load_u16(dst + 82));
  for (int s = 0; s < kSubBlocks; ++s) {
    const float d = d_all * static_cast<float>(sc[s] & 0xF);
    if (d == 0.0f) continue;
    const float dm = d_min * static_cast<float>(sc[s] >> 4);
    for (int i = 16 * s; i < 16 * s + 16; ++i) {
      L[i] = static_cast<uint8_t>(std::clamp(nearest_int((x[i] + dm) / d), 0, 3));
    }
  }
  pack_low2(L, dst + 16);
}

void q3_K_quantize_block(const float* x, uint8_t* dst) {
  int8_t L[kQK_K];
  float scales[kSubBlocks];
  float max_scale = 0.0f;  // the sub-block scale of largest magnitude, with its sign
  float amax = 0.0f;
  for (int s = 0; s < kSubBlocks; ++s) {
    scales[s] = make_q3_quants(16, 4, x + 16 * s, L + 16 * s);
    const float a = std::fabs(scales[s]);
    if (a > amax) {
      amax = a;
      max_scale = scales[s];
    }
  }
  uint8_t* hmask = dst;
  uint8_t* qs = dst + 32;
  uint8_t* sc = dst + 96;
  std::memset(sc, 0, 12);
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int s = 0; s < kSubBlocks; ++s) {
      // ggml stores nearest_int into an int8_t before clamping; |iscale * scale| <= 32 here.
      const auto l8 = static_cast<int8_t>(nearest_int(iscale * scales[s]));
      const int l = std::clamp<int>(l8, -32, 31) + 32;
      if (s < 8) {
        sc[s] = static_cast<uint8_t>(l & 0xF);
      } else {
        sc[s - 8] = static_cast<uint8_t>(sc[s - 8] | ((l & 0xF) << 4));
      }
      sc[8 + s % 4] = static_cast<uint8_t>(sc[8 + s % 4] | ((l >> 4) << (2 * (s / 4))));
    }
    store_u16(dst + 108, fp32_to_fp16(1.0f / iscale));
  } else {
    store_u16(dst + 108, fp32_to_fp16(0.0f));
  }
  const float d_all = fp16_to_fp32(load_u16(dst + 108));
  for (int s = 0; s < kSubBlocks; ++s) {
    const float d = d_all * static_cast<float>(q3_K_scale(sc, s) - 32);
    if (d == 0.0f) continue;
    for (int i = 16 * s; i < 16 * s + 16; ++i) {
      L[i] = static_cast<int8_t>(std::clamp(nearest_int(x[i] / d), -4, 3) + 4);
    }
  }
  std::memset(hmask, 0, 32);
  uint8_t low[kQK_K];
  for (int e = 0; e < kQK_K; ++e) {
    int l = L[e];
    if (l > 3) {
      hmask[e % 32] = static_cast<uint8_t>(hmask[e % 32] | (1 << (e / 32)));
      l -= 4;
    }
    low[e] = static_cast<uint8_t>(l);
  }
  pack_low2(low, qs);
}

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
