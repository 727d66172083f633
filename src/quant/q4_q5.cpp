#include "quant/q4_q5.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/fp16.h"
#include "quant/bytes.h"
#include "quant/q8_0.h"

namespace bitnet::quant {
namespace {

constexpr int kHalf = kQ4_5BlockElems / 2;

// ggml's C casts `(int8_t)f` / `(uint8_t)f`: truncate toward zero, keep the low 8 bits. For
// finite blocks the value is always in 0..17 (Q4) or 0..33 (Q5). A value outside int32 (NaN, or
// inf when 1/d overflows for a subnormal d) is 0, as x86's cvttss2si (0x80000000) gives; the
// stored d is then 0 too.
uint8_t trunc_low_byte(float v) {
  if (!(v > -2147483648.0f && v < 2147483648.0f)) return 0;
  return static_cast<uint8_t>(static_cast<int32_t>(v));
}

// Smallest and largest element of a block.
void min_max(const float* x, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < kQ4_5BlockElems; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// The element of largest magnitude, with its sign (the first one on ties).
float signed_amax(const float* x) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kQ4_5BlockElems; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Packs 32 5-bit codes: low nibbles as Q4 (j | j+16 << 4), fifth bits into the uint32 qh.
void pack_q5(const uint8_t* q, uint8_t* qh_dst, uint8_t* qs) {
  uint32_t qh = 0;
  for (int j = 0; j < kHalf; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + kHalf] & 0x0F) << 4));
    qh |= static_cast<uint32_t>((q[j] & 0x10u) >> 4) << j;
    qh |= static_cast<uint32_t>((q[j + kHalf] & 0x10u) >> 4) << (j + kHalf);
  }
  store_u32(qh_dst, qh);
}

// The 5-bit codes of a Q5 block, in element order.
void unpack_q5(const uint8_t* qh_src, const uint8_t* qs, int* q) {
  const uint32_t qh = load_u32(qh_src);
  for (int j = 0; j < kHalf; ++j) {
    const int xh_0 = static_cast<int>(((qh >> j) << 4) & 0x10);
    const int xh_1 = static_cast<int>((qh >> (j + 12)) & 0x10);
    q[j] = (qs[j] & 0x0F) | xh_0;
    q[j + kHalf] = (qs[j] >> 4) | xh_1;
  }
}

}  // namespace

void q4_0_quantize_block(const float* x, uint8_t* dst) {
  const float d = signed_amax(x) / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(dst, fp32_to_fp16(d));
  for (int j = 0; j < kHalf; ++j) {
    const uint8_t q0 = std::min<uint8_t>(15, trunc_low_byte(x[j] * id + 8.5f));
    const uint8_t q1 = std::min<uint8_t>(15, trunc_low_byte(x[j + kHalf] * id + 8.5f));
    dst[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

void q4_1_quantize_block(const float* x, uint8_t* dst) {
  float min = 0.0f;
  float max = 0.0f;
  min_max(x, &min, &max);
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(dst, fp32_to_fp16(d));
  store_u16(dst + 2, fp32_to_fp16(min));
  for (int j = 0; j < kHalf; ++j) {
    const uint8_t q0 = std::min<uint8_t>(15, trunc_low_byte((x[j] - min) * id + 0.5f));
    const uint8_t q1 = std::min<uint8_t>(15, trunc_low_byte((x[j + kHalf] - min) * id + 0.5f));
    dst[4 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

void q5_0_quantize_block(const float* x, uint8_t* dst) {
  const float d = signed_amax(x) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(dst, fp32_to_fp16(d));
  uint8_t q[kQ4_5BlockElems];
  for (int j = 0; j < kQ4_5BlockElems; ++j) {
    q[j] = std::min<uint8_t>(31, trunc_low_byte(x[j] * id + 16.5f));
  }
  pack_q5(q, dst + 2, dst + 6);
}

void q5_1_quantize_block(const float* x, uint8_t* dst) {
  float min = 0.0f;
  float max = 0.0f;
  min_max(x, &min, &max);
  const float d = (max - min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(dst, fp32_to_fp16(d));
  store_u16(dst + 2, fp32_to_fp16(min));
  uint8_t q[kQ4_5BlockElems];
  // No clamp to 31 here (ggml has none): (max - min) * id + 0.5 stays below 32 for finite x.
  for (int j = 0; j < kQ4_5BlockElems; ++j) q[j] = trunc_low_byte((x[j] - min) * id + 0.5f);
  pack_q5(q, dst + 4, dst + 8);
}

void q4_0_dequantize_block(const uint8_t* src, float* y) {
  const float d = fp16_to_fp32(load_u16(src));
  const uint8_t* qs = src + 2;
  for (int j = 0; j < kHalf; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + kHalf] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void q4_1_dequantize_block(const uint8_t* src, float* y) {
  const float d = fp16_to_fp32(load_u16(src));
  const float m = fp16_to_fp32(load_u16(src + 2));
  const uint8_t* qs = src + 4;
  for (int j = 0; j < kHalf; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + kHalf] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

void q5_0_dequantize_block(const uint8_t* src, float* y) {
  const float d = fp16_to_fp32(load_u16(src));
  int q[kQ4_5BlockElems];
  unpack_q5(src + 2, src + 6, q);
  for (int j = 0; j < kQ4_5BlockElems; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
}

void q5_1_dequantize_block(const uint8_t* src, float* y) {
  const float d = fp16_to_fp32(load_u16(src));
  const float m = fp16_to_fp32(load_u16(src + 2));
  int q[kQ4_5BlockElems];
  unpack_q5(src + 4, src + 8, q);
  for (int j = 0; j < kQ4_5BlockElems; ++j) y[j] = static_cast<float>(q[j]) * d + m;
}

float vec_dot_q4_0_q8_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQ4_5BlockElems; ++b) {
    const uint8_t* wb = w + b * kQ4_0BlockBytes;
    const uint8_t* ab = a + b * kQ8_0BlockBytes;
    const uint8_t* qs = wb + 2;
    const auto* qa = reinterpret_cast<const int8_t*>(ab + 2);
    int sumi0 = 0;
    int sumi1 = 0;
    for (int j = 0; j < kHalf; ++j) {
      sumi0 += ((qs[j] & 0x0F) - 8) * qa[j];
      sumi1 += ((qs[j] >> 4) - 8) * qa[j + kHalf];
    }
    const int sumi = sumi0 + sumi1;
    sumf += static_cast<float>(sumi) * fp16_to_fp32(load_u16(wb)) * fp16_to_fp32(load_u16(ab));
  }
  return sumf;
}

float vec_dot_q4_1_q8_1(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQ4_5BlockElems; ++b) {
    const uint8_t* wb = w + b * kQ4_1BlockBytes;
    const uint8_t* ab = a + b * kQ8_1BlockBytes;
    const uint8_t* qs = wb + 4;
    const auto* qa = reinterpret_cast<const int8_t*>(ab + 4);
    int sumi0 = 0;
    int sumi1 = 0;
    for (int j = 0; j < kHalf; ++j) {
      sumi0 += (qs[j] & 0x0F) * qa[j];
      sumi1 += (qs[j] >> 4) * qa[j + kHalf];
    }
    const int sumi = sumi0 + sumi1;
    const float d = fp16_to_fp32(load_u16(wb)) * fp16_to_fp32(load_u16(ab));
    const float m_s = fp16_to_fp32(load_u16(wb + 2)) * fp16_to_fp32(load_u16(ab + 2));
    sumf += d * static_cast<float>(sumi) + m_s;
  }
  return sumf;
}

float vec_dot_q5_0_q8_0(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sumf = 0.0f;
  int q[kQ4_5BlockElems];
  for (int64_t b = 0; b < n / kQ4_5BlockElems; ++b) {
    const uint8_t* wb = w + b * kQ5_0BlockBytes;
    const uint8_t* ab = a + b * kQ8_0BlockBytes;
    unpack_q5(wb + 2, wb + 6, q);
    const auto* qa = reinterpret_cast<const int8_t*>(ab + 2);
    int sumi0 = 0;
    int sumi1 = 0;
    for (int j = 0; j < kHalf; ++j) {
      sumi0 += (q[j] - 16) * qa[j];
      sumi1 += (q[j + kHalf] - 16) * qa[j + kHalf];
    }
    const int sumi = sumi0 + sumi1;
    const float d = fp16_to_fp32(load_u16(wb)) * fp16_to_fp32(load_u16(ab));
    sumf += d * static_cast<float>(sumi);
  }
  return sumf;
}

float vec_dot_q5_1_q8_1(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sumf = 0.0f;
  int q[kQ4_5BlockElems];
  for (int64_t b = 0; b < n / kQ4_5BlockElems; ++b) {
    const uint8_t* wb = w + b * kQ5_1BlockBytes;
    const uint8_t* ab = a + b * kQ8_1BlockBytes;
    unpack_q5(wb + 4, wb + 8, q);
    const auto* qa = reinterpret_cast<const int8_t*>(ab + 4);
    int sumi0 = 0;
    int sumi1 = 0;
    for (int j = 0; j < kHalf; ++j) {
      sumi0 += q[j] * qa[j];
      sumi1 += q[j + kHalf] * qa[j + kHalf];
    }
    const int sumi = sumi0 + sumi1;
    const float d = fp16_to_fp32(load_u16(wb)) * fp16_to_fp32(load_u16(ab));
    const float m_s = fp16_to_fp32(load_u16(wb + 2)) * fp16_to_fp32(load_u16(ab + 2));
    sumf += d * static_cast<float>(sumi) + m_s;
  }
  return sumf;
}

}  // namespace bitnet::quant
