#include "quant/q4_k_q5_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/bytes.h"
#include "quant/k_quant_util.h"
#include "quant/q8_k.h"

namespace bitnet::quant {
namespace {

constexpr int kSubBlocks = kQK_K / 32;
// Byte offsets shared by both formats; Q5_K's qh sits between scales and qs.
constexpr int kD = 0;
constexpr int kDmin = 2;
constexpr int kScales = 4;
constexpr int kQ4Qs = 16;
constexpr int kQ5Qh = 16;
constexpr int kQ5Qs = 48;

// The search parameters of the two reference quantizers' make_qkx2_quants calls.
struct Search {
  int nmax;     // 15 (Q4_K) or 31 (Q5_K)
  float rmin;   // -1 (Q4_K) or -0.5 (Q5_K)
  int nstep;    // 20 (Q4_K) or 15 (Q5_K)
};

// The part the two quantizers share: per-sub-block scale and min by weighted search, 6-bit
// sub-block scales/mins under fp16 d/dmin (written to dst[0..15]), then codes L[256] in
// [0, nmax] re-derived against the rounded scales.
void quantize_scales_and_codes(const float* x, const Search& s, uint8_t* dst, uint8_t* L) {
  float scales[kSubBlocks];
  float mins[kSubBlocks];
  float weights[32];
  uint8_t Laux[32];
  float max_scale = 0.0f;  // scales are >= 0: the min is subtracted first
  float max_min = 0.0f;
  for (int j = 0; j < kSubBlocks; ++j) {
    const float* xb = x + 32 * j;
    // Weights av_x + |x|: the rms of the sub-block lifts small elements.
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xb[l] * xb[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xb[l]);
    scales[j] = make_qkx2_quants(32, s.nmax, xb, weights, L + 32 * j, &mins[j], Laux, s.rmin,
                                 0.1f, s.nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }

  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t ls[kSubBlocks];
  uint8_t lm[kSubBlocks];
  for (int j = 0; j < kSubBlocks; ++j) {
    // ggml stores nearest_int's int in a uint8_t (mod 256) before clamping to 63.
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  pack_scale_min_k4(ls, lm, dst + kScales);
  store_u16(dst + kD, fp32_to_fp16(max_scale / 63.0f));
  store_u16(dst + kDmin, fp32_to_fp16(max_min / 63.0f));

  const float d_all = fp16_to_fp32(load_u16(dst + kD));
  const float dmin_all = fp16_to_fp32(load_u16(dst + kDmin));
  for (int j = 0; j < kSubBlocks; ++j) {
    uint8_t sc = 0;
    uint8_t m = 0;
    get_scale_min_k4(j, dst + kScales, &sc, &m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;  // keeps make_qkx2_quants' codes
    const float dm = dmin_all * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii) {
      const int l = std::clamp(nearest_int((x[32 * j + ii] + dm) / d), 0, s.nmax);
      L[32 * j + ii] = static_cast<uint8_t>(l);
    }
  }
}

// Sub-block scale d * sc and min dmin * m of sub-block j, as the dequantizers form them.
void sub_block_scale_min(const uint8_t* block, int j, float* d, float* m) {
  uint8_t sc = 0;
  uint8_t mn = 0;
  get_scale_min_k4(j, block + kScales, &sc, &mn);
  *d = fp16_to_fp32(load_u16(block + kD)) * static_cast<float>(sc);
  *m = fp16_to_fp32(load_u16(block + kDmin)) * static_cast<float>(mn);
}

// Code of element e = 64c + 32k + l: nibble k of qs[32c + l], plus (Q5_K) 16 * bit e/32 of qh[l].
int q4_K_code(const uint8_t* qs, int e) {
  const uint8_t b = qs[32 * (e / 64) + e % 32];
  return (e / 32) % 2 == 0 ? (b & 0xF) : (b >> 4);
}

int q5_K_code(const uint8_t* block, int e) {
  const int high = (block[kQ5Qh + e % 32] >> (e / 32)) & 1;
  return q4_K_code(block + kQ5Qs, e) + 16 * high;
}

// The K dot product given each element's code: see q4_k_q5_k.h for the order of operations.
template <typename CodeOf>
float vec_dot_k(int64_t n, const uint8_t* w, int64_t block_bytes, const uint8_t* a,
                CodeOf code_of) {
  float sums[8] = {};
  float sumf = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* wb = w + b * block_bytes;
    const uint8_t* ab = a + b * kQ8_KBlockBytes;
    uint8_t sc[kSubBlocks];
    uint8_t mn[kSubBlocks];
    for (int j = 0; j < kSubBlocks; ++j) get_scale_min_k4(j, wb + kScales, &sc[j], &mn[j]);

    // The min terms: each 16-element bsum of the activations times its sub-block's min.
    int sumi = 0;
    for (int g = 0; g < kQK_K / 16; ++g) sumi += q8_K_bsum(ab, g) * mn[g / 2];

    const int8_t* q8 = q8_K_qs(ab);
    int32_t lanes[8] = {};
    for (int e = 0; e < kQK_K; ++e) {
      const auto prod = static_cast<int16_t>(q8[e] * code_of(wb, e));  // int16 in ggml
      lanes[e % 8] += static_cast<int32_t>(sc[e / 32]) * prod;
    }
    const float d = fp16_to_fp32(load_u16(wb + kD)) * q8_K_d(ab);
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(lanes[l]);
    const float dmin = fp16_to_fp32(load_u16(wb + kDmin)) * q8_K_d(ab);
    sumf -= dmin * static_cast<float>(sumi);
  }
  for (float s : sums) sumf += s;
  return sumf;
}

}  // namespace

void q4_K_quantize_block(const float* x, uint8_t* dst) {
  uint8_t L[kQK_K];
  quantize_scales_and_codes(x, Search{15, -1.0f, 20}, dst, L);
  uint8_t* qs = dst + kQ4Qs;
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + l + 32] << 4));
    }
  }
}

void q5_K_quantize_block(const float* x, uint8_t* dst) {
  uint8_t L[kQK_K];
  quantize_scales_and_codes(x, Search{31, -0.5f, 15}, dst, L);
  uint8_t* qh = dst + kQ5Qh;
  uint8_t* qs = dst + kQ5Qs;
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      int lo = L[64 * c + l];  // sub-block 2c: qh bit 2c
      int hi = L[64 * c + l + 32];  // sub-block 2c + 1: qh bit 2c + 1
      if (lo > 15) {
        lo -= 16;
        qh[l] = static_cast<uint8_t>(qh[l] | (1 << (2 * c)));
      }
      if (hi > 15) {
        hi -= 16;
        qh[l] = static_cast<uint8_t>(qh[l] | (2 << (2 * c)));
      }
      qs[32 * c + l] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void q4_K_dequantize_block(const uint8_t* src, float* y) {
  for (int j = 0; j < kSubBlocks; ++j) {
    float d = 0.0f;
    float m = 0.0f;
    sub_block_scale_min(src, j, &d, &m);
    for (int e = 32 * j; e < 32 * j + 32; ++e) {
      y[e] = d * static_cast<float>(q4_K_code(src + kQ4Qs, e)) - m;
    }
  }
}

void q5_K_dequantize_block(const uint8_t* src, float* y) {
  for (int j = 0; j < kSubBlocks; ++j) {
    float d = 0.0f;
    float m = 0.0f;
    sub_block_scale_min(src, j, &d, &m);
    for (int e = 32 * j; e < 32 * j + 32; ++e) {
      y[e] = d * static_cast<float>(q5_K_code(src, e)) - m;
    }
  }
}

float vec_dot_q4_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  return vec_dot_k(n, w, kQ4_KBlockBytes, a,
                   [](const uint8_t* block, int e) { return q4_K_code(block + kQ4Qs, e); });
}

float vec_dot_q5_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  return vec_dot_k(n, w, kQ5_KBlockBytes, a, q5_K_code);
}

}  // namespace bitnet::quant
