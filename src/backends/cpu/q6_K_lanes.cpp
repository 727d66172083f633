#include "backends/cpu/q6_K_lanes.h"

#include <array>
#include <cstring>

#include "core/fp16.h"
#include "gguf/types.h"

namespace bitnet::cpu {
namespace {

constexpr int64_t kQ6_KBlockBytes = 210;
constexpr int64_t kQ8_KQuantsAt = 4;  // after d (float)

// A block's 256 codes (0..63) in position order, from or into ggml's bytes: ql[64h + l] holds
// the low nibbles of positions 128h + l and (high nibble) 128h + 64 + l; bits 2k, 2k+1 of
// qh[32h + l] the high bits of position 128h + 32k + l.
void unpack_codes(const uint8_t* blk, uint8_t codes[256]) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = blk + 64 * h;
    const uint8_t* qh = blk + 128 + 32 * h;
    uint8_t* c = codes + 128 * h;
    for (int l = 0; l < 32; ++l) {
      c[l] = static_cast<uint8_t>((ql[l] & 15) | (qh[l] & 3) << 4);
      c[l + 32] = static_cast<uint8_t>((ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4);
      c[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4);
      c[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4);
    }
  }
}

void pack_codes(const uint8_t codes[256], uint8_t* blk) {
  for (int h = 0; h < 2; ++h) {
    uint8_t* ql = blk + 64 * h;
    uint8_t* qh = blk + 128 + 32 * h;
    const uint8_t* c = codes + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((c[l] & 15) | (c[l + 64] & 15) << 4);
      ql[l + 32] = static_cast<uint8_t>((c[l + 32] & 15) | (c[l + 96] & 15) << 4);
      qh[l] = static_cast<uint8_t>((c[l] >> 4) | (c[l + 32] >> 4) << 2 | (c[l + 64] >> 4) << 4 | (c[l + 96] >> 4) << 6);
    }
  }
}

}  // namespace

void q6_K_block_to_lanes(const uint8_t* src, uint8_t* dst) {
  uint8_t codes[256], lanes[256];
  unpack_codes(src, codes);
  for (int pos = 0; pos < 256; ++pos) lanes[pos] = codes[q6_K_lane_element(pos)];
  pack_codes(lanes, dst);
  std::memcpy(dst + 192, src + 192, 16 + 2);  // scales, d
}

void q8_K_block_to_lanes(uint8_t* block) {
  std::array<uint8_t, 256> q;
  std::memcpy(q.data(), block + kQ8_KQuantsAt, q.size());
  for (int pos = 0; pos < 256; ++pos) block[kQ8_KQuantsAt + pos] = q[static_cast<size_t>(q6_K_lane_element(pos))];
}

void dequantize_q6_K_lanes_row(const uint8_t* row, int64_t n_cols, float* dst) {
  for (int64_t b = 0; b < n_cols / 256; ++b) {
    const uint8_t* blk = row + b * kQ6_KBlockBytes;
    uint8_t codes[256];
    unpack_codes(blk, codes);
    uint16_t d16;
    std::memcpy(&d16, blk + 208, sizeof d16);
    const float d = fp16_to_fp32(d16);
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
    float* y = dst + 256 * b;
    // As ggml's dequantize_row_q6_K, element by element: d * scale * (code - 32).
    for (int pos = 0; pos < 256; ++pos) {
      const int e = q6_K_lane_element(pos);
      y[e] = d * static_cast<float>(sc[e / 16]) * static_cast<float>(codes[pos] - 32);
    }
  }
}

}  // namespace bitnet::cpu
