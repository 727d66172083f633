#include "quant/q6_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/bytes.h"
#include "quant/k_quant_util.h"
#include "quant/q8_k.h"

namespace bitnet::quant {
namespace {

constexpr int kQl = 0;
constexpr int kQh = 128;
constexpr int kScales = 192;
constexpr int kD = 208;
constexpr int kSubBlocks = kQK_K / 16;

// Packs codes L[256] in [0, 63] into ql and qh (layout in q6_k.h).
template <class Code>
void pack_codes(const Code* L, uint8_t* ql, uint8_t* qh) {
  for (int h = 0; h < 2; ++h) {
    const Code* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int q0 = Lh[l];
      const int q1 = Lh[l + 32];
      const int q2 = Lh[l + 64];
      const int q3 = Lh[l + 96];
      ql[64 * h + l] = static_cast<uint8_t>((q0 & 0xF) | ((q2 & 0xF) << 4));
      ql[64 * h + l + 32] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
      qh[32 * h + l] =
          static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
    }
  }
}

}  // namespace

void q6_K_codes(const uint8_t* block, uint8_t codes[256]) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = block + kQl + 64 * h;
    const uint8_t* qh = block + kQh + 32 * h;
    uint8_t* c = codes + 128 * h;
    for (int l = 0; l < 32; ++l) {
      c[l] = static_cast<uint8_t>((ql[l] & 0xF) | (qh[l] & 3) << 4);
      c[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (qh[l] >> 2 & 3) << 4);
      c[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4);
      c[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4);
    }
  }
}

void q6_K_set_codes(const uint8_t codes[256], uint8_t* block) { pack_codes(codes, block + kQl, block + kQh); }

int q6_K_code(const uint8_t* block, int e) {
  const int h = e / 128;
  const int k = (e % 128) / 32;
  const int l = e % 32;
  const uint8_t lo = block[kQl + 64 * h + 32 * (k % 2) + l];
  const int low = k < 2 ? (lo & 0xF) : (lo >> 4);
  const int high = (block[kQh + 32 * h + l] >> (2 * k)) & 3;
  return low | (high << 4);
}

void q6_K_quantize_block(const float* x, uint8_t* dst) {
  int8_t L[kQK_K];
  float scales[kSubBlocks];
  float max_scale = 0.0f;  // the sub-block scale of largest magnitude, with its sign
  float max_abs_scale = 0.0f;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
    const float abs_scale = std::fabs(scales[ib]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[ib];
    }
  }
  if (max_abs_scale < 1e-15f) {  // GROUP_MAX_EPS: an all-zero block
    std::memset(dst, 0, kQ6_KBlockBytes);
    return;
  }

  // Sub-block scales as int8 in units of d = max_scale / -128.
  const float iscale = -128.0f / max_scale;
  store_u16(dst + kD, fp32_to_fp16(1.0f / iscale));
  auto* sc = reinterpret_cast<int8_t*>(dst + kScales);
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    sc[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  }

  // Re-derive the codes against the rounded scales (a zero scale keeps make_qx_quants' codes).
  const float d_all = fp16_to_fp32(load_u16(dst + kD));
  for (int j = 0; j < kSubBlocks; ++j) {
    const float d = d_all * static_cast<float>(sc[j]);
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      const int l = std::clamp(nearest_int(x[16 * j + ii] / d), -32, 31);
      L[16 * j + ii] = static_cast<int8_t>(l + 32);
    }
  }
  pack_codes(L, dst + kQl, dst + kQh);
}

void q6_K_dequantize_block(const uint8_t* src, float* y) {
  const float d = fp16_to_fp32(load_u16(src + kD));
  const auto* sc = reinterpret_cast<const int8_t*>(src + kScales);
  for (int e = 0; e < kQK_K; ++e) {
    const auto q = static_cast<float>(q6_K_code(src, e) - 32);
    y[e] = d * static_cast<float>(sc[e / 16]) * q;
  }
}

float vec_dot_q6_K_q8_K(int64_t n, const uint8_t* w, const uint8_t* a) {
  float sums[8] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const uint8_t* wb = w + b * kQ6_KBlockBytes;
    const uint8_t* ab = a + b * kQ8_KBlockBytes;
    const auto* sc = reinterpret_cast<const int8_t*>(wb + kScales);
    const int8_t* q8 = q8_K_qs(ab);
    int32_t lanes[8] = {};
    for (int e = 0; e < kQK_K; ++e) {
      // ggml forms q * q8 in int16 (|product| <= 32 * 128), then adds scale * that in int32.
      const auto prod = static_cast<int16_t>((q6_K_code(wb, e) - 32) * q8[e]);
      lanes[e % 8] += sc[e / 16] * prod;
    }
    const float d = fp16_to_fp32(load_u16(wb + kD)) * q8_K_d(ab);
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(lanes[l]);
  }
  float sumf = 0.0f;
  for (float s : sums) sumf += s;
  return sumf;
}

}  // namespace bitnet::quant
