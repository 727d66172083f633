#include "backends/cpu/q6_K_lanes.h"

#include <array>
#include <cstring>

#include "quant/q6_k.h"

namespace bitnet::cpu {
namespace {

constexpr int64_t kQ8_KQuantsAt = 4;  // after d (float)

// The codes by position into a lane-order block's three planes (q6_K_lanes.h), and back.
void set_plane_codes(const uint8_t codes[256], uint8_t* block) {
  for (int j = 0; j < 3; ++j) {
    for (int x = 0; x < 64; ++x) {
      const int high = codes[192 + x] >> (2 * j) & 3;
      block[64 * j + x] = static_cast<uint8_t>(codes[64 * j + x] | high << 6);
    }
  }
}

void plane_codes(const uint8_t* block, uint8_t codes[256]) {
  for (int x = 0; x < 64; ++x) codes[192 + x] = 0;
  for (int j = 0; j < 3; ++j) {
    for (int x = 0; x < 64; ++x) {
      const uint8_t b = block[64 * j + x];
      codes[64 * j + x] = b & 63;
      codes[192 + x] = static_cast<uint8_t>(codes[192 + x] | (b >> 6) << (2 * j));
    }
  }
}

}  // namespace

void q6_K_block_to_lanes(const uint8_t* src, uint8_t* dst) {
  uint8_t codes[256], lanes[256];
  quant::q6_K_codes(src, codes);
  for (int pos = 0; pos < 256; ++pos) lanes[pos] = codes[q6_K_lane_element(pos)];
  std::memcpy(dst, src, quant::kQ6_KBlockBytes);  // scales, d
  set_plane_codes(lanes, dst);
}

void q8_K_block_to_lanes(uint8_t* block) {
  std::array<uint8_t, 256> q;
  std::memcpy(q.data(), block + kQ8_KQuantsAt, q.size());
  for (int pos = 0; pos < 256; ++pos) block[kQ8_KQuantsAt + pos] = q[static_cast<size_t>(q6_K_lane_element(pos))];
}

void dequantize_q6_K_lanes_row(const uint8_t* row, int64_t n_cols, float* dst) {
  for (int64_t b = 0; b < n_cols / 256; ++b) {
    // The block back in the file's order, then ggml's dequantizer.
    const uint8_t* blk = row + b * quant::kQ6_KBlockBytes;
    uint8_t lanes[256], codes[256], file_order[quant::kQ6_KBlockBytes];
    plane_codes(blk, lanes);
    for (int pos = 0; pos < 256; ++pos) codes[q6_K_lane_element(pos)] = lanes[pos];
    std::memcpy(file_order, blk, sizeof file_order);
    quant::q6_K_set_codes(codes, file_order);
    quant::q6_K_dequantize_block(file_order, dst + 256 * b);
  }
}

}  // namespace bitnet::cpu
