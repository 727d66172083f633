#include "quant/iq4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/bytes.h"
#include "quant/k_quant_util.h"
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

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS

// ggml's best_index_int8 over the 16 table values: the index of the value nearest x (the upper
// one on a tie), by bisection.
int best_index(float x) {
  const int8_t* val = kIq4NlValues;
  if (x <= static_cast<float>(val[0])) return 0;
  if (x >= static_cast<float>(val[15])) return 15;
  int ml = 0;
  int mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < static_cast<float>(val[mav])) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  return x - static_cast<float>(val[mu - 1]) < static_cast<float>(val[mu]) - x ? mu - 1 : mu;
}

// Codes of xb[32] at inverse scale id into Lb, and the weighted sums of the fit (w = x^2):
// sumqx = sum w q x, sumq2 = sum w q^2, q the table values.
void fit_codes(const float* xb, float id, uint8_t* Lb, float* sumqx, float* sumq2) {
  *sumqx = 0.0f;
  *sumq2 = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const int l = best_index(id * xb[j]);
    if (Lb != nullptr) Lb[j] = static_cast<uint8_t>(l);
    const auto q = static_cast<float>(kIq4NlValues[l]);
    const float w = xb[j] * xb[j];
    *sumqx += w * q * xb[j];
    *sumq2 += w * q * q;
  }
}

// quantize_row_iq4_nl_impl's per-block search (no importance weights) for xb[32]: writes the
// first guess's codes into Lb and returns the scale; false (Lb untouched) for an all-zero block.
bool search_scale(const float* xb, int ntry, uint8_t* Lb, float* scale) {
  float amax = 0.0f;
  const float max = max_by_magnitude(xb, 32, &amax);
  if (amax < kGroupMaxEps) return false;
  const auto v0 = static_cast<float>(kIq4NlValues[0]);
  float d = ntry > 0 ? -max / v0 : max / v0;
  float sumqx = 0.0f;
  float sumq2 = 0.0f;
  fit_codes(xb, 1.0f / d, Lb, &sumqx, &sumq2);
  d = sumqx / sumq2;
  float best = d * sumqx;
  for (int itry = -ntry; itry <= ntry; ++itry) {
    const float id = static_cast<float>(itry + kIq4NlValues[0]) / max;
    fit_codes(xb, id, nullptr, &sumqx, &sumq2);
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  *scale = d;
  return true;
}

// 32 codes into 16 bytes: element j low nibble of qs[j], j + 16 high nibble.
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
}

}  // namespace

void iq4_nl_quantize_block(const float* x, uint8_t* dst) {
  uint8_t L[32];
  float scale = 0.0f;
  if (!search_scale(x, -1, L, &scale)) {
    store_u16(dst, fp32_to_fp16(0.0f));
    return;
  }
  store_u16(dst, fp32_to_fp16(scale));
  pack_nibbles(L, dst + 2);
}

void iq4_xs_quantize_block(const float* x, uint8_t* dst) {
  constexpr int kNtry = 7;
  float scales[8];
  float max_scale = 0.0f;  // the sub-block scale of largest magnitude, with its sign
  float amax_scale = 0.0f;
  for (int s = 0; s < 8; ++s) {
    // Codes are recomputed below for every sub-block, so the first guess's are not kept.
    uint8_t unused[32];
    if (!search_scale(x + 32 * s, kNtry, unused, &scales[s])) {
      scales[s] = 0.0f;
      continue;
    }
    const float abs_d = std::fabs(scales[s]);
    if (abs_d > amax_scale) {
      amax_scale = abs_d;
      max_scale = scales[s];
    }
  }
  const float d = -max_scale / 32.0f;
  store_u16(dst, fp32_to_fp16(d));  // an all-zero block stores -0
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  uint16_t scales_h = 0;
  uint8_t* scales_l = dst + 4;
  std::memset(scales_l, 0, 4);
  for (int s = 0; s < 8; ++s) {
    const int l = std::clamp(nearest_int(id * scales[s]), -32, 31);
    const float dl = d * static_cast<float>(l);
    const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
    uint8_t L[32];
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(best_index(idl * x[32 * s + j]));
    pack_nibbles(L, dst + 8 + 16 * s);
    const int ls = l + 32;
    scales_l[s / 2] = static_cast<uint8_t>(scales_l[s / 2] | ((ls & 0xF) << (4 * (s % 2))));
    scales_h = static_cast<uint16_t>(scales_h | ((ls >> 4) << (2 * s)));
  }
  store_u16(dst + 2, scales_h);
}

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
