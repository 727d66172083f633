#include "quant/tq.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/check.h"
#include "core/fp16.h"
#include "quant/tq1_0.h"
#include "quant/tq2_0.h"

namespace bitnet::quant {
namespace {

void pack_block(GgmlType type, const uint8_t* codes, uint16_t d, uint8_t* dst) {
  if (type == GgmlType::kTQ1_0) {
    tq1_0_pack_block(codes, d, dst);
  } else {
    tq2_0_pack_block(codes, d, dst);
  }
}

uint16_t unpack_block(GgmlType type, const uint8_t* src, uint8_t* codes) {
  return type == GgmlType::kTQ1_0 ? tq1_0_unpack_block(src, codes) : tq2_0_unpack_block(src, codes);
}

// ggml's ternary rounding: lroundf(x * id) + 1 (halves away from zero). A non-finite product
// only arises when 1/amax overflows (subnormal amax); x86 ggml then gets lroundf() ==
// LONG_MIN, which its int arithmetic turns into code 1, and d is stored as 0 anyway.
uint8_t ternary_code(float x, float id) {
  const float v = x * id;
  if (!std::isfinite(v)) return 1;
  return static_cast<uint8_t>(std::lround(v) + 1);
}

Status bad_code(int64_t i) {
  return corrupt_file(fmt::format("ternary code 3 (unused) at element {}", i));
}

}  // namespace

int64_t tq_block_bytes(GgmlType type) {
  BITNET_CHECK(type == GgmlType::kTQ1_0 || type == GgmlType::kTQ2_0);
  return type == GgmlType::kTQ1_0 ? kTq1_0BlockBytes : kTq2_0BlockBytes;
}

void tq_quantize(GgmlType type, const float* x, int64_t n, uint8_t* dst) {
  BITNET_CHECK(n % kTqBlockElems == 0);
  const int64_t block_bytes = tq_block_bytes(type);
  uint8_t codes[kTqBlockElems];
  for (int64_t b = 0; b < n / kTqBlockElems; ++b) {
    const float* xb = x + b * kTqBlockElems;
    float amax = 0.0f;
    for (int64_t j = 0; j < kTqBlockElems; ++j) amax = std::max(amax, std::fabs(xb[j]));
    // The codes use 1/amax of the unrounded amax; only the stored d is rounded to fp16.
    const float id = amax != 0.0f ? 1.0f / amax : 0.0f;
    for (int64_t j = 0; j < kTqBlockElems; ++j) codes[j] = ternary_code(xb[j], id);
    pack_block(type, codes, fp32_to_fp16(amax), dst + b * block_bytes);
  }
}

void tq_encode(GgmlType type, const uint8_t* codes, const float* scales, int64_t n, uint8_t* dst) {
  BITNET_CHECK(n % kTqBlockElems == 0);
  const int64_t block_bytes = tq_block_bytes(type);
  for (int64_t b = 0; b < n / kTqBlockElems; ++b) {
    pack_block(type, codes + b * kTqBlockElems, fp32_to_fp16(scales[b]), dst + b * block_bytes);
  }
}

Status tq_decode(GgmlType type, const uint8_t* src, int64_t n, uint8_t* codes, float* scales) {
  BITNET_CHECK(n % kTqBlockElems == 0);
  const int64_t block_bytes = tq_block_bytes(type);
  for (int64_t b = 0; b < n / kTqBlockElems; ++b) {
    uint8_t* cb = codes + b * kTqBlockElems;
    scales[b] = fp16_to_fp32(unpack_block(type, src + b * block_bytes, cb));
    for (int64_t j = 0; j < kTqBlockElems; ++j) {
      if (cb[j] > 2) return bad_code(b * kTqBlockElems + j);
    }
  }
  return Status::ok_status();
}

Status tq_dequantize(GgmlType type, const uint8_t* src, int64_t n, float* dst) {
  BITNET_CHECK(n % kTqBlockElems == 0);
  const int64_t block_bytes = tq_block_bytes(type);
  uint8_t codes[kTqBlockElems];
  for (int64_t b = 0; b < n / kTqBlockElems; ++b) {
    const float d = fp16_to_fp32(unpack_block(type, src + b * block_bytes, codes));
    for (int64_t j = 0; j < kTqBlockElems; ++j) {
      if (codes[j] > 2) return bad_code(b * kTqBlockElems + j);
      dst[b * kTqBlockElems + j] = static_cast<float>(codes[j] - 1) * d;
    }
  }
  return Status::ok_status();
}

}  // namespace bitnet::quant
